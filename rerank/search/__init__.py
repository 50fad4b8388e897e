"""Using a trained model: forced-decoding scores of (source, target) pairs (``scoring``) and of a whole
phrase table (``table``), batched beam search (``beam``), corpus translation with n-best output
(``translate``), and what attention gives: alignments, UNK replacement, heatmap data (``alignment``)."""
