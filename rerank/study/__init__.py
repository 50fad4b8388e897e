"""The end-to-end study run by ``rerank experiment``.

``checks``: everything an experiment config names, checked before its first step.
``config``: the study's config.
``distill``: a teacher's translations of the training sources, the corpus of the student distilled from it.
``experiment``: the study from start to end.
``lists``: the candidate pools the rescoring rows rerank.
``models``: the study's models, trained or given.
``moses``: Moses in the study: its moses.ini, a model's phrase-table column, decoding.
``report``: the report, ``results.md`` and ``results.json``.
``route``: the phrase-table route: Moses re-tuned with a model's column.
``row_tuning``: each rescoring row tuned on dev, applied to dev and test, and scored.
``rows``: the rows of the results table.
``runner``: :class:`~rerank.study.runner.StepRunner`: a step skipped where its outputs exist, logged to ``commands.sh``.
``steps``: the steps that write one file each, through the library function of their command.
"""
