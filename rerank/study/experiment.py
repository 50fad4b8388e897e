"""The end-to-end study: neural features for a real Moses system, as Cho et al. 2014 (Table 1) and
Bahdanau et al. 2014 (Fig. 2) ran it, on any data given in the same layout.

Every step calls the library function behind a ``rerank`` command (or runs a Moses program) and logs that
command line to ``commands.sh`` in the output directory, so that each file, and each number of the results
table, can be reproduced by hand. A step whose outputs exist is skipped, so a stopped run picks up where it
was (training resumes from its checkpoint). The study, as :meth:`Experiment.run` reads:

1. the models (:mod:`~rerank.study.models`): the encoder-decoder and RNNsearch, and where the config names
   them, more RNNsearch seeds (an ensemble), a right-to-left RNNsearch, a target-to-source one (the channel),
   one trained on a phrase table's pairs (a phrase-table column) and a CSLM, trained or taken as they are;
2. Moses (:mod:`~rerank.study.moses`): the moses.ini it decodes with (the model filtered to dev and test),
   the phrase table scored with the encoder-decoder, and, with ``moses.nbest_size``, Moses' n-best lists;
3. the candidate pools (:mod:`~rerank.study.lists`): the neural systems' translations and RNNsearch's
   n-best lists; Moses' lists with RNN0, RNNsearch0, LM1, WP1 and UNK1 (and the extra models' features);
   their union with RNNsearch's lists (with Moses' features on every line where Moses runs); the
   consensus features and each sentence's first N hypotheses;
4. the rescoring rows (:mod:`~rerank.study.rows`, :mod:`~rerank.study.row_tuning`): each row tuned on dev with
   each optimiser and seed, applied to dev and test, scored, beside the oracle BLEU of its pool;
5. the phrase-table route (``decoder_tuning``, :mod:`~rerank.study.route`): Moses re-tuned with Moses in the
   loop, as it is and with each model's phrase-table column, ``mert-moses.pl`` beside it, a system's own
   n-best lists rescored;
6. ``results.md`` and ``results.json`` (:mod:`~rerank.study.report`), and BLEU by source length (table and
   PNG).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from rerank.errors import RerankError
from rerank.study.checks import check_experiment
from rerank.study.config import ExperimentConfig
from rerank.study.lists import SPLITS, UNION_SYSTEMS, Scoring, cut_lists, feature_config, translate, union
from rerank.study.models import extra_features, train_models
from rerank.study.moses import add_column, decode, decoding_ini, placeholder_ini
from rerank.study.report import Report
from rerank.study.route import run_route
from rerank.study.row_tuning import moses_labels, oracles, tune_rows
from rerank.study.rows import NEW_FEATURES, ROWS, Row, consensus_rows, extended_rows, forced_rows, size_rows
from rerank.study.runner import Clock, StepRunner

logger = logging.getLogger(__name__)


class Experiment:
    """Runs the study of an :class:`ExperimentConfig` (see the module docstring)."""

    def __init__(self, config: ExperimentConfig, force: bool = False, source: str = "the experiment config"):
        self.config = config
        self.source = source  # the config's file, for messages
        self.steps = StepRunner(config.output_dir, force)
        self.out = self.steps.out
        self.clock = Clock()  # from the start of run()

    def run(self) -> Path:
        from rerank.models.device import torch_device, torch_threads

        try:
            torch_device(self.config.device)  # checked before the first step, as the inputs are
        except RerankError as e:
            raise RerankError(f"{self.source}: device: {e}") from None
        check_experiment(self.config, self.source)
        self.check_data()
        self.clock = Clock()
        with torch_threads(self.config.threads):
            report = self._run()
        self.steps.write_timings(self.clock.total(self.steps.timings))
        return report

    def check_data(self) -> None:
        """Before the first step (after :func:`~rerank.study.checks.check_experiment`, which counts the references'
        lines): each split's Moses n-best list has no sentence id beyond its source; a warning where the list and
        the reference differ in tokenization or case, or look unrelated."""
        from rerank.formats.files import read_text
        from rerank.formats.relatedness import warn_unrelated_nbest
        from rerank.formats.tokenization import check_nbest_references
        from rerank.rescore.append import check_sentence_ids

        for name in SPLITS:
            split = self.config.split(name)
            if split.nbest:
                check_sentence_ids(split.nbest, split.source)
                references = read_text(split.reference)
                check_nbest_references([split.nbest], references, split.reference, logger)
                warn_unrelated_nbest(split.nbest, references, split.reference, logger)

    def _run(self) -> Path:
        c, steps = self.config, self.steps
        models = train_models(c, steps)
        ini = decoding_ini(c, steps) if c.moses.decoder else None
        if c.moses.phrase_table and c.moses.score_table:  # Cho et al.'s phrase table, scored with the encoder-decoder
            add_column(c, steps, [models["encdec"]], placeholder_ini(c, steps), self.out / "phrase-table.rnn.gz",
                       self.out / "moses.rnn.ini")
        features = feature_config(c, steps, models)
        score = Scoring(steps)
        report = Report(c, self.out, models)
        if c.rescoring:
            self.rescoring_lists(models, ini, features, score)
            rows = self.rows()
            pools = {pool: f"SPLIT.{pool}.scored.gz" for pool in {"moses", *(row.nbest for row in rows)}}
            pools["rnnsearch"] = "SPLIT.rnnsearch.nbest.gz"
            report.rescoring(rows, tune_rows(c, steps, rows, moses_labels(self.moses_list("dev"))),
                             oracles(c, steps, pools))
        if c.decoder_tuning and ini:
            report.route(run_route(c, steps, ini, models, score, features))
        return report.write(steps.timings, self.clock.total(steps.timings))

    def moses_list(self, split: str) -> str:
        """Moses' n-best list of ``split``: the config's, or the one Moses decodes (``moses.nbest_size``)."""
        size = self.config.moses.nbest_size
        return str(self.out / f"{split}.moses.{size}best") if size else str(self.config.split(split).nbest)

    def rescoring_lists(self, models: dict[str, Path], ini: Path | None, features: Path, score: Scoring) -> None:
        """Every candidate pool of the rescoring rows, for dev and test."""
        c, steps = self.config, self.steps
        for name in SPLITS:
            split = c.split(name)
            if c.moses.nbest_size:
                assert ini is not None
                decode(c, steps, ini, split.source, self.out / f"{name}.moses.1best",
                       (Path(self.moses_list(name)), c.moses.nbest_size), timing=f"moses n-best {name}")
            translate(c, steps, name, split, models)
            score(self.moses_list(name), split.source, features, self.out / f"{name}.moses.scored.gz",
                  timing=f"score-nbest {name}")
            # with Moses in the study, the union rows tune its lines' Moses features too
            union(c, steps, score, name, split, self.moses_list(name), features, ini)
            cut_lists(c, steps, score, name, split, ("moses", self.union_pool()))

    def rows(self) -> tuple[Row, ...]:
        c = self.config
        extras = extra_features(c)
        everything = (*NEW_FEATURES, *extras)
        rows = (*ROWS, *extended_rows(extras), *(consensus_rows(everything) if c.consensus else ()),
                *(forced_rows(everything, c.consensus) if c.moses.decoder else ()),
                *size_rows(everything, c.list_sizes, c.consensus))
        pool = {"union": self.union_pool(), "union-mbr": f"{self.union_pool()}-mbr"}
        name = UNION_SYSTEMS[c.union_with]  # the system joined to Moses' lists, in the union rows
        return tuple(dataclasses.replace(
            row, nbest=pool.get(row.nbest, row.nbest), title=row.title.replace("RNNsearch n-best", f"{name} n-best"),
            features=tuple(f"In{name}" if label == "InRNNsearch" else label for label in row.features))
            for row in rows)

    def union_pool(self) -> str:
        """The union's scored list: with Moses' features on every line where the study runs Moses."""
        return "union-moses" if self.config.moses.decoder else "union"
