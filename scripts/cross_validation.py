"""The rows of docs/results/cross-validation.md: feature sets and tuners compared by cross-validated BLEU on `val`.

Reads the scored n-best lists of dev and test once (``rerank score-nbest`` with the study's rescore.yaml), then for
every row and seed: tunes on all of dev (dev BLEU), cross-validates the tuning (``rerank tune --cv``: one BLEU
over every dev sentence's 1-best chosen by weights tuned on the other folds, and each fold's), and reranks test with
the weights tuned on all of dev. The rows are what ``rerank tune --nbest DEV --features ... --cv K`` (with
``--tie``, ``--average-seeds``, ``--config`` for the settings) computes; this script only keeps the lists in memory
between them, and adds the per-word forms of RNN0 and RNNsearch0 (their ln p over the words plus one) to both.

  .venv/bin/python scripts/cross_validation.py --dev runs/cv/dev.moses.scored.gz --test runs/cv/test.moses.scored.gz \
      --dev-ref ../shared/data/multi30k/tok/val.lc.norm.tok.fr \
      --test-ref ../shared/data/multi30k/tok/test_2016_flickr.lc.norm.tok.fr \
      --init ../shared/data/moses-multi30k/model/moses.ini -o runs/cv/rows.json

The ``union-*`` rows rerank the union pool (Moses' list joined by RNNsearch's, ``rerank merge-nbest --moses-ini``,
scored alike), given as ``--union-dev`` and ``--union-test``; without them they are left out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rerank.formats.files import read_text
from rerank.formats.weights import load_weights
from rerank.tune.config import MertConfig, MiraConfig, ProConfig, TuneConfig
from rerank.tune.crossval import bleu_of, chosen_stats, cross_validate, tuner
from rerank.tune.data import NBestPool, TuningData, aligned_weights
from rerank.tune.derived import per_word, tie
from rerank.tune.stats import BleuStatistics

logger = logging.getLogger("cross_validation")
MOSES = ("Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0")
NEW = ("RNN0", "RNNsearch0", "LM1", "WP1", "UNK1")
PER_WORD = ("RNN0w", "RNNsearch0w", "LM1", "WP1", "UNK1")
UNION = ("Unreachable0", "InMoses", "InRNNsearch")  # the union's own features (rerank merge-nbest)


@dataclass
class Split:
    data: TuningData
    words: np.ndarray


@dataclass(frozen=True)
class Row:
    key: str
    title: str
    features: tuple[str, ...]
    config: TuneConfig = field(default_factory=TuneConfig)
    ties: dict[str, tuple[str, ...]] = field(default_factory=dict)
    per_word: tuple[str, ...] = ()  # labels whose per-word form (label + "w") is added
    pool: str = "moses"  # the lists it reranks: Moses' 100-best (--dev, --test) or their union (--union-*)


def load(path: str, reference: str) -> Split:
    pool = NBestPool(BleuStatistics([read_text(reference)]), reference_name=reference)
    pool.add(path)
    return Split(pool.data(), pool.words())


def prepared(split: Split, row: Row) -> TuningData:
    """The split's data with the row's per-word features, restricted to its features, with its ties."""
    data = split.data
    for label in row.per_word:
        data = per_word(data, label, split.words)
    data, _ = data.select(row.features)
    return tie(data, row.ties).data if row.ties else data


def start_weights(split: Split, row: Row, init: dict[str, list[float]], path: str) -> np.ndarray:
    """Moses' weights for the row's features (0 for the others), summed over each tie."""
    data = split.data
    for label in row.per_word:
        data = per_word(data, label, split.words)
    data, _ = data.select(row.features)
    start = _start(init, data, path)
    return tie(data, row.ties).start(start) if row.ties else start


def _start(init: dict[str, list[float]], data: TuningData, path: str) -> np.ndarray:
    known = {label: values for label, values in init.items() if label in data.layout.labels}
    return aligned_weights(known, data.layout, path)


def run_row(row: Row, dev: Split, test: Split, init: dict[str, list[float]], init_path: str, seeds: list[int],
            folds: int) -> dict[str, object]:
    dev_data, test_data = prepared(dev, row), prepared(test, row)
    start = start_weights(dev, row, init, init_path)
    figures: dict[str, list[float]] = {"dev": [], "cv": [], "cv_fold_sd": [], "test": [], "seconds": []}
    for seed in seeds:
        began = time.monotonic()
        config = dataclasses.replace(row.config, seed=seed)
        tune: Callable[[TuningData, np.ndarray], np.ndarray] = tuner(config)
        weights = tune(dev_data, start)
        held_out = cross_validate(dev_data, start, tune, folds, seed=1)
        figures["dev"].append(bleu_of(chosen_stats(dev_data, weights).sum(axis=0)))
        figures["test"].append(bleu_of(chosen_stats(test_data, weights).sum(axis=0)))
        figures["cv"].append(held_out.bleu)
        figures["cv_fold_sd"].append(held_out.fold_sd)
        figures["seconds"].append(time.monotonic() - began)
        logger.info("%s seed %d: dev %.2f, CV %.2f (folds ± %.2f), test %.2f, %.0f s", row.key, seed,
                    figures["dev"][-1], held_out.bleu, held_out.fold_sd, figures["test"][-1], figures["seconds"][-1])
    return {"title": row.title, "features": list(row.features), **figures}


def rows(restarts: int) -> list[Row]:
    """Feature sets (MERT) and tuners (on all features), each a row; a grid of a setting is one row per value, the
    value chosen being the row of the highest cross-validated BLEU."""
    mert = TuneConfig(mert=MertConfig(restarts=restarts))
    everything = (*MOSES, *NEW)
    per_word_forms = ("RNN0", "RNNsearch0")
    return [
        Row("moses-retuned", "Moses features, retuned", MOSES, mert),
        Row("rnnsearch", "+ RNNsearch0", (*MOSES, "RNNsearch0"), mert),
        Row("all", "+ RNN0 + RNNsearch0 + LM1 + WP1 + UNK1 (the study's \"all\")", everything, mert),
        Row("all-tied", "all, RNN0 and RNNsearch0 tied (one weight for their mean ln p)", everything, mert,
            ties={"NMT": ("RNN0", "RNNsearch0")}),
        Row("all-per-word", "all, RNN0 and RNNsearch0 per word in place of per sentence",
            (*MOSES, "RNN0w", "RNNsearch0w", "LM1", "WP1", "UNK1"), mert, per_word=per_word_forms),
        Row("all-both-forms", "all, RNN0 and RNNsearch0 per sentence and per word",
            (*everything, "RNN0w", "RNNsearch0w"), mert, per_word=per_word_forms),
        Row("all-mert-average", "all, MERT: the mean of the best 5 runs' weights", everything,
            dataclasses.replace(mert, mert=MertConfig(restarts=restarts, average=5))),
        Row("per-word-mert-average", "all-per-word, MERT: the mean of the best 5 runs' weights",
            (*MOSES, "RNN0w", "RNNsearch0w", "LM1", "WP1", "UNK1"),
            dataclasses.replace(mert, mert=MertConfig(restarts=restarts, average=5)), per_word=per_word_forms),
        Row("all-mert-restart-folds", "all, MERT: the run of the starting point best on 5 held-out folds", everything,
            dataclasses.replace(mert, mert=MertConfig(restarts=restarts, restart_folds=5))),
        Row("per-word-mert-restart-folds", "all-per-word, MERT: the run of the starting point best on 5 held-out "
            "folds", (*MOSES, "RNN0w", "RNNsearch0w", "LM1", "WP1", "UNK1"),
            dataclasses.replace(mert, mert=MertConfig(restarts=restarts, restart_folds=5)), per_word=per_word_forms),
        *(Row(f"all-pro-l2-{l2:g}", f"all, PRO, l2 {l2:g}", everything,
              TuneConfig(optimizer="pro", pro=ProConfig(l2=l2)))
          for l2 in (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)),
        Row("all-pro-seed-average", "all, PRO (l2 1): the mean of 3 seeds' weights", everything,
            TuneConfig(optimizer="pro", average_seeds=3)),
        *(Row(f"all-mira-c-{c:g}", f"all, MIRA, C {c:g}", everything,
              TuneConfig(optimizer="mira", mira=MiraConfig(c=c))) for c in (0.001, 0.01, 0.1, 1.0)),
        Row("per-word-mira-c-0.1", "all-per-word, MIRA, C 0.1", (*MOSES, "RNN0w", "RNNsearch0w", "LM1", "WP1", "UNK1"),
            TuneConfig(optimizer="mira", mira=MiraConfig(c=0.1)), per_word=per_word_forms),
        *more_rows(mert),
    ]


def more_rows(mert: TuneConfig) -> list[Row]:
    """Rows with the right-to-left RNNsearch (``R2L0``) and RNNsearch of a second seed (``RNNsearch1``) in their
    per-word forms, a weight each or one weight for the three RNNsearch's mean (a tie), on Moses' lists and on the
    union pool, whose own features are ``Unreachable0`` and the indicators ``InMoses``, ``InRNNsearch``."""
    two = ("RNN0", "RNNsearch0")
    three, four = (*two, "R2L0"), (*two, "R2L0", "RNNsearch1")
    ensemble = {"Ens": ("RNNsearch0w", "RNNsearch1w", "R2L0w")}
    base = (*MOSES, *PER_WORD)
    mira = TuneConfig(optimizer="mira", mira=MiraConfig(c=0.1))
    return [
        Row("per-word-r2l", "all-per-word + R2L0", (*base, "R2L0w"), mert, per_word=three),
        Row("per-word-r2l-seed", "all-per-word + R2L0 + RNNsearch1, a weight each", (*base, "R2L0w", "RNNsearch1w"),
            mert, per_word=four),
        Row("per-word-ensemble", "all-per-word + R2L0 + RNNsearch1, one weight for the three RNNsearch's mean",
            (*base, "R2L0w", "RNNsearch1w"), mert, ties=ensemble, per_word=four),
        Row("union-all-per-word", "union, all-per-word + Unreachable0", (*base, "Unreachable0"), mert, per_word=two,
            pool="union"),
        Row("union-indicators", "union, all-per-word + Unreachable0 + InMoses + InRNNsearch", (*base, *UNION), mert,
            per_word=two, pool="union"),
        *(Row(f"union-indicators-mira-c-{c:g}", f"union-indicators, MIRA, C {c:g}", (*base, *UNION),
              TuneConfig(optimizer="mira", mira=MiraConfig(c=c)), per_word=two, pool="union") for c in (0.01, 0.1)),
        Row("union-indicators-r2l", "union-indicators + R2L0", (*base, *UNION, "R2L0w"), mert, per_word=three,
            pool="union"),
        Row("union-indicators-r2l-seed", "union-indicators + R2L0 + RNNsearch1, a weight each",
            (*base, *UNION, "R2L0w", "RNNsearch1w"), mert, per_word=four, pool="union"),
        Row("union-indicators-ensemble", "union-indicators + R2L0 + RNNsearch1, one weight for the three RNNsearch's "
            "mean", (*base, *UNION, "R2L0w", "RNNsearch1w"), mert, ties=ensemble, per_word=four, pool="union"),
        *(Row(f"union-indicators-r2l-mira-c-{c:g}", f"union-indicators + R2L0, MIRA, C {c:g}",
              (*base, *UNION, "R2L0w"), TuneConfig(optimizer="mira", mira=MiraConfig(c=c)), per_word=three,
              pool="union") for c in (0.01, 0.1, 1.0)),
        Row("union-indicators-ensemble-mira-c-0.1", "union-indicators-ensemble, MIRA, C 0.1",
            (*base, *UNION, "R2L0w", "RNNsearch1w"), mira, ties=ensemble, per_word=four, pool="union"),
        *ensemble_rows(mert, mira),
    ]


def ensemble_rows(mert: TuneConfig, mira: TuneConfig) -> list[Row]:
    """Rows with the recipe's four left-to-right seeds (``RNNsearch0``-``RNNsearch3``) and two right-to-left ones
    (``R2L0``, ``R2L1``) in their per-word forms: one weight for each direction's mean, or one for all six."""
    members = ("RNNsearch0", "RNNsearch1", "RNNsearch2", "RNNsearch3", "R2L0", "R2L1")
    forms = tuple(f"{label}w" for label in members)
    base = (*MOSES, "RNN0w", "LM1", "WP1", "UNK1")
    directions: dict[str, tuple[str, ...]] = {"Ens": forms[:4], "R2L": forms[4:]}
    return [
        Row("per-word-ensemble6", "all-per-word, RNNsearch0 the mean of four seeds, + R2L0 the mean of two",
            (*base, *forms), mert, ties=directions, per_word=("RNN0", *members)),
        Row("per-word-ensemble6-tied", "all-per-word + the six RNNsearch's mean under one weight",
            (*base, *forms), mert, ties={"Ens": forms}, per_word=("RNN0", *members)),
        Row("per-word-ensemble6-mira-c-0.1", "per-word-ensemble6, MIRA, C 0.1", (*base, *forms), mira,
            ties=directions, per_word=("RNN0", *members)),
        Row("union-indicators-ensemble6", "union (the ensemble's 20-best), per-word-ensemble6 + Unreachable0 + InMoses "
            "+ InRNNsearch", (*base, *UNION, *forms), mert, ties=directions, per_word=("RNN0", *members),
            pool="union"),
        *(Row(f"union-indicators-ensemble6-mira-c-{c:g}", f"union-indicators-ensemble6, MIRA, C {c:g}",
              (*base, *UNION, *forms), TuneConfig(optimizer="mira", mira=MiraConfig(c=c)), ties=directions,
              per_word=("RNN0", *members), pool="union") for c in (0.01, 0.1, 1.0)),
        *(Row(f"union-indicators-ensemble6-tied-mira-c-{c:g}", "union-indicators + the six RNNsearch's mean under "
              f"one weight, MIRA, C {c:g}", (*base, *UNION, *forms), TuneConfig(optimizer="mira", mira=MiraConfig(c=c)),
              ties={"Ens": forms}, per_word=("RNN0", *members), pool="union") for c in (0.01, 0.1, 1.0)),
        Row("union-indicators-ensemble6-tied", "union-indicators + the six RNNsearch's mean under one weight",
            (*base, *UNION, *forms), mert, ties={"Ens": forms}, per_word=("RNN0", *members), pool="union"),
    ]


def spread(values: list[float]) -> str:
    if not values:
        return ""
    return f"{statistics.mean(values):.2f}" + (f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else "")


def markdown(results: dict[str, dict[str, object]]) -> str:
    """The rows as a markdown table: val, CV (mean ± sd over seeds; the folds' sd), test, and the gains in val and
    in CV over Moses' features retuned alike (``moses-retuned``)."""
    base_dev = statistics.mean(results["moses-retuned"]["dev"])  # type: ignore[arg-type]
    base_cv = statistics.mean(results["moses-retuned"]["cv"])  # type: ignore[arg-type]
    lines = ["| row | val | 5-fold CV | folds' sd | test_2016 | val gain | CV gain |", "|---|---|---|---|---|---|---|"]
    for key, figures in results.items():
        dev, cv, test = (list(figures.get(name, [])) for name in ("dev", "cv", "test"))  # type: ignore[call-overload]
        sd = f"{statistics.mean(figures['cv_fold_sd']):.2f}" if figures.get("cv_fold_sd") else ""  # type: ignore
        gains = [f"{statistics.mean(dev) - base_dev:+.2f}", f"{statistics.mean(cv) - base_cv:+.2f}"] if cv else ["", ""]
        lines.append(f"| {figures['title']} (`{key}`) | {spread(dev)} | {spread(cv)} | {sd} | {spread(test)} | "
                     f"{' | '.join(gains)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--union-dev", help="the union pool's scored dev list (the union rows)")
    parser.add_argument("--union-test", help="the union pool's scored test list")
    parser.add_argument("--dev-ref", required=True)
    parser.add_argument("--test-ref", required=True)
    parser.add_argument("--init", required=True, help="starting weights (Moses' moses.ini)")
    parser.add_argument("-o", "--output", required=True, help="the rows' figures (JSON)")
    parser.add_argument("--rows", help="only these rows (keys, comma-separated)")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print the rows of these outputs as markdown")
    args = parser.parse_args()
    if args.table:
        merged: dict[str, dict[str, object]] = {}
        for path in args.table:
            merged.update(json.loads(Path(path).read_text()))
        print(markdown(merged))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    dev, test = load(args.dev, args.dev_ref), load(args.test, args.test_ref)
    init = load_weights(args.init)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict[str, object] = json.loads(Path(args.output).read_text()) if Path(args.output).exists() else {}
    moses_start = _start(init, dev.data, args.init)
    results["moses"] = {"title": "Moses baseline (its own weights)",
                        "dev": [bleu_of(chosen_stats(dev.data, moses_start).sum(axis=0))],
                        "test": [bleu_of(chosen_stats(test.data, _start(init, test.data, args.init)).sum(axis=0))]}
    wanted = set(args.rows.split(",")) if args.rows else None
    pools = {"moses": (dev, test)}
    for row in rows(args.restarts):
        if wanted is not None and row.key not in wanted or row.pool == "union" and not args.union_dev:
            continue
        if row.pool not in pools:
            pools[row.pool] = load(args.union_dev, args.dev_ref), load(args.union_test, args.test_ref)
        results[row.key] = run_row(row, *pools[row.pool], init, args.init, seeds, args.folds)
        Path(args.output).write_text(json.dumps(results, indent=2) + "\n")
    for key, figures in results.items():
        assert isinstance(figures, dict)
        cells = [f"{name} {statistics.mean(v):.2f}" + (f" ± {statistics.stdev(v):.2f}" if len(v) > 1 else "")
                 for name in ("dev", "cv", "test") if (v := figures.get(name))]
        print(f"{key}: {', '.join(cells)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
