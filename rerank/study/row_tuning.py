"""The rescoring rows: each row's features tuned on dev's scored list (``rerank tune --nbest``) for each optimiser
and seed, the weights applied to dev and test (``rerank apply``), the 1-best outputs scored (sacreBLEU), and the
oracle BLEU of each candidate pool (``rerank oracle``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rerank.config import with_overrides
from rerank.errors import RerankError
from rerank.formats.nbest import read_nbest
from rerank.study.config import ExperimentConfig
from rerank.study.lists import SPLITS
from rerank.study.report import Score, bleu
from rerank.study.rows import Row
from rerank.study.runner import StepRunner, write_file
from rerank.study.steps import oracle_file, rerank_once, tune_on_nbest
from rerank.tune.config import TuneConfig

logger = logging.getLogger(__name__)


def apply(config: ExperimentConfig, steps: StepRunner, directory: Path, tag: str, weights: str | Path,
          lists: dict[str, Path]) -> dict[str, Path]:
    """``rerank apply --missing-weight 0``: the 1-best of each split's list (``lists``) under ``weights``, as
    ``directory/TAG.SPLIT.1best``."""
    outputs = {}
    for split, scored in lists.items():
        output = directory / f"{tag}.{split}.1best"
        output.parent.mkdir(parents=True, exist_ok=True)
        source = config.split(split).source
        steps.rerank(["apply", scored, "--weights", weights, "--missing-weight", "0", "--source", source,
                      "-o", output], [output], rerank_once, scored, weights, source, output, quiet=True)
        outputs[split] = output
    return outputs


def tune_rows(config: ExperimentConfig, steps: StepRunner, rows: tuple[Row, ...], moses_labels: tuple[str, ...]
              ) -> dict[str, dict[str, Score]]:
    """BLEU of every row (and of Moses' own weights) by optimiser: dev and test, one value per seed."""
    c = config
    tuning = steps.out / "tuning"
    results: dict[str, dict[str, Score]] = {"moses": {"moses.ini": Score()}}
    moses_lists = {split: steps.out / f"{split}.moses.scored.gz" for split in SPLITS}
    for split, path in apply(c, steps, tuning / "moses", "moses.ini", c.moses.ini, moses_lists).items():
        getattr(results["moses"]["moses.ini"], split).append(bleu(c, path, split))
    runs, done = len(rows) * len(c.optimizers) * len(c.seeds), 0
    for row in rows:
        features = (*moses_labels, *row.features) if row.moses_features else row.features
        init = c.moses.ini if row.moses_features else union_init(steps)
        lists = {split: steps.out / f"{split}.{row.nbest}.scored.gz" for split in SPLITS}
        results[row.key] = {}
        for optimizer in c.optimizers:
            score = results[row.key][optimizer] = Score()
            for seed in c.seeds:
                done += 1
                tag = f"{optimizer}-seed{seed}"
                weights = tuning / row.key / f"{tag}.yaml"
                cv_output = weights.with_suffix(".cv.json") if c.cv_folds else None
                weights.parent.mkdir(parents=True, exist_ok=True)
                # the overrides of `rerank tune --optimizer --seed --restarts --tokenize --cv`
                tune_config = with_overrides(TuneConfig(), {"optimizer": optimizer, "seed": seed,
                                                            "mert.restarts": c.restarts, "bleu.tokenize": c.tokenize,
                                                            "cv.folds": c.cv_folds or None})
                logger.info("tuning %d of %d: %s, %s, seed %d (and reranking dev and test)", done, runs, row.key,
                            optimizer, seed)
                cv_flags = ["--cv", c.cv_folds] if c.cv_folds else []
                steps.rerank(["tune", "--nbest", lists["dev"], "-r", c.dev.reference, "--init", init, "--features",
                              ",".join(features), "--optimizer", optimizer, "--seed", seed, "--restarts", c.restarts,
                              "--tokenize", c.tokenize, *cv_flags, "-o", weights],
                             [weights, *([cv_output] if cv_output else [])], tune_on_nbest, tune_config,
                             c.dev.reference, init, features, lists["dev"], weights, cv_output, quiet=True)
                for split, path in apply(c, steps, tuning / row.key, tag, weights, lists).items():
                    getattr(score, split).append(bleu(c, path, split))
                if cv_output:
                    score.add_cv(json.loads(cv_output.read_text(encoding="utf-8")))
    return results


def moses_labels(nbest: str | Path) -> tuple[str, ...]:
    """The features of Moses' list, in its order."""
    first = next(read_nbest(nbest), None)
    if first is None:
        raise RerankError(f"{nbest}: empty n-best list")
    return first.layout.labels


def union_init(steps: StepRunner) -> Path:
    """Starting weights for the union: RNNsearch's own score, so the search starts from RNNsearch's ranking."""
    path = steps.out / "tuning" / "union-init.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, "RNNsearch0: 1.0\n")
    return path


def oracles(config: ExperimentConfig, steps: StepRunner, pools: dict[str, str]) -> dict[str, dict[str, float]]:
    """The oracle BLEU of each candidate pool by its name and split; ``pools`` gives each name's file, with
    SPLIT standing for the split's name."""
    result: dict[str, dict[str, float]] = {}
    for pool, pattern in sorted(pools.items()):
        for split in SPLITS:
            nbest = steps.out / pattern.replace("SPLIT", split)
            output = steps.out / f"{split}.{pool}.oracle.json"
            reference = config.split(split).reference
            steps.rerank(["oracle", "-r", reference, "--tokenize", config.tokenize, nbest, "--json", output],
                         [output], oracle_file, nbest, reference, config.tokenize, output, quiet=True)
            figures = json.loads(output.read_text(encoding="utf-8"))
            result.setdefault(pool, {})[split] = figures[str(nbest)]["oracle"]
    return result
