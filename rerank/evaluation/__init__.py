"""Evaluation of translations: the scores of ``rerank evaluate``, ``rerank oracle`` and the studies, and figures.

``metrics``: BLEU and chrF (sacrebleu), BLEU by source length, and oracle BLEU.
``plots``: figures: BLEU by source length and attention heatmaps.
"""
