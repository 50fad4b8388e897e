"""The candidate pools the rows rerank: Moses' n-best lists with every feature (``rerank score-nbest``), their
union with RNNsearch's (``rerank merge-nbest``), each sentence's first N hypotheses (``rerank cut-nbest``) and
the lists with the consensus features; and the neural systems' own translations (``rerank translate``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rerank.config import load_config
from rerank.features.registry import FEATURES, FeatureSpec, read_specs, scored_record
from rerank.formats.dictionaries import phrase_table_dictionary
from rerank.formats.files import display_name, read_lines
from rerank.formats.nbest import read_nbest
from rerank.formats.scored import record_path
from rerank.models.config import default_label, read_model_config
from rerank.rescore.append import RescoreConfig, score_nbest
from rerank.rescore.cut import cut_nbest
from rerank.study.checks import unknown_word_list
from rerank.study.config import ExperimentConfig, Split
from rerank.study.models import device_flag, extra_features
from rerank.study.runner import StepRunner, write_file
from rerank.study.steps import first_hypotheses_file, forced_union_file, merge_nbest_file

if TYPE_CHECKING:
    from rerank.rescore.feature import Feature

SPLITS = ("dev", "test")
UNION_SYSTEMS = {"rnnsearch": "RNNsearch", "ensemble": "Ensemble"}  # the name of each in the union: InRNNsearch, ...


def feature_config(config: ExperimentConfig, steps: StepRunner, models: dict[str, Path]) -> Path:
    """``rescore.yaml``: both models, the LM, and the penalties (shortlist: RNNsearch's vocabulary), and the
    extra models' features."""
    path = steps.out / "rescore.yaml"
    device = {} if config.device == "cpu" else {"device": config.device}
    features: list[dict[str, Any]] = [
        {"kind": "nmt", "name": "RNN0", "model": str(models["encdec"]), **device},
        {"kind": "nmt", "name": "RNNsearch0", "model": str(models["rnnsearch"]), **device},
        {"kind": "kenlm", "name": "LM1", "path": config.moses.language_model},
        {"kind": "word-penalty", "name": "WP1"},
        {"kind": "unk-penalty", "name": "UNK1", **unknown_word_list(models["rnnsearch"])},
    ]
    seeds = [str(models[name]) for name in models if name.startswith("rnnsearch")]
    extras: dict[str, dict[str, Any]] = {
        "Ens0": {"kind": "nmt", "model": seeds, "per_word": True},
        "R2L0": {"kind": "nmt", "model": str(models.get("right_to_left")), "per_word": True},
        "Chan0": {"kind": "nmt", "model": str(models.get("channel")), "channel": True, "per_word": True},
        "CSLM0": {"kind": "cslm", "model": str(models.get("cslm")), "lm": config.moses.language_model}}
    features += [{"name": label, **extras[label], **device} for label in extra_features(config) if label in extras]
    features += [{**device, **spec} if "device" in FEATURES[spec["kind"]].Config.__dataclass_fields__ else spec
                 for spec in config.features]  # the config's own: the study's device where the kind has one
    write_file(path, yaml.safe_dump({"features": features}, sort_keys=False))
    return path


def consensus_config(steps: StepRunner) -> Path:
    """``consensus.yaml``: expected sentence BLEU and chrF against the rest of the list."""
    path = steps.out / "consensus.yaml"
    features = [{"kind": "mbr", "metric": "bleu"}, {"kind": "mbr", "metric": "chrf"}]
    write_file(path, yaml.safe_dump({"features": features}, sort_keys=False))
    return path


class Scoring:
    """``rerank score-nbest --config``, each config's features built once for every list."""

    def __init__(self, steps: StepRunner):
        self.steps = steps
        self._features: dict[Path, tuple[list[FeatureSpec], list[Feature]]] = {}

    def __call__(self, nbest: str | Path, source: str, config: Path, output: Path, *, timing: str | None = None,
                 quiet: bool = False, reuse: tuple[Path, ...] = ()) -> None:
        """Score ``nbest`` into ``output`` and its record; the hypotheses that the lists of ``reuse`` (scored with
        ``config``, their records say) have keep their values."""
        self.steps.rerank(["score-nbest", nbest, "--source", source, "--config", config,
                           *(word for scored in reuse for word in ("--reuse", scored)), "-o", output],
                          [output, record_path(output)], self._score, nbest, source, config, output, reuse,
                          timing=timing, quiet=quiet)

    def _score(self, nbest: str | Path, source: str, config: Path, output: Path, reuse: tuple[Path, ...]) -> None:
        if config not in self._features:
            specs = read_specs(load_config(RescoreConfig, config).features, source=str(config))
            self._features[config] = specs, [spec.build() for spec in specs]
        specs, features = self._features[config]
        score_nbest(read_nbest(nbest), output, features, nbest_name=display_name(nbest), source=source,
                    reuse=reuse, record=scored_record(specs, source, nbest))


def translate(config: ExperimentConfig, steps: StepRunner, name: str, split: Split, models: dict[str, Path]) -> None:
    """The encoder-decoder's, RNNsearch's (and the ensemble's, the distilled student's) 1-best translations of
    ``split``, and RNNsearch's (or the ensemble's, ``union_with``) n-best list, as ``rerank translate`` makes them;
    a system with an n-best list is decoded once, its 1-best being the list's first hypotheses (``rerank apply
    --weight LABEL=0``)."""
    from rerank.models.checkpoint import load_model
    from rerank.models.ensemble import ensemble
    from rerank.search.beam import LengthPenalty, SearchConfig
    from rerank.search.translate import TranslationOutputs, translate_file

    c = config
    search = ["--beam", c.beam, "--length-penalty", c.length_penalty, *device_flag(c)]
    unk = ["--unk-replace"] if c.unk_replace else []
    if unk and c.moses.phrase_table:
        unk += ["--phrase-table", c.moses.phrase_table]
    search_config = SearchConfig(beam_size=c.beam, length_penalty=LengthPenalty(c.length_penalty))
    sentences = [line.split() for _, line in read_lines(split.source)]
    members = {"encdec": ["encdec"], "rnnsearch": ["rnnsearch"], "distilled": ["distilled"],
               "ensemble": ["rnnsearch", *(f"rnnsearch-seed{seed}" for seed in c.ensemble_seeds)]}
    dictionaries: dict[str, dict[str, str]] = {}
    # the encoder-decoder has no attention to replace UNKs with, nor has a student of its architecture
    unattending = {"encdec", *(("distilled",) if c.distill is not None and
                               read_model_config(models["distilled"]).architecture == "encdec" else ())}

    def dictionary(model: str) -> dict[str, str] | None:
        if not c.unk_replace or model in unattending:
            return None
        if "table" not in dictionaries:
            dictionaries["table"] = phrase_table_dictionary(c.moses.phrase_table) if c.moses.phrase_table else {}
        return dictionaries["table"]

    def run(model: str, output: Path, nbest: int | None = None) -> None:
        loaded = ensemble([load_model(models[m], c.device) for m in members[model]])
        chosen = dataclasses.replace(search_config, nbest=nbest) if nbest else search_config
        translate_file(loaded, sentences, TranslationOutputs(output, nbest=nbest is not None), chosen,
                       label=default_label(loaded.config), dictionary=dictionary(model), device=c.device)

    listed = ("rnnsearch", *(("ensemble",) if c.union_with == "ensemble" else ()))  # the n-best lists decoded
    for model in listed:
        nbest = steps.out / f"{name}.{model}.nbest.gz"
        steps.rerank(["translate", "--model", *(models[m] for m in members[model]), "-i", split.source, "-o", nbest,
                      *search, *unk, "--nbest", c.nbest], [nbest], run, model, nbest, c.nbest,
                     timing=f"translate {name} {model} {c.nbest}-best")
    decoded: list[tuple[str, list[Any]]] = [("encdec", search), ("rnnsearch", [*search, *unk])]
    if c.ensemble_seeds:
        decoded.append(("ensemble", [*search, *unk]))
    if c.distill is not None:
        decoded.append(("distilled", search if "distilled" in unattending else [*search, *unk]))
    for model, options in decoded:
        output = steps.out / f"{name}.{model}.1best"
        if model in listed:  # the same search: its 1-best is the n-best list's first hypothesis
            nbest = steps.out / f"{name}.{model}.nbest.gz"
            label = default_label(read_model_config(models[members[model][0]]))
            steps.rerank(["apply", nbest, "--weight", f"{label}=0", "--source", split.source, "-o", output],
                         [output], first_hypotheses_file, nbest, label, split.source, output)
            continue
        steps.rerank(["translate", "--model", *(models[m] for m in members[model]), "-i", split.source, "-o", output,
                      *options], [output], run, model, output, timing=f"translate {name} {model}")


def union(config: ExperimentConfig, steps: StepRunner, score: Scoring, name: str, split: Split, moses_list: str,
          features: Path, ini: Path | None) -> None:
    """The union of Moses' and RNNsearch's (or the ensemble's, ``union_with``) lists with "which system" indicators,
    scored with every feature; with ``ini`` (Moses in the study), with Moses' features on every line (forced
    decoding)."""
    systems = [("Moses", moses_list), (UNION_SYSTEMS[config.union_with],
                                       str(steps.out / f"{name}.{config.union_with}.nbest.gz"))]
    if ini is None:
        merged = steps.out / f"{name}.union.gz"
        steps.rerank(["merge-nbest", *(f"{n}={p}" for n, p in systems), "-o", merged], [merged], merge_nbest_file,
                     systems, merged)
    else:
        moses = config.moses
        merged = steps.out / f"{name}.union-moses.gz"
        filter_flag = ["--filter-script", moses.filter_script] if moses.filter_script else []
        steps.rerank(["merge-nbest", *(f"{n}={p}" for n, p in systems), "--moses-ini", ini, "--source",
                      split.source, "--moses", moses.decoder, "--threads", moses.threads, *filter_flag, "-o", merged],
                     [merged], forced_union_file, systems, ini, split.source, moses, merged,
                     timing=f"forced decoding {name}")
    # Moses' hypotheses keep the values of Moses' scored list: only the other system's new ones are scored
    score(merged, split.source, features, merged.with_name(merged.name.replace(".gz", ".scored.gz")),
          timing=f"score-nbest {name} union", reuse=(steps.out / f"{name}.moses.scored.gz",))


def cut_lists(config: ExperimentConfig, steps: StepRunner, score: Scoring, name: str, split: Split,
              pools: tuple[str, ...]) -> None:
    """Each sentence's first N hypotheses of Moses' scored list for every N of ``list_sizes``; with ``consensus``,
    the consensus features computed on each list as it is tuned (their posterior is softmax(field 4): Moses'
    model score on Moses' lists, uniform on the union, whose totals are 0), ``pools`` naming the others."""
    consensus = consensus_config(steps) if config.consensus else None
    inputs: list[tuple[Path, str]] = []  # (a scored list, the name of the list with consensus features)
    if consensus:
        inputs += [(steps.out / f"{name}.{pool}.scored.gz", f"{pool}-mbr") for pool in pools]
    for size in config.list_sizes:
        moses, scored = steps.out / f"{name}.moses.scored.gz", steps.out / f"{name}.moses{size}.scored.gz"
        cut = steps.out / f"{name}.moses{size}.cut.gz" if consensus else scored
        steps.rerank(["cut-nbest", moses, "-n", size, "-o", cut], [cut], cut_nbest, moses, size, cut)
        if consensus:
            inputs.append((cut, f"moses{size}"))
    for nbest, tuned in inputs:
        assert consensus is not None
        score(nbest, split.source, consensus, steps.out / f"{name}.{tuned}.scored.gz",
              timing=f"consensus {name} {tuned}")
