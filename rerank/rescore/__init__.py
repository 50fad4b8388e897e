"""n-best rescoring: the feature protocol (``feature``), appending feature values to n-best lists
(``append``), reranking them with weights (``rerank``) and the union of several systems' lists
(``merge``). Torch-free: neural features come from ``rerank.features``, built by the commands."""
