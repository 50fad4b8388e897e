"""Using a trained model: beam search, and what attention gives.

``alignment``: alignments, UNK replacement and attention weights from a model's attention.
``beam``: batched beam search.
``translate``: a corpus translated: 1-best text, n-best lists, alignments and attention.
"""
