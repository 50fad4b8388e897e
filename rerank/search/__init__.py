"""Using a trained model: forced-decoding scores, beam search, and what attention gives.

``alignment``: alignments, UNK replacement and attention weights from a model's attention.
``beam``: batched beam search.
``ray_table``: a phrase table scored on a Ray cluster.
``scoring``: forced-decoding scores of (source, target) pairs.
``table``: a model's score appended to every phrase pair of a phrase table.
``translate``: a corpus translated: 1-best text, n-best lists, alignments and attention.
"""
