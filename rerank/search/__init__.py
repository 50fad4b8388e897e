"""Using a trained model: beam search, and what attention gives.

``alignment``: alignments, UNK replacement and attention weights from a model's attention.
``beam``: batched beam search.
``right_to_left``: an n-best list reranked by right-to-left models with the left-to-right ones.
``translate``: a corpus translated: 1-best text, n-best lists, alignments and attention.
"""
