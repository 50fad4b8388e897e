"""The subcommands of ``rerank``, one module each (see :mod:`rerank.cli`).

``align``: ``rerank align``, a model's attention over a sentence pair.
``apply``: ``rerank apply``, an n-best list reranked with weights.
``arguments``: argument types and actions the commands share.
``average``: ``rerank average``, a model from the mean of its kept checkpoints.
``cut_nbest``: ``rerank cut-nbest``, each sentence's first N hypotheses.
``distill``: ``rerank distill``, a teacher's translations of the training sources, and a student trained on them.
``evaluate``: ``rerank evaluate``, BLEU and chrF.
``experiment``: ``rerank experiment``, the end-to-end study.
``merge_nbest``: ``rerank merge-nbest``, the union of several systems' n-best lists.
``merge_shards``: ``rerank merge-shards``, the parts of a ``--shard`` run joined.
``oracle``: ``rerank oracle``, the oracle BLEU of n-best lists.
``prepare``: ``rerank prepare``, a training corpus prepared once.
``score_nbest``: ``rerank score-nbest``, feature values appended to an n-best list.
``score_table``: ``rerank score-table``, a model's score appended to a phrase table.
``train``: ``rerank train``, a model trained from its config.
``translate``: ``rerank translate``, beam search with a trained model.
``tune``: ``rerank tune``, log-linear weights tuned against BLEU.
"""
