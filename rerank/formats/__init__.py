"""Moses' files and the project's own, read and written as streams: text files with gzip and atomic
output (``files``), n-best lists, phrase tables, ``moses.ini``, weights files, UNK dictionaries,
and what they share (``tokens``, ``streams``). Torch-free."""
