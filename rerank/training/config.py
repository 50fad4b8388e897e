"""Training configuration as frozen dataclasses from YAML (torch-free: reading a config costs no torch import)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from rerank.config import at_least, below, from_dict, load_config_data
from rerank.models.config import ModelConfig


@dataclass(frozen=True)
class TextPair:
    source: str
    target: str


@dataclass(frozen=True)
class DataConfig:
    """Training data: a parallel corpus (``train``), the phrase pairs of a Moses table (``phrase_table``), or data
    made once by ``rerank prepare`` (``prepared``: its vocabularies and length limit are those it was prepared
    with). Text is prepared into the model directory's ``data/`` before training."""

    valid: TextPair
    train: TextPair | None = None
    phrase_table: str | None = None
    prepared: str | None = None  # a directory written by `rerank prepare`
    src_vocab_size: int = 15000  # frequency shortlists (Cho et al.; Bahdanau et al. use 30,000)
    trg_vocab_size: int = 15000
    max_length: int = 50  # longer training pairs are skipped (RNNsearch-50); scoring takes any length

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.train, self.phrase_table, self.prepared)) != 1:
            raise ValueError("give exactly one of 'train' (source and target files), 'phrase_table' or 'prepared'")
        at_least(self, 1, "src_vocab_size", "trg_vocab_size", "max_length")


@dataclass(frozen=True)
class TrainingConfig:
    optimizer: Literal["adadelta", "adam"] = "adadelta"
    learning_rate: float = 1.0  # Adadelta's scale (1.0, as the papers); for Adam, 1e-3 say
    adadelta_rho: float = 0.95
    adadelta_eps: float = 1e-6
    batch_size: int = 80  # sentence pairs per update (under torchrun: over all processes together)
    bucket_window: int = 20  # sort by length within this many batches
    pool_pairs: int = 250_000  # pairs shuffled together (blocks of batch_size x bucket_window pairs drawn at random)
    clip_norm: float = 1.0  # gradient norm clipping (Bahdanau et al.: 1)
    max_epochs: int = 10
    max_updates: int | None = None
    max_minutes: float | None = None  # wall-clock budget
    valid_every: int = 1000  # updates between validations (and checkpoints)
    log_every: int = 100
    patience: int = 10  # validations without improvement before stopping
    lr_decay: float = 1.0  # multiply the learning rate by this after a validation without improvement
    warmup_updates: int = 0  # the learning rate rises linearly over this many first updates
    label_smoothing: float = 0.0  # ε: the loss is (1 − ε) NLL + ε · mean over the vocabulary of −ln p
    keep_checkpoints: int = 0  # weights kept at the last N validations and the best N, for `rerank average`
    seed: int = 1234
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: the forward pass under torch.autocast (for a GPU)
    threads: int | None = None  # torch CPU threads; default: torch's (OMP_NUM_THREADS, else the cores)
    # subword regularisation (needs model.subwords): each time a pair is put in a batch, both sides are segmented
    # anew by sentencepiece's sampling; p is the probability of dropping each merge for BPE (BPE-dropout, Provilkov
    # et al. 2020) and the smoothing alpha of the sampling for unigram models (Kudo 2018); 0: the fixed pieces
    subword_dropout: float = 0.0

    def __post_init__(self) -> None:
        at_least(self, 1, "batch_size", "bucket_window", "pool_pairs", "max_epochs", "max_updates", "valid_every",
                 "log_every", "patience", "threads")
        at_least(self, 0, "learning_rate", "adadelta_eps", "clip_norm", "lr_decay", "max_minutes", strictly=True)
        at_least(self, 0, "adadelta_rho", strictly=True)
        at_least(self, 0, "warmup_updates", "label_smoothing", "keep_checkpoints", "subword_dropout")
        below(self, 1, "adadelta_rho", "label_smoothing", "subword_dropout")
        below(self, 1, "lr_decay", or_equal=True)


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig
    data: DataConfig
    training: TrainingConfig = field(default_factory=TrainingConfig)
    output_dir: str = "runs/model"

    def __post_init__(self) -> None:
        if self.training.subword_dropout and self.model.subwords is None:
            raise ValueError("training.subword_dropout samples the segmentation of subword units: it needs "
                             "model.subwords (a word-level model has no segmentation to sample)")


def load_train_config(path: str | os.PathLike[str]) -> TrainConfig:
    data = load_config_data(path)
    return from_dict(TrainConfig, data if data is not None else {}, str(path))
