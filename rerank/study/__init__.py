"""The end-to-end study (``experiment``, run by ``rerank experiment``): its config (``config``), the steps and
their ``commands.sh`` (``runner``, ``steps``), the models (``models``), Moses (``moses``), the candidate pools
(``lists``), the rescoring rows (``rows``, ``row_tuning``), the phrase-table route (``route``) and the report
(``report``); BLEU and chrF with BLEU by source length (``evaluation``), and figures (``plots``)."""
