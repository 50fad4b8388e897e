"""The experiment's config (``rerank experiment CONFIG``): the Moses system, the dev and test sets, the models
and the study's settings; every file it names is checked before the first step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rerank.config import InvalidValue, at_least, from_dict, load_config_data
from rerank.study.distill import Targets
from rerank.tune.config import Optimizer
from rerank.tune.registry import check_optimizer
from rerank.tune.stats import check_tokenizer


@dataclass(frozen=True)
class Split:
    """One evaluation set: source, reference and the Moses n-best list of its source."""

    source: str  # the source text, tokenized
    reference: str  # its reference translation, tokenized as the n-best lists
    nbest: str | None = None  # Moses' n-best list of the source; none: Moses decodes it (moses.nbest_size)


@dataclass(frozen=True)
class MosesSystem:
    ini: str  # the tuned moses.ini: its [weight] section is the baseline
    language_model: str  # ARPA or KenLM binary, for the LM1 feature
    phrase_table: str | None = None  # scored with the encoder-decoder, and RNNsearch's dictionary for UNKs
    score_table: bool = True  # false: use the phrase table for UNKs and forced decoding, without scoring it
    decoder: str | None = None  # the moses binary: forced decoding gives the union Moses' features
    filter_script: str | None = None  # filter-model-given-input.pl: the model filtered to dev and test first
    threads: int = 1  # Moses' threads, in every Moses run of the study
    nbest_size: int | None = None  # Moses decodes dev and test into lists this long (distinct), in place of their nbest
    nbest_factor: int | None = None  # Moses' -n-best-factor for those lists (Moses' default: 20)

    def __post_init__(self) -> None:
        at_least(self, 1, "threads", "nbest_size", "nbest_factor")
        if self.nbest_size is not None and self.decoder is None:
            raise ValueError("moses.nbest_size: Moses decodes the lists: give moses.decoder too")


# A system of decoder_tuning: "baseline" (moses.ini as it is), or its phrase-table columns joined by "+", each
# a model of the study (COLUMN_MODELS; "ensemble": rnnsearch and its ensemble_seeds as one column, "channel":
# p(source | target), "phrases": the model trained on the table's phrase pairs, "student": distill's student),
# "-per-word" after it for its per-word form: "rnnsearch", "ensemble+channel", "student+phrases-per-word".
System = str
COLUMN_MODELS = ("encdec", "rnnsearch", "ensemble", "channel", "phrases", "student")
PER_WORD = "-per-word"


def system_columns(system: System) -> tuple[tuple[str, bool], ...]:
    """The phrase-table columns of a ``decoder_tuning`` system, in order: (model, per word) each; none for the
    baseline. A ValueError names what is wrong with the name."""
    if system == "baseline":
        return ()
    columns = []
    for part in system.split("+"):
        model = part.removesuffix(PER_WORD)
        if model not in COLUMN_MODELS:
            raise ValueError(f"decoder_tuning.systems: {system!r}: expected baseline or columns joined by +, each "
                             f"one of {', '.join(COLUMN_MODELS)} (with {PER_WORD} for the per-word form), got {part!r}")
        columns.append((model, part != model))
    if len(set(columns)) < len(columns):
        raise ValueError(f"decoder_tuning.systems: {system!r} names a column twice")
    return tuple(columns)


@dataclass(frozen=True)
class DecoderTuning:
    """Moses re-tuned on dev with Moses in the loop, and dev and test decoded with each run's weights (the
    phrase-table route): the system as it is and with each model's score as one more phrase-table column."""

    systems: tuple[System, ...] = ("baseline", "encdec", "rnnsearch")  # baseline: moses.ini; else its columns
    seeds: tuple[int, ...] = (1, 2, 3)  # one tuning run (rerank tune --decoder) per system and seed
    nbest_size: int = 100  # Moses' n-best list (distinct) per iteration
    restarts: int = 20  # MERT's random restarts
    iterations: int = 25  # decoder runs at most
    mert_moses: str | None = None  # mert-moses.pl: the baseline tuned by it too, from the same weights
    rescore: System | None = None  # a system whose runs' own n-best lists get every feature, re-tuned
    column_weight: float | Literal["auto"] = 0.2  # each new column's starting weight (score-table --weight)
    activate: Literal["all", "columns"] = "all"  # columns: the new columns' weights alone are tuned (rerank tune
    # --activate), Moses' own keep their ratios; the baseline is tuned whole either way

    def __post_init__(self) -> None:
        if not self.systems or not self.seeds:
            raise ValueError("give at least one system and one seed")
        for system in self.systems:
            system_columns(system)
        if self.rescore is not None and self.rescore not in self.systems:
            raise ValueError(f"rescore: {self.rescore} is not one of the systems {list(self.systems)}")
        at_least(self, 1, "nbest_size", "restarts", "iterations")
        check_seeds(self, "seeds")


@dataclass(frozen=True)
class Distill:
    """Sequence-level knowledge distillation (``rerank distill``): the study's RNNsearch ensemble (rnnsearch and
    its ensemble_seeds) translates the student's training sources with the study's beam and length penalty, and
    the student trains on its ``nbest`` best translations of each (alone or beside the references: ``targets``);
    with ``r2l_weight``, the study's ``right_to_left`` model reranks the teacher's beam with that weight first. The
    student is decoded alone, as RNNsearch is."""

    student: str  # the student's training config (rerank train --config): its data.train is what is translated
    targets: Targets = "ensemble"  # ensemble+references: the references too, each source twice
    nbest: int = 1  # translations kept per source, each a training pair
    chunk_lines: int = 1000  # source lines translated and written together (a stopped run resumes at a chunk)
    r2l_weight: float | None = None  # the right_to_left model's weight in reranking the teacher's beam; none: none

    def __post_init__(self) -> None:
        at_least(self, 1, "nbest", "chunk_lines")
        if self.r2l_weight is not None and not 0 <= self.r2l_weight <= 1:
            raise InvalidValue("r2l_weight", "a weight from 0 to 1", self.r2l_weight)


@dataclass(frozen=True)
class ExperimentConfig:
    output_dir: str  # where every output goes (rerank experiment --output-dir overrides it)
    encdec: str  # a training config (rerank train --config), or a trained model directory to use as it is
    rnnsearch: str  # the same for RNNsearch
    moses: MosesSystem
    dev: Split
    test: Split
    optimizers: tuple[Optimizer, ...] = ("mert", "pro", "mira")  # the tuners that tune every row
    seeds: tuple[int, ...] = (1, 2, 3)  # one tuning run per row, optimizer and seed
    restarts: int = 20  # MERT's random restarts
    cv_folds: int = 5  # every row's tuning k-fold cross-validated (rerank tune --cv): its held-out BLEU; 0: none
    beam: int = 10  # RNNsearch's beam when it decodes dev and test
    nbest: int = 10  # RNNsearch hypotheses per sentence in the union with Moses' n-best list
    length_penalty: Literal["none", "average", "wu"] = "wu"  # see rerank.search.beam.LengthPenalty
    unk_replace: bool = True  # RNNsearch's <unk>: the attended source word's translation in the phrase table
    tokenize: str = "none"  # sacreBLEU tokenizer: the data are tokenized
    buckets: str = "10"  # BLEU by source length: bucket width in words, or quintiles, ...
    threads: int | None = None  # torch's CPU threads for scoring and decoding (training: its config's); default all
    device: str = "cpu"  # where the models train, score and decode: cpu, cuda or cuda:N
    ensemble_seeds: tuple[int, ...] = ()  # more seeds of ``rnnsearch`` (a config): Ens0, the ensemble's ln p
    right_to_left: str | None = None  # a config (or model directory) with reverse_target: R2L0
    channel: str | None = None  # a target-to-source config (or model directory): Chan0 = ln p(source | hypothesis)
    cslm: str | None = None  # a CSLM config (or model directory), completed by moses.language_model: CSLM0
    phrases: str | None = None  # a config (or model directory) trained on a phrase table's pairs: a column only
    features: tuple[dict[str, Any], ...] = ()  # more features, as rescoring configs give them (kind hf, ...)
    consensus: bool = False  # MBRbleu0 and MBRchrf0 on each list, and rows that tune them with every feature
    list_sizes: tuple[int, ...] = ()  # rows on each sentence's first N hypotheses of Moses' lists
    rescoring: bool = True  # the rescoring rows on Moses' n-best lists; false: decoder_tuning alone
    union_with: Literal["rnnsearch", "ensemble"] = "rnnsearch"  # whose n-best list joins Moses' in the union rows
    decoder_tuning: DecoderTuning | None = None  # Moses re-tuned with Moses in the loop (needs moses.decoder)
    distill: Distill | None = None  # a student trained on the ensemble's translations (rerank distill)

    def split(self, name: str) -> Split:
        """``dev`` or ``test`` by name."""
        return self.dev if name == "dev" else self.test

    def __post_init__(self) -> None:
        if not self.optimizers or not self.seeds:
            raise ValueError("give at least one optimizer and one seed")
        for optimizer in self.optimizers:
            check_optimizer(optimizer)
        if self.cv_folds == 1 or self.cv_folds < 0:
            raise ValueError(f"cv_folds: expected 0 (none) or at least 2, got {self.cv_folds}")
        if any(size < 1 for size in self.list_sizes):
            raise ValueError(f"list_sizes: expected sizes of at least 1, got {list(self.list_sizes)}")
        if self.union_with == "ensemble" and not self.ensemble_seeds:
            raise ValueError("union_with: ensemble needs ensemble_seeds, the ensemble's other seeds")
        if self.ensemble_seeds and Path(self.rnnsearch).is_dir():
            raise ValueError("ensemble_seeds trains the rnnsearch config with other seeds: give a config, not a model")
        at_least(self, 1, "restarts", "beam", "nbest", "threads")
        check_seeds(self, "seeds", "ensemble_seeds")
        try:
            check_tokenizer(self.tokenize)
        except ValueError as e:
            raise InvalidValue("tokenize", str(e).partition(": expected ")[2] or "a BLEU tokenizer", self.tokenize
                               ) from None
        if self.nbest > self.beam:
            raise ValueError(f"nbest: expected at most beam ({self.beam}): a beam of {self.beam} keeps {self.beam} "
                             f"hypotheses, got {self.nbest}")
        if self.distill is not None and self.distill.nbest > self.beam:
            raise ValueError(f"distill.nbest: expected at most beam ({self.beam}), got {self.distill.nbest}")
        if self.distill is not None and self.distill.r2l_weight is not None and self.right_to_left is None:
            raise ValueError("distill.r2l_weight is the weight of the right_to_left model: give right_to_left")
        if self.decoder_tuning is not None and self.moses.decoder is None:
            raise ValueError("decoder_tuning runs Moses: give moses.decoder")
        for system in self.decoder_tuning.systems if self.decoder_tuning is not None else ():
            models = {model for model, _ in system_columns(system)}
            if self.channel is None and "channel" in models:
                raise ValueError(f"decoder_tuning.systems: {system!r} has a channel column: give channel, a "
                                 "target-to-source training config or model directory")
            if self.phrases is None and "phrases" in models:
                raise ValueError(f"decoder_tuning.systems: {system!r} has a phrases column: give phrases, a "
                                 "training config on a phrase table (data.phrase_table) or its model directory")
            if self.distill is None and "student" in models:
                raise ValueError(f"decoder_tuning.systems: {system!r} has a student column: give distill, the "
                                 "student trained on the ensemble's translations")
            if not self.ensemble_seeds and "ensemble" in models:
                raise ValueError(f"decoder_tuning.systems: {system!r} has an ensemble column: give ensemble_seeds, "
                                 "the ensemble's other seeds of rnnsearch")
        if not self.rescoring and self.decoder_tuning is None:
            raise ValueError("rescoring: false leaves nothing to run without decoder_tuning")
        unlisted = [name for name, split in (("dev", self.dev), ("test", self.test)) if split.nbest is None]
        if unlisted and self.rescoring and self.moses.nbest_size is None:
            raise ValueError(f"{unlisted[0]}.nbest: give Moses' n-best list, or moses.nbest_size for Moses to "
                             "decode it")


def check_seeds(config: object, *keys: str) -> None:
    """Each seed of the tuples ``keys`` of ``config`` is at least 0 (a random generator's seed)."""
    for key in keys:
        seeds = getattr(config, key)
        if any(seed < 0 for seed in seeds):
            raise InvalidValue(key, "seeds of at least 0", list(seeds))


def load_experiment(path: str | Path) -> ExperimentConfig:
    data = load_config_data(path)
    return from_dict(ExperimentConfig, data if data is not None else {}, str(path))
