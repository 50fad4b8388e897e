"""Training configuration as frozen dataclasses from YAML (torch-free: reading a config costs no torch import)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from rerank.config import at_least, below, from_dict, load_config_data
from rerank.models.config import CSLMConfig, ModelConfig, model_config_type


@dataclass(frozen=True)
class TextPair:
    source: str  # source-language text, one tokenized sentence per line
    target: str  # target-language text, line by line the translation of source


@dataclass(frozen=True)
class DataConfig:
    """Training data: a parallel corpus (``train``), the phrase pairs of a Moses table (``phrase_table``), or data
    made once by ``rerank prepare`` (``prepared``: its vocabularies and length limit are those it was prepared
    with). Text is prepared into the model directory's ``data/`` before training."""

    valid: TextPair
    train: TextPair | None = None
    phrase_table: str | None = None  # a Moses phrase table: train on its distinct phrase pairs (Cho et al.)
    prepared: str | None = None  # a directory written by `rerank prepare`
    src_vocab_size: int = 15000  # frequency shortlists (Cho et al.; Bahdanau et al. use 30,000)
    trg_vocab_size: int = 15000  # target shortlist; other words are <unk>
    max_length: int = 50  # longer training pairs are skipped (RNNsearch-50); scoring takes any length

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.train, self.phrase_table, self.prepared)) != 1:
            raise ValueError("give exactly one of 'train' (source and target files), 'phrase_table' or 'prepared'")
        at_least(self, 1, "src_vocab_size", "trg_vocab_size", "max_length")


@dataclass(frozen=True)
class TrainingConfig:
    optimizer: Literal["adadelta", "adam"] = "adadelta"  # adadelta (as the papers) or adam
    learning_rate: float = 1.0  # Adadelta's scale (1.0, as the papers); for Adam, 1e-3 say
    adadelta_rho: float = 0.95  # Adadelta's decay of its running averages
    adadelta_eps: float = 1e-6  # Adadelta's ε
    batch_size: int = 80  # sentence pairs per update (under torchrun: over all processes together)
    # batches of as many length-sorted pairs as fit in this many padded tokens (pairs × the longest of their sources
    # and targets, </s> included: fairseq's max_tokens) instead of batch_size pairs, which then sizes only the sort
    # window (bucket_window × batch_size pairs); the learning rate is not scaled (docs/results/speed.md)
    batch_tokens: int | None = None  # padded tokens per batch (unset: batch_size pairs on CPU, 8192 on GPU; 0: pairs)
    bucket_window: int = 20  # sort by length within this many batches
    pool_pairs: int = 250_000  # pairs shuffled together (blocks of batch_size x bucket_window pairs drawn at random)
    clip_norm: float = 1.0  # gradient norm clipping (Bahdanau et al.: 1)
    max_epochs: int = 10  # passes over the training data, at most
    max_updates: int | None = None  # updates, at most; none: no limit
    max_minutes: float | None = None  # wall-clock budget
    valid_every: int = 1000  # updates between validations (and checkpoints)
    log_every: int = 100  # updates between progress lines
    patience: int = 10  # validations without improvement before stopping
    # model.pt: the weights of the best validation perplexity, or the last validation's (where the validation text
    # watches a run but cannot choose its weights: a model trained on phrase pairs, validated on sentences)
    keep_weights: Literal["best", "last"] = "best"
    lr_decay: float = 1.0  # multiply the learning rate by this after a validation without improvement
    warmup_updates: int = 0  # the learning rate rises linearly over this many first updates
    label_smoothing: float = 0.0  # ε: the loss is (1 − ε) NLL + ε · mean over the vocabulary of −ln p
    keep_checkpoints: int = 0  # weights kept at the last N validations and the best N, for `rerank average`
    seed: int = 1234  # of the initial weights and the batches' order (another seed: another model)
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: the forward pass under torch.autocast (for a GPU)
    threads: int | None = None  # torch CPU threads; default: torch's (OMP_NUM_THREADS, else the cores)
    # fine-tuning: a trained model directory (rerank train's) whose weights start the run, and whose vocabularies
    # (and subword models) the data are prepared with; its model section must build the same weights' shapes; the
    # optimiser, learning rate and progress start afresh (Marian's --pretrained-model, fairseq's
    # --finetune-from-model); a resumed run goes on from its own checkpoint
    init_from: str | None = None
    # subword regularisation (needs model.subwords): each time a pair is put in a batch, both sides are segmented
    # anew by sentencepiece's sampling; p is the probability of dropping each merge for BPE (BPE-dropout, Provilkov
    # et al. 2020) and the smoothing alpha of the sampling for unigram models (Kudo 2018); 0: the fixed pieces
    subword_dropout: float = 0.0

    def __post_init__(self) -> None:
        at_least(self, 1, "batch_size", "bucket_window", "pool_pairs", "max_epochs", "max_updates", "valid_every",
                 "log_every", "patience", "threads")
        at_least(self, 0, "learning_rate", "adadelta_eps", "clip_norm", "lr_decay", "max_minutes", strictly=True)
        at_least(self, 0, "adadelta_rho", strictly=True)
        at_least(self, 0, "batch_tokens", "warmup_updates", "label_smoothing", "keep_checkpoints", "subword_dropout")
        below(self, 1, "adadelta_rho", "label_smoothing", "subword_dropout")
        below(self, 1, "lr_decay", or_equal=True)

    def batch_tokens_on(self, device_type: str) -> int | None:
        """The token budget of a batch on a device of ``device_type`` (``cpu``, ``cuda``), or ``None`` for
        batches of ``batch_size`` pairs."""
        if self.batch_tokens is None:
            return GPU_BATCH_TOKENS if device_type == "cuda" else None
        return self.batch_tokens or None


# a GPU's default batch: about 512 Multi30k pairs, whose validation perplexity after 36 s of training
# `rnnsearch-recipe-words` on an H200 (4.27) beat batch 64's after 45 s (5.18)
GPU_BATCH_TOKENS = 8192


@dataclass(frozen=True)
class TrainConfig:
    """An RNN encoder-decoder or RNNsearch model, trained on a parallel corpus."""

    model: ModelConfig
    data: DataConfig
    training: TrainingConfig = field(default_factory=TrainingConfig)
    output_dir: str = "runs/model"  # the model directory (rerank train --output-dir overrides it)

    def __post_init__(self) -> None:
        if self.training.subword_dropout and self.model.subwords is None:
            raise ValueError("training.subword_dropout samples the segmentation of subword units: it needs "
                             "model.subwords (a word-level model has no segmentation to sample)")


@dataclass(frozen=True)
class CSLMData:
    train: str  # target-language text, one tokenised sentence per line
    valid: str  # target-language text whose perplexity chooses the best weights
    min_count: int = 2  # the shortlist: words seen at least this often in train
    max_words: int | None = None  # and at most this many of them (the most frequent)

    def __post_init__(self) -> None:
        at_least(self, 1, "min_count", "max_words")


@dataclass(frozen=True)
class CSLMTraining:
    optimizer: Literal["adam", "sgd"] = "adam"  # adam or sgd
    learning_rate: float = 0.001  # the optimizer's step size
    momentum: float = 0.0  # SGD only
    batch_size: int = 256  # n-grams per update
    clip_norm: float = 5.0  # gradient norm clipping
    max_epochs: int = 10  # passes over the training text, at most
    max_updates: int | None = None  # updates, at most; none: no limit
    max_minutes: float | None = None  # wall-clock budget
    valid_every: int = 1000  # updates between validations (and checkpoints)
    log_every: int = 100  # updates between progress lines
    patience: int = 4  # validations without improvement before stopping
    keep_weights: Literal["best", "last"] = "best"  # model.pt: the best validation's weights, or the last one's
    lr_decay: float = 0.5  # multiply the learning rate by this after a validation without improvement
    seed: int = 1234  # of the initial weights and the batches' order
    threads: int | None = None  # torch CPU threads; default: torch's (OMP_NUM_THREADS, else the cores)

    def __post_init__(self) -> None:
        at_least(self, 1, "batch_size", "max_epochs", "max_updates", "valid_every", "log_every", "patience",
                 "threads")
        at_least(self, 0, "learning_rate", "clip_norm", "lr_decay", "max_minutes", strictly=True)
        at_least(self, 0, "momentum")
        below(self, 1, "momentum")
        below(self, 1, "lr_decay", or_equal=True)


@dataclass(frozen=True)
class CSLMTrainConfig:
    """A CSLM (a feed-forward n-gram language model, :mod:`rerank.models.cslm`), trained on target-language text
    (``data``) in the loop of every model (:class:`~rerank.training.trainer.TrainingLoop`)."""

    model: CSLMConfig
    data: CSLMData
    training: CSLMTraining = field(default_factory=CSLMTraining)
    output_dir: str = "runs/cslm"  # the model directory (rerank train --output-dir overrides it)


AnyTrainConfig = TrainConfig | CSLMTrainConfig
TRAIN_CONFIGS: tuple[type[AnyTrainConfig], ...] = (TrainConfig, CSLMTrainConfig)


def train_config_type(data: object) -> type[AnyTrainConfig]:
    """The training config class of a config's content: the one whose ``model`` is of the class its ``model``
    section's architecture chooses (:func:`~rerank.models.config.model_config_type`)."""
    model = model_config_type(data.get("model") if isinstance(data, dict) else None)
    return next(kind for kind in TRAIN_CONFIGS if get_type_hints(kind)["model"] is model)


def read_train_config(data: Any, where: str) -> AnyTrainConfig:
    """A training config of either kind from a YAML file's content (``where``: the file, for messages)."""
    data = data if data is not None else {}
    return from_dict(train_config_type(data), data, where)


def load_train_config(path: str | os.PathLike[str]) -> TrainConfig:
    data = load_config_data(path)
    return from_dict(TrainConfig, data if data is not None else {}, str(path))
