"""The end-to-end study: neural features for a real Moses system, as Cho et al. 2014 (Table 1) and
Bahdanau et al. 2014 (Fig. 2) ran it, on any data given in the same layout.

Every step calls the library function behind a ``rerank`` command and logs that command to
``commands.sh`` in the output directory, so that each number of the results table can be
reproduced by hand. A step whose
outputs exist is skipped, so a stopped run picks up where it was (training resumes from its
checkpoint). The steps:

1. train the encoder-decoder and RNNsearch (``rerank train``), and where the config names them, more
   RNNsearch seeds (an ensemble), a right-to-left RNNsearch, a target-to-source one (the channel) and a
   CSLM;
2. score the phrase table with the encoder-decoder (``rerank score-table``);
3. decode dev and test with both models (``rerank translate``; RNNsearch also as an n-best list);
4. add RNN0, RNNsearch0, LM1, WP1 and UNK1 to Moses' n-best lists, and to the union of Moses' and
   RNNsearch's n-best lists with "which system" indicators (``rerank merge-nbest``,
   ``rerank score-nbest``); with the extra models also Ens0, R2L0 and Chan0 (each with its
   per-word variant) and CSLM0;
5. for each row of the table, tune on dev with each optimiser and seed (``rerank tune``), apply
   the weights to dev and test (``rerank apply``) and score them (sacreBLEU); with the extra
   models, a row with every feature and an ablation row without each extra one; with Moses itself
   (``moses.decoder``), the union in which every hypothesis has Moses' features (forced decoding,
   ``rerank merge-nbest --moses-ini``); with ``consensus``,
   rows with MBRbleu0 and MBRchrf0 too (``rerank.features.mbr``, computed on each list as it is
   tuned); with ``list_sizes``, rows on each sentence's first N hypotheses of Moses' lists
   (``rerank cut-nbest``);
6. write ``results.md`` and ``results.json`` (beside every row, the oracle BLEU of its candidate
   pool: ``rerank oracle``), and BLEU by source length (table and PNG).

Beside this module: :mod:`rerank.study.config` (the config), :mod:`rerank.study.rows` (the table's
rows), :mod:`rerank.study.steps` (the steps that write one file) and :mod:`rerank.study.report`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rerank.config import from_dict, load_yaml, with_overrides
from rerank.errors import RerankError
from rerank.formats.files import committed_together, make_output_dir
from rerank.formats.moses_ini import TRAIN_MODEL_WEIGHT
from rerank.study.config import ExperimentConfig, Split, check_inputs
from rerank.study.report import Score, model_summary, table_row
from rerank.study.rows import (
    EXTRA_FEATURES,
    NEW_FEATURES,
    ROWS,
    Row,
    consensus_rows,
    extended_rows,
    forced_rows,
    size_rows,
)
from rerank.study.steps import (
    cut_nbest_file,
    forced_union_file,
    merge_nbest_file,
    oracle_file,
    rerank_once,
    train_model,
    write_file,
)

if TYPE_CHECKING:
    from rerank.rescore.feature import Feature
    from rerank.tune.config import TuneConfig

logger = logging.getLogger(__name__)


class Experiment:
    """Runs the study of an :class:`ExperimentConfig` (see the module docstring)."""

    def __init__(self, config: ExperimentConfig, force: bool = False, source: str = "the experiment config"):
        self.config = config
        self.source = source  # the config's file, for messages
        self.out = Path(config.output_dir)
        make_output_dir(self.out, "output_dir")
        self.force = force
        self.commands = self.out / "commands.sh"
        self.timings: dict[str, float] = {}
        self._features: dict[Path, list[Feature]] = {}

    # -- running steps ---------------------------------------------------------------------------

    def step(self, argv: Sequence[object], outputs: Sequence[Path], run: Callable[..., object], *args: Any,
             timing: str | None = None, quiet: bool = False) -> None:
        """Call ``run(*args)`` unless all ``outputs`` exist; log ``rerank ARGV``, the command that does the
        same, to commands.sh (and to stderr, unless the step is one of many, ``quiet``)."""
        line = "rerank " + shlex.join(str(a) for a in argv)
        if outputs and all(p.exists() for p in outputs) and not self.force:
            logger.debug("done already: %s", line)
            return
        logger.log(logging.DEBUG if quiet else logging.INFO, "$ %s", line)
        with open(self.commands, "a", encoding="utf-8") as log:
            log.write(line + "\n")
        started = time.monotonic()
        run(*args)
        if timing:
            self.timings[timing] = time.monotonic() - started

    def device_flag(self) -> list[str]:
        """``--device`` for the commands.sh line of a step that runs a model (none for the CPU)."""
        return [] if self.config.device == "cpu" else ["--device", self.config.device]

    # -- the study -------------------------------------------------------------------------------

    def run(self) -> Path:
        from rerank.models.device import torch_device, torch_threads

        torch_device(self.config.device)  # checked before the first step, as the inputs are
        check_inputs(self.config, self.source)
        with torch_threads(self.config.threads):
            return self._run()

    def _run(self) -> Path:
        c = self.config
        models = self.train()
        self.score_phrase_table(models["encdec"])
        features = self.feature_config(models)
        splits = {"dev": c.dev, "test": c.test}
        for name, split in splits.items():
            self.decode(name, split, models)
            moses = self.out / f"{name}.moses.scored.gz"
            self.step(["score-nbest", split.nbest, "--source", split.source, "--config", features, "-o", moses],
                      [moses], self.score_nbest, split.nbest, split.source, moses,
                      timing=f"score-nbest {name}")
            if c.moses.decoder:  # the union rows tune its lines' other features (the same hypotheses and values)
                self.forced_union(name, split, features)
            else:
                union = self.out / f"{name}.union.gz"
                rnnsearch = self.out / f"{name}.rnnsearch.nbest.gz"
                self.step(["merge-nbest", f"Moses={split.nbest}", f"RNNsearch={rnnsearch}", "-o", union], [union],
                          merge_nbest_file, [("Moses", split.nbest), ("RNNsearch", rnnsearch)], union)
                scored = self.out / f"{name}.union.scored.gz"
                self.step(["score-nbest", union, "--source", split.source, "--config", features, "-o", scored],
                          [scored], self.score_nbest, union, split.source, scored)
            self.consensus_and_sizes(name, split)
        results = self.tune_rows()
        return self.report(models, results)

    def forced_union(self, name: str, split: Split, features: Path) -> None:
        """The union of Moses' and RNNsearch's lists with Moses' features on every line (forced decoding
        with :meth:`decoding_ini`), then scored with every feature."""
        c = self.config
        assert c.moses.decoder is not None
        union, scored = self.out / f"{name}.union-moses.gz", self.out / f"{name}.union-moses.scored.gz"
        systems = [("Moses", split.nbest), ("RNNsearch", str(self.out / f"{name}.rnnsearch.nbest.gz"))]
        ini = self.decoding_ini()
        threads = c.threads or 1
        filter_flag = ["--filter-script", c.moses.filter_script] if c.moses.filter_script else []
        self.step(["merge-nbest", *(f"{n}={p}" for n, p in systems), "--moses-ini", ini, "--source", split.source,
                   "--moses", c.moses.decoder, "--threads", threads, *filter_flag, "-o", union], [union],
                  forced_union_file, systems, ini, split.source, c.moses, threads, union,
                  timing=f"forced decoding {name}")
        self.step(["score-nbest", union, "--source", split.source, "--config", features, "-o", scored],
                  [scored], self.score_nbest, union, split.source, scored)

    def decoding_ini(self) -> Path:
        """The moses.ini for Moses to decode with: ``moses.ini`` with each table or LM path that names no file
        replaced by ``moses.phrase_table`` (a phrase dictionary's) or ``moses.language_model`` (KENLM's),
        as for a shipped system whose moses.ini has placeholders for its directories."""
        import glob

        from rerank.formats.moses_ini import MosesIni

        moses = self.config.moses
        ini = MosesIni.read(moses.ini)
        for feature in ini.features():
            path = feature.args.get("path")
            if path is None or os.path.exists(path) or glob.glob(glob.escape(path) + ".*"):
                continue
            if feature.kind.startswith("PhraseDictionary") and moses.phrase_table:
                ini = ini.with_table_path(feature.name, str(Path(moses.phrase_table).resolve()))
            elif feature.kind == "KENLM":
                ini = ini.with_table_path(feature.name, str(Path(moses.language_model).resolve()))
        output = self.out / "moses.decode.ini"
        ini.write(output)
        return output

    def consensus_and_sizes(self, name: str, split: Split) -> None:
        """The lists of the consensus and list-size rows: each sentence's first N hypotheses of Moses'
        scored list, and the consensus features computed on each list as it is tuned (their posterior
        is softmax(field 4): Moses' model score on Moses' lists, uniform on the union, whose totals are 0)."""
        c = self.config
        consensus = self.consensus_config() if c.consensus else None
        inputs: list[tuple[Path, str]] = []  # (a scored list, the name of the list with consensus features)
        if consensus:
            inputs += [(self.out / f"{name}.{pool}.scored.gz", f"{pool}-mbr") for pool in ("moses", self.union_pool())]
        for size in c.list_sizes:
            moses, scored = self.out / f"{name}.moses.scored.gz", self.out / f"{name}.moses{size}.scored.gz"
            cut = self.out / f"{name}.moses{size}.cut.gz" if consensus else scored
            self.step(["cut-nbest", moses, "-n", size, "-o", cut], [cut], cut_nbest_file, moses, size, cut)
            if consensus:
                inputs.append((cut, f"moses{size}"))
        for nbest, tuned in inputs:
            output = self.out / f"{name}.{tuned}.scored.gz"
            self.step(["score-nbest", nbest, "--source", split.source, "--config", consensus, "-o", output],
                      [output], self.score_nbest, nbest, split.source, output, consensus,
                      timing=f"consensus {name} {tuned}")

    def consensus_config(self) -> Path:
        """The consensus features, expected sentence BLEU and chrF against the rest of the list."""
        path = self.out / "consensus.yaml"
        features = [{"kind": "mbr", "metric": "bleu"}, {"kind": "mbr", "metric": "chrf"}]
        write_file(path, yaml.safe_dump({"features": features}, sort_keys=False))
        return path

    def train(self) -> dict[str, Path]:
        """Every model of the study: trained, or taken as it is where the config names a model directory.
        Every training config is read and checked before the first model trains."""
        from rerank.training.config import load_train_config
        from rerank.training.cslm import CSLMTrainConfig, train_cslm

        c = self.config
        runs: list[tuple[str, str, int | None]] = [("encdec", c.encdec, None), ("rnnsearch", c.rnnsearch, None)]
        runs += [(f"rnnsearch-seed{seed}", c.rnnsearch, seed) for seed in c.ensemble_seeds]
        runs += [(name, config, None) for name, config in
                 (("right_to_left", c.right_to_left), ("channel", c.channel), ("cslm", c.cslm)) if config is not None]
        models: dict[str, Path] = {}
        trainings: list[tuple[str, list[object], Callable[..., object], Any]] = []
        for name, config, seed in runs:
            if Path(config).is_dir():
                logger.info("%s: the trained model in %s", name, config)
                models[name] = Path(config)
                continue
            directory = models[name] = self.out / "models" / name
            train: Callable[..., object] = train_model
            if name == "cslm":
                data = load_yaml(config)
                train_config: Any = from_dict(CSLMTrainConfig, data if data is not None else {}, config)
                train = train_cslm
            else:
                train_config = load_train_config(config)
            train_config = with_overrides(train_config, {"output_dir": str(directory), "training.seed": seed})
            seed_flag: list[object] = ["--seed", seed] if seed is not None else []
            trainings.append((name, ["train", "--config", config, "--output-dir", directory, *seed_flag,
                                     *self.device_flag()], train, train_config))
        for name, argv, train, train_config in trainings:
            self.step(argv, [], train, train_config, c.device, timing=f"train {name}")
        return models

    def extra_features(self) -> tuple[str, ...]:
        """The labels of the extra models' features this study has (see :data:`EXTRA_FEATURES`)."""
        c = self.config
        present = {"ensemble": bool(c.ensemble_seeds), "right_to_left": c.right_to_left is not None,
                   "channel": c.channel is not None, "cslm": c.cslm is not None}
        return tuple(label for key, label in EXTRA_FEATURES.items() if present[key])

    def rows(self) -> tuple[Row, ...]:
        c = self.config
        everything = (*NEW_FEATURES, *self.extra_features())
        rows = (*ROWS, *extended_rows(self.extra_features()), *(consensus_rows(everything) if c.consensus else ()),
                *(forced_rows(everything, c.consensus) if c.moses.decoder else ()),
                *size_rows(everything, c.list_sizes, c.consensus))
        pool = {"union": self.union_pool(), "union-mbr": f"{self.union_pool()}-mbr"}
        return tuple(dataclasses.replace(row, nbest=pool.get(row.nbest, row.nbest)) for row in rows)

    def union_pool(self) -> str:
        """The union's scored list: with Moses' features on every line where the study runs Moses."""
        return "union-moses" if self.config.moses.decoder else "union"

    def score_phrase_table(self, encdec: Path) -> None:
        from rerank.formats.phrase_table import read_phrase_table
        from rerank.formats.streams import peek
        from rerank.search.scoring import Scorer
        from rerank.search.table import score_phrase_table, table_moses_ini

        moses = self.config.moses
        phrase_table = moses.phrase_table
        if phrase_table is None or not moses.score_table:
            return
        table, ini = self.out / "phrase-table.rnn.gz", self.out / "moses.rnn.ini"
        start = self.decoding_ini()  # the system's moses.ini with its placeholders filled in

        def score() -> None:
            first, entries = peek(read_phrase_table(phrase_table))
            scores = len(first.scores) if first is not None else None
            scored_ini = table_moses_ini(start, ini, "TranslationModel0", scores, table, TRAIN_MODEL_WEIGHT)
            score_phrase_table(entries, Scorer.load(encdec, self.config.device), table=phrase_table, output=table,
                               show_progress=False)
            scored_ini.write(ini)

        self.step(["score-table", phrase_table, "-o", table, "--model", encdec, "--moses-ini", start,
                   "--moses-ini-out", ini, *self.device_flag()], [table, ini], score, timing="score-table")

    def feature_config(self, models: dict[str, Path]) -> Path:
        """The rescoring features: both models, the LM, and the penalties (shortlist: RNNsearch's vocabulary)."""
        path = self.out / "rescore.yaml"
        device = {} if self.config.device == "cpu" else {"device": self.config.device}
        features: list[dict[str, Any]] = [
            {"kind": "nmt", "name": "RNN0", "model": str(models["encdec"]), **device},
            {"kind": "nmt", "name": "RNNsearch0", "model": str(models["rnnsearch"]), **device},
            {"kind": "kenlm", "name": "LM1", "path": self.config.moses.language_model},
            {"kind": "word-penalty", "name": "WP1"},
            {"kind": "unk-penalty", "name": "UNK1", "vocab": str(models["rnnsearch"] / "vocab.trg.txt")},
        ]
        seeds = [str(models[name]) for name in models if name.startswith("rnnsearch")]
        extras: dict[str, dict[str, Any]] = {
            "Ens0": {"kind": "nmt", "model": seeds, "per_word": True},
            "R2L0": {"kind": "nmt", "model": str(models.get("right_to_left")), "per_word": True},
            "Chan0": {"kind": "nmt", "model": str(models.get("channel")), "channel": True, "per_word": True},
            "CSLM0": {"kind": "cslm", "model": str(models.get("cslm")), "lm": self.config.moses.language_model}}
        features += [{"name": label, **extras[label], **device} for label in self.extra_features()]
        write_file(path, yaml.safe_dump({"features": features}, sort_keys=False))
        return path

    def score_nbest(self, nbest: str | Path, source: str, output: Path, config: Path | None = None) -> None:
        """``rerank score-nbest`` with the features of ``config`` (default: :meth:`feature_config`'s), each
        config's built once for every list."""
        from rerank.config import load_config
        from rerank.features.registry import build_features
        from rerank.formats.files import display_name
        from rerank.formats.nbest import read_nbest
        from rerank.rescore.append import RescoreConfig, score_nbest

        path = config or self.out / "rescore.yaml"
        if path not in self._features:
            self._features[path] = build_features(load_config(RescoreConfig, path).features, source=str(path))
        score_nbest(read_nbest(nbest), output, self._features[path], nbest_name=display_name(nbest), source=source)

    def decode(self, name: str, split: Split, models: dict[str, Path]) -> None:
        from rerank.formats.dictionaries import phrase_table_dictionary
        from rerank.formats.files import read_lines
        from rerank.models.checkpoint import load_model
        from rerank.models.config import default_label
        from rerank.models.ensemble import ensemble
        from rerank.search.beam import LengthPenalty, SearchConfig
        from rerank.search.translate import TranslationOutputs, translate_file

        c = self.config
        search = ["--beam", c.beam, "--length-penalty", c.length_penalty, *self.device_flag()]
        unk = ["--unk-replace"] if c.unk_replace else []
        if unk and c.moses.phrase_table:
            unk += ["--phrase-table", c.moses.phrase_table]
        config = SearchConfig(beam_size=c.beam, length_penalty=LengthPenalty(c.length_penalty))
        sentences = [line.split() for _, line in read_lines(split.source)]
        dictionaries: dict[str, dict[str, str]] = {}

        def dictionary() -> dict[str, str] | None:
            if not c.unk_replace:
                return None
            if "table" not in dictionaries:
                dictionaries["table"] = phrase_table_dictionary(c.moses.phrase_table) if c.moses.phrase_table else {}
            return dictionaries["table"]

        def translate(model: str, output: Path, nbest: int | None = None) -> None:
            loaded = ensemble([load_model(models[m], c.device) for m in members[model]])
            search_config = dataclasses.replace(config, nbest=nbest) if nbest else config
            translate_file(loaded, sentences, TranslationOutputs(output, nbest=nbest is not None), search_config,
                           label=default_label(loaded.config),
                           dictionary=dictionary() if model != "encdec" else None, device=c.device)

        members = {"encdec": ["encdec"], "rnnsearch": ["rnnsearch"],
                   "ensemble": ["rnnsearch", *(f"rnnsearch-seed{seed}" for seed in c.ensemble_seeds)]}

        # the encoder-decoder has no attention to replace UNKs with
        decoded: list[tuple[str, list[Any]]] = [("encdec", search), ("rnnsearch", [*search, *unk])]
        if c.ensemble_seeds:
            decoded.append(("ensemble", [*search, *unk]))
        for model, options in decoded:
            output = self.out / f"{name}.{model}.1best"
            self.step(["translate", "--model", *(models[m] for m in members[model]), "-i", split.source, "-o", output,
                       *options], [output], translate, model, output, timing=f"translate {name} {model}")
        nbest = self.out / f"{name}.rnnsearch.nbest.gz"
        self.step(["translate", "--model", models["rnnsearch"], "-i", split.source, "-o", nbest, *search, *unk,
                   "--nbest", c.nbest], [nbest], translate, "rnnsearch", nbest, c.nbest)

    def tune_rows(self) -> dict[str, dict[str, Score]]:
        """BLEU of every row (and the baseline) by optimiser: dev and test, one value per seed."""
        from rerank.tune.config import TuneConfig

        c = self.config
        results: dict[str, dict[str, Score]] = {"moses": {"moses.ini": Score()}}
        baseline = self.apply("moses", "moses.ini", c.moses.ini)
        for split, path in baseline.items():
            getattr(results["moses"]["moses.ini"], split).append(self.bleu(path, split))
        moses_labels = self.moses_labels()
        rows = self.rows()
        runs = len(rows) * len(c.optimizers) * len(c.seeds)
        done = 0
        for row in rows:
            features = (*moses_labels, *row.features) if row.moses_features else row.features
            init = c.moses.ini if row.moses_features else self.union_init()
            nbest = self.out / f"dev.{row.nbest}.scored.gz"
            results[row.key] = {}
            for optimizer in c.optimizers:
                score = results[row.key][optimizer] = Score()
                for seed in c.seeds:
                    done += 1
                    tag = f"{optimizer}-seed{seed}"
                    weights = self.out / "tuning" / row.key / f"{tag}.yaml"
                    weights.parent.mkdir(parents=True, exist_ok=True)
                    config = with_overrides(TuneConfig(), {"optimizer": optimizer, "seed": seed,
                                                           "mert.restarts": c.restarts, "bleu.tokenize": c.tokenize})
                    logger.info("tuning %d of %d: %s, %s, seed %d (and reranking dev and test)", done, runs,
                                row.key, optimizer, seed)
                    self.step(["tune", "--nbest", nbest, "-r", c.dev.reference, "--init", init, "--features",
                               ",".join(features), "--optimizer", optimizer, "--seed", seed, "--restarts",
                               c.restarts, "--tokenize", c.tokenize, "-o", weights], [weights], self.tune_once,
                              config, init, features, nbest, weights, quiet=True)
                    outputs = self.apply(row.key, tag, weights, nbest=row.nbest)
                    for split, path in outputs.items():
                        getattr(score, split).append(self.bleu(path, split))
        return results

    def tune_once(self, config: TuneConfig, init: str | Path, features: tuple[str, ...], nbest: Path,
                  weights: Path) -> None:
        """``rerank tune`` on dev's scored n-best list, only ``features`` tuned."""
        from rerank.formats.weights import save_weights
        from rerank.tune.tuning import Tuning

        result = Tuning([self.config.dev.reference], config, init=init).on_nbest([nbest], features)
        save_weights(result.weights, weights)

    def apply(self, row: str, tag: str, weights: str | Path, nbest: str = "moses") -> dict[str, Path]:
        """1-best outputs of dev and test under ``weights`` (features without a weight count 0; a moses.ini's
        weights of features the list does not print are left out)."""
        outputs = {}
        for split in ("dev", "test"):
            output = self.out / "tuning" / row / f"{tag}.{split}.1best"
            output.parent.mkdir(parents=True, exist_ok=True)
            scored = self.out / f"{split}.{nbest}.scored.gz"
            source = getattr(self.config, split).source

            self.step(["apply", scored, "--weights", weights, "--missing-weight", "0", "--source", source,
                       "-o", output], [output], rerank_once, scored, weights, source, output, quiet=True)
            outputs[split] = output
        return outputs

    def moses_labels(self) -> tuple[str, ...]:
        from rerank.formats.nbest import read_nbest

        first = next(read_nbest(self.config.dev.nbest), None)
        if first is None:
            raise RerankError(f"{self.config.dev.nbest}: empty n-best list")
        return first.layout.labels

    def union_init(self) -> Path:
        """Starting weights for the union: RNNsearch's own score, so the search starts from RNNsearch's ranking."""
        path = self.out / "tuning" / "union-init.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, "RNNsearch0: 1.0\n")
        return path

    def oracles(self) -> dict[str, dict[str, float]]:
        """The oracle BLEU of each row's candidate pool (its scored list), by list name and split."""
        c = self.config
        result: dict[str, dict[str, float]] = {}
        for pool in sorted({"moses", *(row.nbest for row in self.rows())}):
            for split in ("dev", "test"):
                nbest, output = self.out / f"{split}.{pool}.scored.gz", self.out / f"{split}.{pool}.oracle.json"
                reference = getattr(c, split).reference
                self.step(["oracle", "-r", reference, "--tokenize", c.tokenize, nbest, "--json", output], [output],
                          oracle_file, nbest, reference, c.tokenize, output, quiet=True)
                figures = json.loads(output.read_text(encoding="utf-8"))
                result.setdefault(pool, {})[split] = figures[str(nbest)]["oracle"]
        return result

    def bleu(self, path: Path, split: str) -> float:
        from rerank.study.evaluation import evaluate

        reference = getattr(self.config, split).reference
        return evaluate([(path.name, str(path))], [reference], tokenize=self.config.tokenize).systems[0].bleu

    # -- the report ------------------------------------------------------------------------------

    def report(self, models: dict[str, Path], results: dict[str, dict[str, Score]]) -> Path:
        from rerank.study.evaluation import evaluate, format_evaluation
        from rerank.study.plots import plot_bucket_bleu

        c = self.config
        rnnsearch = {split: self.bleu(self.out / f"{split}.rnnsearch.1best", split) for split in ("dev", "test")}
        encdec = {split: self.bleu(self.out / f"{split}.encdec.1best", split) for split in ("dev", "test")}
        ensembled = {split: self.bleu(self.out / f"{split}.ensemble.1best", split)
                     for split in ("dev", "test")} if c.ensemble_seeds else {}
        systems = [("Moses", str(self.out / "tuning" / "moses" / "moses.ini.test.1best")),
                   ("RNN encoder-decoder", str(self.out / "test.encdec.1best")),
                   ("RNNsearch", str(self.out / "test.rnnsearch.1best")),
                   ("Moses + all features", str(self.out / "tuning" / "all" / f"{c.optimizers[0]}-seed{c.seeds[0]}"
                                                 ".test.1best"))]
        by_length = evaluate(systems, [c.test.reference], source=c.test.source, buckets=c.buckets,
                             tokenize=c.tokenize)
        plot_bucket_bleu(by_length, self.out / "bleu-by-length.png")
        signature = by_length.bleu_signature
        oracles = self.oracles()
        first = c.optimizers[0].upper()
        lines = [f"| system | dev BLEU ({first}) | test BLEU ({first}) | "
                 + "".join(f"test BLEU ({o.upper()}) | " for o in c.optimizers[1:]) + "oracle BLEU (dev / test) |",
                 "|---|---|---|" + "---|" * len(c.optimizers),
                 table_row("Moses baseline (its own weights)", {c.optimizers[0]: results["moses"]["moses.ini"]},
                            c.optimizers, oracles["moses"])]
        for row in self.rows():
            lines.append(table_row(row.title, results[row.key], c.optimizers, oracles[row.nbest]))
            if row.key == "all":
                lines.append(table_row(f"RNNsearch alone (beam {c.beam})", {c.optimizers[0]: Score(
                    [rnnsearch["dev"]], [rnnsearch["test"]])}, c.optimizers))
                if ensembled:
                    lines.append(table_row(f"RNNsearch ensemble of {len(c.ensemble_seeds) + 1} (beam {c.beam})",
                                            {c.optimizers[0]: Score([ensembled["dev"]], [ensembled["test"]])},
                                            c.optimizers))
        models_md = model_summary(models)
        text = "\n".join([
            "# Results", "",
            f"Tuned on dev ({c.dev.source}), tested on {c.test.source}; BLEU by sacreBLEU, {signature}.",
            f"Tuned rows: mean ± standard deviation over seeds {', '.join(map(str, c.seeds))}; the oracle BLEU "
            "is that of the candidate pool each row reranks (rerank oracle).", "",
            *lines, "",
            f"RNN encoder-decoder alone (beam {c.beam}): dev {encdec['dev']:.2f}, test {encdec['test']:.2f}.", "",
            "## Models", "", *models_md, "",
            "## BLEU by source length (test)", "", "```", format_evaluation(by_length).rstrip(), "```", "",
            "![BLEU by source length](bleu-by-length.png)", "",
            "## Timings", "", *(f"- {step}: {seconds:.0f} s" for step, seconds in self.timings.items()), "",
        ])
        path = self.out / "results.md"
        with committed_together():  # the table and its numbers appear together
            write_file(path, text)
            write_file(self.out / "results.json", json.dumps(
                {"signature": signature, "rnnsearch": rnnsearch, "encdec": encdec, "ensemble": ensembled,
                 "oracle": oracles,
                 "rows": {key: {o: dataclasses.asdict(s) for o, s in row.items()} for key, row in results.items()},
                 "timings": self.timings}, indent=2))
        logger.info("wrote %s", path)
        return path
