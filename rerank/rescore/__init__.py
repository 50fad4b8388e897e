"""n-best rescoring. Torch-free: neural features come from ``rerank.features``, built by the commands.

``append``: feature values appended to every hypothesis of an n-best list.
``cut``: each sentence's first N hypotheses.
``feature``: the protocol every feature function provides.
``forced``: Moses' own feature values for given hypotheses, by forced decoding.
``merge``: the union of several systems' n-best lists.
``rerank``: an n-best list reranked with log-linear weights.
``union``: the union in which every hypothesis has Moses' features.
"""
