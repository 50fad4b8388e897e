"""The end-to-end study (``experiment``), BLEU and chrF with BLEU by source length (``evaluation``),
and figures (``plots``)."""
