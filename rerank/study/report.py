"""The study's report: ``results.md`` (the tables: mean ± sd over seeds, one line per system, and the row the
cross-validated BLEU chooses; the models; BLEU by source length; the timings) and ``results.json``."""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rerank.formats.files import committed_together
from rerank.study.config import ExperimentConfig, system_columns
from rerank.study.runner import Timing, write_file

if TYPE_CHECKING:
    from rerank.study.rows import Row

logger = logging.getLogger(__name__)


@dataclass
class Score:
    """BLEU of a row's runs (one per seed): dev, test, and where the study cross-validates, the held-out BLEU
    (``cv``: one corpus BLEU over every fold's held-out 1-bests) and the standard deviation over its folds."""

    dev: list[float] = field(default_factory=list)
    test: list[float] = field(default_factory=list)
    cv: list[float] = field(default_factory=list)
    cv_fold_sd: list[float] = field(default_factory=list)

    def add_cv(self, report: dict[str, Any]) -> None:
        """One run's figures from its ``rerank tune --cv-output`` JSON."""
        self.cv.append(float(report["bleu"]))
        self.cv_fold_sd.append(float(report["fold_sd"]))


def chosen_rows(scores: Mapping[str, Score]) -> tuple[str, str] | None:
    """The row of the highest mean cross-validated BLEU, and the row of the highest mean dev BLEU among the same
    candidates (the rows with CV figures), each the earlier in ``scores``' order on a tie; None where no row has
    CV figures."""
    candidates = [name for name, score in scores.items() if score.cv]
    if not candidates:
        return None
    return (max(candidates, key=lambda name: statistics.mean(scores[name].cv)),
            max(candidates, key=lambda name: statistics.mean(scores[name].dev)))


def choice_line(scores: Mapping[str, Score], folds: int, optimizer: str) -> str | None:
    """The sentence under the results table: the row the cross-validated BLEU chooses, with its CV and test BLEU,
    and the row dev BLEU alone would choose where it differs (see :func:`chosen_rows`)."""
    chosen = chosen_rows(scores)
    if chosen is None:
        return None
    by_cv, by_dev = chosen
    line = (f"Chosen by the {folds}-fold CV BLEU ({optimizer.upper()}): {by_cv} (CV "
            f"{statistics.mean(scores[by_cv].cv):.2f}, test {statistics.mean(scores[by_cv].test):.2f})")
    if by_dev != by_cv:
        line += f"; dev alone would have chosen {by_dev} (CV {statistics.mean(scores[by_dev].cv):.2f})"
    return line + "."


def bleu(config: ExperimentConfig, path: Path, split: str) -> float:
    """Corpus BLEU of a 1-best file against the split's reference, with the study's tokenizer."""
    from rerank.evaluation.metrics import evaluate

    reference = config.split(split).reference
    return evaluate([(path.name, str(path))], [reference], tokenize=config.tokenize).systems[0].bleu


def mean_spread(values: Sequence[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def cv_cell(score: Score) -> str:
    """The cross-validated BLEU: mean ± sd over seeds, and the mean standard deviation over folds."""
    if not score.cv:
        return ""
    return f"{mean_spread(score.cv)} (folds ± {statistics.mean(score.cv_fold_sd):.2f})"


def table_row(title: str, scores: dict[str, Score], optimizers: Sequence[str],
              oracle: dict[str, float] | None = None, cv: bool = False) -> str:
    """``| title | dev | (cross-validated) | test | test with the other optimisers | oracle dev / test |``; blank
    where a system has no such value."""
    first = scores[optimizers[0]]
    others = [mean_spread(scores[o].test) if o in scores else "" for o in optimizers[1:]]
    pool = f"{oracle['dev']:.2f} / {oracle['test']:.2f}" if oracle else ""
    held_out = [cv_cell(first)] if cv else []
    return " | ".join(["", title, mean_spread(first.dev), *held_out, mean_spread(first.test), *others, pool,
                       ""]).strip()


def model_summary(models: dict[str, Path]) -> list[str]:
    """One line per model of the study: its size, and how it was trained where the study trained it."""
    from rerank.models.checkpoint import CHECKPOINT, load_model, load_state
    from rerank.models.cslm import load_cslm_net

    lines = []
    for name, directory in models.items():
        if name == "cslm":
            net, vocab = load_cslm_net(directory)
            parameters = sum(p.numel() for p in net.parameters())
            line = f"- {name} ({directory}): {parameters / 1e6:.1f}M parameters, shortlist {len(vocab)}"
            perplexity = "validation perplexity of the network on shortlist n-grams"
        else:
            loaded = load_model(directory)
            parameters = sum(p.numel() for p in loaded.model.parameters())
            line = (f"- {name} ({directory}): {parameters / 1e6:.1f}M parameters, vocabularies "
                    f"{len(loaded.src_vocab)}/{len(loaded.trg_vocab)}")
            perplexity = "validation perplexity"
        if (directory / CHECKPOINT).exists():  # trained by this study
            progress = load_state(directory / CHECKPOINT)["progress"]
            line += (f", {progress['updates']} updates in {progress['seconds'] / 60:.0f} min, best {perplexity} "
                     f"{progress['best_ppl']:.2f}")
        lines.append(line)
    return lines


@dataclass
class Run:
    """One tuning run: BLEU of dev and test decoded with its weights, and each iteration's dev BLEU."""

    dev: float
    test: float
    test_output: str  # the test 1-best
    iterations: tuple[float, ...] = ()  # dev BLEU of the decoder's output in each iteration
    tuned: tuple[float, ...] = ()  # the tuned BLEU of each iteration: the optimiser's on the lists so far


@dataclass
class RouteResults:
    runs: dict[str, list[Run]] = field(default_factory=dict)  # by system: baseline, encdec, ..., mert-moses.pl
    seconds: dict[str, float] = field(default_factory=dict)  # each tuner's wall time, by system and seed


def route_table(config: ExperimentConfig, results: RouteResults) -> list[str]:
    """The phrase-table route's table: each system's dev and test BLEU (mean ± sd over the tuning runs), the test
    BLEU of each run, and each run's dev BLEU per iteration (the decoder's output with that iteration's weights)."""
    lines = ["| system | dev BLEU | test BLEU | test per run | dev BLEU per iteration, per run | tuned BLEU per "
             "iteration, per run |", "|---|---|---|---|---|---|"]
    for system, runs in results.runs.items():
        title = route_title(system.removesuffix(RESCORED))
        if system.endswith(RESCORED):
            title += ", its n-best lists rescored with every feature and re-tuned"
        per_run = " / ".join(f"{run.test:.2f}" for run in runs) if len(runs) > 1 else ""
        iterations, tuned = (" / ".join(", ".join(f"{b:.2f}" for b in values) for values in column if values)
                             for column in ([r.iterations for r in runs], [r.tuned for r in runs]))
        lines.append(f"| {title} | {mean_spread([r.dev for r in runs])} | {mean_spread([r.test for r in runs])} | "
                     f"{per_run} | {iterations} | {tuned} |")
    return lines


RESCORED = "+rescored"  # after a system's name: its runs' own n-best lists, rescored
COLUMN_TITLES = {"encdec": "encoder-decoder p(target | source)", "rnnsearch": "RNNsearch p(target | source)",
                 "ensemble": "the RNNsearch ensemble's p(target | source)",
                 "channel": "p(source | target) of the target-to-source model",
                 "phrases": "p(target | source) of the model trained on the table's phrase pairs",
                 "student": "p(target | source) of the ensemble's student"}


def route_title(system: str) -> str:
    """The row title of a system of the phrase-table route (see :func:`~rerank.study.config.system_columns`)."""
    titles = {"moses.ini": "Moses, the weights of moses.ini", "baseline": "Moses, re-tuned with Moses in the loop",
              "mert-moses.pl": "Moses, re-tuned by mert-moses.pl"}
    if system in titles:
        return titles[system]
    columns = [COLUMN_TITLES[model] + (" per word" if per_word else "") for model, per_word in system_columns(system)]
    return f"+ {' and '.join(columns)} in the phrase table, re-tuned"


def route_summary(results: RouteResults) -> dict[str, object]:
    """The figures of :func:`route_table` for results.json."""
    return {"runs": {system: [dataclasses.asdict(r) for r in runs]
                     for system, runs in results.runs.items()},
            "seconds": results.seconds,
            "mean": {system: {split: statistics.mean(getattr(r, split) for r in runs) for split in ("dev", "test")}
                     for system, runs in results.runs.items()}}


class Report:
    """The tables of one study, filled as its parts finish, and written together."""

    def __init__(self, config: ExperimentConfig, out: Path, models: dict[str, Path]):
        self.config, self.out, self.models = config, out, models
        self.lines: list[str] = []
        self.data: dict[str, Any] = {}
        self.tuned_systems: list[tuple[str, str]] = []  # (name, test 1-best) for BLEU by source length
        self.choice: str | None = None  # the row the cross-validated BLEU chooses, a sentence

    def bleu(self, path: Path, split: str) -> float:
        return bleu(self.config, path, split)

    def rescoring(self, rows: tuple[Row, ...], results: dict[str, dict[str, Score]],
                  oracles: dict[str, dict[str, float]]) -> None:
        """The rescoring rows' table, with the neural systems alone."""
        c, out = self.config, self.out
        alone = {model: {split: self.bleu(out / f"{split}.{model}.1best", split) for split in ("dev", "test")}
                 for model in ("rnnsearch", "encdec", *(("ensemble",) if c.ensemble_seeds else ()),
                               *(("distilled",) if c.distill else ()))}
        first, cv = c.optimizers[0], bool(c.cv_folds)
        cv_header = f"{c.cv_folds}-fold CV BLEU ({first.upper()}) | " if cv else ""
        lines = [f"| system | dev BLEU ({first.upper()}) | {cv_header}test BLEU ({first.upper()}) | "
                 + "".join(f"test BLEU ({o.upper()}) | " for o in c.optimizers[1:]) + "oracle BLEU (dev / test) |",
                 "|---|---|---|" + "---|" * (len(c.optimizers) + cv),
                 table_row("Moses baseline (its own weights)", {first: results["moses"]["moses.ini"]}, c.optimizers,
                           oracles["moses"], cv)]
        for row in rows:
            lines.append(table_row(row.title, results[row.key], c.optimizers, oracles[row.nbest], cv))
            if row.key == "all":
                lines.append(table_row(f"RNNsearch alone (beam {c.beam})", {first: Score(
                    [alone["rnnsearch"]["dev"]], [alone["rnnsearch"]["test"]])}, c.optimizers, oracles["rnnsearch"],
                    cv))
                if c.ensemble_seeds:
                    lines.append(table_row(f"RNNsearch ensemble of {len(c.ensemble_seeds) + 1} (beam {c.beam})",
                                           {first: Score([alone["ensemble"]["dev"]], [alone["ensemble"]["test"]])},
                                           c.optimizers, cv=cv))
                if c.distill:
                    lines.append(table_row(f"RNNsearch distilled from the ensemble (beam {c.beam})",
                                           {first: Score([alone["distilled"]["dev"]], [alone["distilled"]["test"]])},
                                           c.optimizers, cv=cv))
        self.choice = choice_line({row.title: results[row.key][first] for row in rows}, c.cv_folds, first)
        self.lines += [
            f"Tuned on dev ({c.dev.source}), tested on {c.test.source}.",
            f"Tuned rows: mean ± standard deviation over seeds {', '.join(map(str, c.seeds))}; the oracle BLEU "
            "is that of the candidate pool each row reranks (rerank oracle; for RNNsearch alone, its n-best list).",
            *([f"CV BLEU: {c.cv_folds}-fold cross-validation of each tuning run on dev (rerank tune --cv): one BLEU "
               "over every dev sentence's 1-best chosen by weights tuned on the other folds, what carries over to "
               "unseen sentences; beside it, the standard deviation over the folds."] if cv else []),
            "", *lines, "", *([self.choice, ""] if self.choice else []),
            f"RNN encoder-decoder alone (beam {c.beam}): dev {alone['encdec']['dev']:.2f}, "
            f"test {alone['encdec']['test']:.2f}.", ""]
        self.tuned_systems = [("Moses", str(out / "tuning" / "moses" / "moses.ini.test.1best")),
                              ("RNN encoder-decoder", str(out / "test.encdec.1best")),
                              ("RNNsearch", str(out / "test.rnnsearch.1best")),
                              ("Moses + all features", str(out / "tuning" / "all" / f"{first}-seed{c.seeds[0]}"
                                                            ".test.1best"))]
        self.data.update({"rnnsearch": alone["rnnsearch"], "encdec": alone["encdec"],
                          "ensemble": alone.get("ensemble", {}), "distilled": alone.get("distilled", {}),
                          "oracle": oracles,
                          "rows": {key: {o: dataclasses.asdict(s) for o, s in row.items()}
                                   for key, row in results.items()}})

    def route(self, results: RouteResults) -> None:
        """The phrase-table route's table; its systems (but the rescored ones) by source length, where the study
        has no rescoring rows."""
        route = self.config.decoder_tuning
        assert route is not None
        self.lines += ["## Moses re-tuned with Moses in the loop", "",
                       f"`rerank tune --decoder` on dev (MERT, {route.restarts} restarts, {route.nbest_size}-best "
                       "lists, distinct; " + ("the new columns' weights alone, `--activate`" if route.activate ==
                                               "columns" else "every weight") + "), then dev and test decoded by Moses "
                       "with each run's tuned moses.ini; mean ± standard deviation over the runs (seeds "
                       f"{', '.join(map(str, route.seeds))}).", "",
                       *route_table(self.config, results), ""]
        self.tuned_systems = self.tuned_systems or [(system, runs[0].test_output) for system, runs in
                                                    results.runs.items() if not system.endswith(RESCORED)]
        self.data["decoder_tuning"] = route_summary(results)

    def write(self, timings: dict[str, Timing], total: Timing) -> Path:
        """results.md and results.json, together; BLEU by source length of the tuned systems (and its PNG)."""
        from rerank.evaluation.metrics import evaluate, format_evaluation
        from rerank.evaluation.plots import plot_bucket_bleu

        c = self.config
        by_length = evaluate(self.tuned_systems, [c.test.reference], source=c.test.source, buckets=c.buckets,
                             tokenize=c.tokenize)
        plot_bucket_bleu(by_length, self.out / "bleu-by-length.png")
        signature = by_length.bleu_signature
        lines = ["# Results", "", f"BLEU by sacreBLEU, {signature}.", "", *self.lines,
                  "## Models", "", *model_summary(self.models), "",
                  "## BLEU by source length (test)", "", "```", format_evaluation(by_length).rstrip(), "```", "",
                  "![BLEU by source length](bleu-by-length.png)", "",
                  "## Timings", "", *timing_lines(timings, total), ""]
        path = self.out / "results.md"
        with committed_together():  # the table and its numbers appear together
            write_file(path, "\n".join(lines))
            write_file(self.out / "results.json", json.dumps(
                {"signature": signature, **self.data, "timings": {name: dataclasses.asdict(timing)
                                                                  for name, timing in timings.items()},
                 "total_time": dataclasses.asdict(total)}, indent=2))
        logger.info("wrote %s", path)
        if self.choice:
            logger.info("%s", self.choice)
        return path


def timing_lines(timings: dict[str, Timing], total: Timing) -> list[str]:
    """The run's wall and CPU time and load, then each kind of step's (the first word of its name: translate,
    score-nbest, tune, apply, ...), in the order they first ran; timings.json has every step."""
    kinds: dict[str, list[Timing]] = {}
    for name, timing in timings.items():
        kinds.setdefault(name.split()[0], []).append(timing)
    lines = [f"All: {total.wall_s:.0f} s by the wall clock, {total.cpu_s:.0f} s of CPU (user and system), load "
             f"average {total.load:.1f} on {total.cores} cores; by step (timings.json has each):", ""]
    lines += [f"- {kind}: {len(runs)} run{'s' * (len(runs) > 1)}, {sum(t.wall_s for t in runs):.0f} s wall, "
              f"{sum(t.cpu_s for t in runs):.0f} s CPU" for kind, runs in kinds.items()]
    return lines

