"""Models: vocabularies, batching of ids, the two architectures (Cho et al.'s encoder-decoder and RNNsearch),
their torch-free configuration, checkpoints and devices; built from a :class:`~rerank.models.config.ModelConfig`."""
