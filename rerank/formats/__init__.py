"""Moses' files and the project's own, read and written as streams. Torch-free.

``arpa``: the structure of an ARPA back-off language model (its explicit n-grams and back-off weights), and a
language model's kind told from its first line.
``dictionaries``: word dictionaries for UNK replacement.
``files``: text files: gzip, ``-`` for stdin and stdout, atomic output, line-numbered reading.
``moses_ini``: ``moses.ini``: feature functions and weights.
``nbest``: Moses n-best lists.
``phrase_table``: Moses phrase tables.
``pipeline``: the host's work in threads beside the model's: reading and parsing ahead, formatting and writing behind.
``relatedness``: references unrelated to the hypotheses (another set's, shifted by a line), found from shared words.
``scored``: the record beside a scored n-best list of what each feature was computed from (``--reuse``).
``shards``: contiguous parts of a file (``--shard I/N``), their manifests and their merging.
``streams``: records read as streams: the first one, and chunks.
``tokenization``: hypotheses and references tokenized, escaped or cased differently, found from their punctuation.
``tokens``: what a tokenised sentence is.
``weights``: log-linear weights: YAML weights files and moses.ini weights.
"""
