"""Tuning as a user or a study calls it: on fixed n-best lists, or with a decoder in the loop.

Both take the references, the starting weights and a :class:`~rerank.tune.config.TuneConfig`, and
return a :class:`TuneResult`: the tuned weights by label (L1-normalised), the tuning set's BLEU
with them, on fixed lists with ``cv.folds`` the cross-validated BLEU (:mod:`rerank.tune.crossval`),
and, for the loop, each iteration's record. :func:`write_moses_ini` puts the weights
into a copy of a ``moses.ini``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sacrebleu.metrics.bleu import BLEUScore

from rerank.errors import FormatError, RerankError
from rerank.formats.files import read_text, when_written
from rerank.formats.moses_ini import MosesIni, Weights
from rerank.formats.nbest import FeatureLayout
from rerank.formats.weights import WeightsFile, as_weights, read_weights
from rerank.tune.config import TuneConfig
from rerank.tune.crossval import (
    Choice,
    CrossValidated,
    candidates,
    choose,
    cross_validate,
    tuner,
)
from rerank.tune.data import NBestPool, aligned_weights
from rerank.tune.derived import activated, tie
from rerank.tune.folds import fold_assignment
from rerank.tune.loop import DecoderCommand, Iteration, TuningLoop
from rerank.tune.mert import check_restart_folds
from rerank.tune.parallel import Jobs
from rerank.tune.registry import check_optimizer
from rerank.tune.stats import BleuStatistics

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuneResult:
    weights: Weights  # by label, L1-normalised
    bleu: BLEUScore  # of the tuning set, with the tuned weights, on all n-best lists
    signature: str  # sacreBLEU's
    nbest_lists: int
    hypotheses: int  # distinct hypotheses of the pool
    iterations: tuple[Iteration, ...] = ()  # with a decoder in the loop
    converged: bool = True
    cross_validated: CrossValidated | None = None  # on fixed lists with cv.folds: the held-out BLEU
    choice: Choice | None = None  # with cv.choose: the setting chosen, and every candidate's held-out BLEU


def read_references(paths: Sequence[str | os.PathLike[str]]) -> list[list[str]]:
    """The lines of each reference file; every file must have as many as the first."""
    references = [read_text(path) for path in paths]
    for path, lines in zip(paths[1:], references[1:], strict=True):
        if len(lines) != len(references[0]):
            raise FormatError(str(path), min(len(lines), len(references[0])) + 1,
                              f"{len(references[0])} lines, as {paths[0]} has", got=f"{len(lines)} lines")
    return references


class Tuning:
    """The references and the starting weights of one tuning run (see the module docstring)."""

    def __init__(self, references: Sequence[str | os.PathLike[str]], config: TuneConfig,
                 init: str | os.PathLike[str] | WeightsFile | None = None):
        check_optimizer(config.optimizer, "the tuning config")
        self.config = config
        self.reference_names = [str(path) for path in references]
        self.references = read_references(references)
        self.bleu = BleuStatistics(self.references, tokenize=config.bleu.tokenize, lowercase=config.bleu.lowercase)
        self.pool = NBestPool(self.bleu, reference_name=self.reference_names[0])
        self.init = read_weights(init) if init is not None and not isinstance(init, WeightsFile) else init
        self.initial = self.init.weights if self.init is not None else {}

    def start(self, layout: FeatureLayout) -> np.ndarray:
        """The starting weights as a vector for ``layout``; without any, 0 (each sentence's first hypothesis)."""
        if self.init is None:
            logger.info("starting from weights 0: each sentence's first hypothesis")
            return np.zeros(layout.dims)
        return aligned_weights(self.initial, layout, self.init)

    def on_nbest(self, nbest: Sequence[str | os.PathLike[str]], features: Sequence[str] | None = None,
                 ties: Mapping[str, Sequence[str]] | None = None) -> TuneResult:
        """Optimise once on the merged n-best lists; with ``features``, only those are tuned (the others get 0);
        with ``ties``, each group's features share one weight, that of their mean (see :mod:`rerank.tune.derived`);
        with ``cv.folds``, the tuning is cross-validated too."""
        for path in nbest:
            self.pool.warn_about(path, self.pool.add(path), self.references[0], self.config.bleu.lowercase)
        layout = self.pool.layout
        if layout is None:
            raise RerankError("no n-best lists to tune on")
        data = self.pool.data()
        start = self.start(layout)
        weights = np.zeros(layout.dims)
        columns = np.arange(layout.dims)
        if features is not None:
            data, columns = data.select(features)
            start = start[columns]
        tied = tie(data, ties) if ties else None
        if tied is not None:
            data, start = tied.data, tied.start(start)
        cv, choice, config = self.config.cv, None, self.config
        settings = candidates(config) if cv.choose else {"": config}
        if cv.folds:
            fold_assignment(data.num_sentences, cv.folds, cv.seed)  # too many folds: said before any tuning
            part = data.num_sentences - -(-data.num_sentences // cv.folds)  # all but the largest fold
            _check_restart_folds(part, settings.values(), f"on the {part} sentences of a cross-validation part")
        else:
            _check_restart_folds(data.num_sentences, settings.values())
        if cv.choose:  # every candidate cross-validated; the best one tunes on all sentences
            choice = choose(data, start, {name: tuner(c) for name, c in settings.items()}, cv.folds, cv.seed)
            config = settings[choice.chosen]
            logger.info("chosen by %d-fold cross-validation: %s", cv.folds, choice.chosen)
        tuned = tuner(config)(data, start)
        weights[columns] = tied.weights(tuned) if tied else tuned
        held_out = choice.scores[choice.chosen] if choice else \
            cross_validate(data, start, tuner(config), cv.folds, cv.seed) if cv.folds else None
        return replace(self._result(weights, layout), cross_validated=held_out, choice=choice)

    def with_decoder(self, decoder: str, source: str | os.PathLike[str], work_dir: str | os.PathLike[str],
                     jobs: Jobs | None = None) -> TuneResult:
        """Run the decoder command on ``source`` (in ``jobs`` parts at once), merge its n-best list into all
        earlier ones, re-optimise, until the weights settle (see :mod:`rerank.tune.loop`)."""
        if not self.initial:
            raise RerankError("a decoder in the loop needs starting weights: give a moses.ini or a weights file")
        source_lines = len(read_text(source))
        if source_lines != len(self.references[0]):
            raise FormatError(str(source), None, f"{len(self.references[0])} lines, as {self.reference_names[0]} "
                              "has", got=f"{source_lines} lines")
        _check_restart_folds(source_lines, [self.config])
        if self.config.activate:  # the names checked before the first decoder run
            start = FeatureLayout(tuple(self.initial), tuple(len(values) for values in self.initial.values()))
            activated(start, self.config.activate, "the starting weights")
        loop = TuningLoop(DecoderCommand(decoder), Path(source), self.pool, self.config, Path(work_dir), jobs,
                          self.references[0])
        result = loop.run(self.initial, self.start)
        return self._result(result.weights, result.layout, result.iterations, result.converged)

    def _result(self, weights: np.ndarray, layout: FeatureLayout, iterations: tuple[Iteration, ...] = (),
                converged: bool = True) -> TuneResult:
        score = self.bleu.score(self.pool.data().corpus_stats(weights))
        return TuneResult(as_weights(weights, layout), score, self.bleu.signature(), len(self.pool.files),
                          self.pool.size, iterations, converged)


def _check_restart_folds(sentences: int, configs: Iterable[TuneConfig], of: str = "") -> None:
    """MERT's ``restart_folds`` against the fewest sentences one of its calls tunes on: said before any tuning."""
    for config in configs:
        if config.optimizer == "mert":
            check_restart_folds(sentences, config.mert, of)


def write_moses_ini(ini: MosesIni, weights: Weights, path: str | os.PathLike[str]) -> None:
    """A copy of ``ini`` with the weights of the features it has replaced; the others are only in the YAML."""
    known = ini.weights()
    extra = [label for label in weights if label not in known]
    if extra:
        logger.warning("%s has no weights for %s: they are only in the YAML weights", ini.path, ", ".join(extra))
    ini.with_weights({label: values for label, values in weights.items() if label in known}).write(path)
    when_written(path, lambda: logger.info("wrote %s", path))  # inside committed_together: once it is there


def write_cv_report(result: TuneResult, path: str | os.PathLike[str]) -> None:
    """The cross-validation's figures as JSON: the held-out BLEU, each fold's, the tuning set's, and where a setting
    was chosen, the choice and every candidate's figures (``rerank tune --cv-output``; studies read it)."""
    from rerank.formats.files import atomic_output

    if result.cross_validated is None:
        raise RerankError("no cross-validation to report: give cv.folds (rerank tune --cv K)")
    report = {**result.cross_validated.summary(), "tuning_bleu": result.bleu.score,
              "chosen": result.choice.chosen if result.choice else None,
              "candidates": {name: score.summary() for name, score in result.choice.scores.items()}
              if result.choice else {}}
    with atomic_output(path) as out:
        out.write(json.dumps(report, indent=2) + "\n")
