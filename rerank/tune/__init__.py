"""Tuning log-linear weights against BLEU on n-best lists: MERT, PRO and batch MIRA, and the decoder loop.

``config``: the settings, with Moses' defaults.
``crossval``: k-fold cross-validation of tuning: the BLEU that tuned weights carry over to unseen sentences.
``data``: n-best lists (merged across tuning iterations) as arrays.
``derived``: features made from a list's own columns while tuning: tied weights, per-word forms.
``envelope``: Och's exact line search.
``folds``: the tuning sentences dealt into k folds, for cross-validation and MERT's held-out choice of a run.
``loop``: decode, accumulate, re-optimise, as ``mert-moses.pl``.
``mert``: minimum error rate training.
``mira``: batch k-best MIRA.
``optimize``: the optimiser the configuration names, called once.
``oracle``: the oracle BLEU of an n-best list.
``parallel``: the decoder run on parts of the source at once.
``pro``: pairwise ranking optimisation.
``registry``: the optimisers by name, each with its settings and tuning function.
``standardize``: feature standardisation for PRO and MIRA.
``stats``: BLEU sufficient statistics per hypothesis.
``templates``: shell command templates and the child processes they start.
``tuning``: tuning as a user or a study calls it.
"""
