"""Tuning log-linear weights against BLEU on n-best lists: MERT, PRO and batch MIRA, and the decoder loop.

``stats``: BLEU sufficient statistics per hypothesis. ``data``: n-best lists (merged across
tuning iterations) as arrays. ``envelope``: Och's exact line search. ``mert``, ``pro``, ``mira``:
the optimisers; ``optimize``: the one the configuration names. ``loop``: decode, accumulate,
re-optimise, as ``mert-moses.pl``. ``config``: the settings, with Moses' defaults.
"""
