"""Training a CSLM (:mod:`rerank.models.cslm`) on the target side of the training data: shuffled batches of
the n-grams whose predicted word is in the shortlist, Adam or SGD, the network's perplexity on the
validation text's shortlist n-grams, early stopping, and checkpoints that resume exactly (weights,
optimiser, progress with the position in the epoch, the random state; each epoch's order is drawn from
the seed and the epoch's number).

The model directory gets config.yaml, vocab.txt (the shortlist: every word seen ``min_count`` times,
the ``max_words`` most frequent at most), model.pt (the best weights) and checkpoint.pt.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from rerank.config import at_least, below, load_yaml, to_dict
from rerank.errors import ConfigError, RerankError
from rerank.formats.files import make_output_dir, read_lines
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, load_model_weights, load_state, save_config, save_state
from rerank.models.config import CONFIG
from rerank.models.cslm import VOCAB, CSLMConfig, CSLMNet, ngrams
from rerank.models.device import torch_threads
from rerank.models.vocab import UNK_ID, Vocabulary
from rerank.training.trainer import Progress, _duration

logger = logging.getLogger(__name__)


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
    model: CSLMConfig
    data: CSLMData
    training: CSLMTraining = field(default_factory=CSLMTraining)
    output_dir: str = "runs/cslm"  # the model directory (rerank train --output-dir overrides it)


def read_sentences(path: str) -> list[list[str]]:
    return [line.split() for _, line in read_lines(path)]


def shortlist_ngrams(sentences: list[list[str]], vocab: Vocabulary, order: int) -> np.ndarray:
    """Every (context, word) row of ``sentences`` whose word (or ``</s>``) is in the shortlist."""
    if not sentences:
        return np.empty((0, order), dtype=np.int64)
    rows = np.concatenate([ngrams(vocab.encode(s), order) for s in sentences])
    return np.ascontiguousarray(rows[rows[:, -1] != UNK_ID])


class CSLMTrainer:
    """Trains the CSLM of ``config`` into ``config.output_dir``, resuming if a checkpoint is there."""

    def __init__(self, config: CSLMTrainConfig, device: str | torch.device = "cpu"):
        self.config = config
        self.device = torch.device(device)
        self.out = Path(config.output_dir)
        self._prepare_output()
        self._load_data()
        torch.manual_seed(config.training.seed)
        self.net = CSLMNet(config.model, len(self.vocab)).to(self.device)
        t = config.training
        self.optimizer: torch.optim.Optimizer = (
            torch.optim.Adam(self.net.parameters(), lr=t.learning_rate) if t.optimizer == "adam" else
            torch.optim.SGD(self.net.parameters(), lr=t.learning_rate, momentum=t.momentum))
        self.progress = Progress(learning_rate=t.learning_rate)
        if (self.out / CHECKPOINT).exists():
            self._resume()
        logger.info("CSLM: %d parameters, %d-gram, shortlist of %d tokens; %d training n-grams, %d validation",
                    sum(p.numel() for p in self.net.parameters()), config.model.order, len(self.vocab),
                    len(self.train_rows), len(self.valid_rows))

    def _prepare_output(self) -> None:
        make_output_dir(self.out, "output_dir")
        path, current = self.out / CONFIG, to_dict(self.config)
        if path.exists() and (self.out / CHECKPOINT).exists():
            saved = load_yaml(path) or {}
            for section in ("model", "data"):
                if saved.get(section) != current[section]:
                    raise RerankError(f"{self.out} holds a run with another '{section}' config ({path}); "
                                      "choose a new output_dir or delete it")
        save_config(self.config, path)

    def _load_data(self) -> None:
        data, order = self.config.data, self.config.model.order
        train = read_sentences(data.train)
        if (self.out / CHECKPOINT).exists():
            self.vocab = Vocabulary.load(self.out / VOCAB)
        else:
            self.vocab = Vocabulary.build(train, data.max_words or 1 << 62, data.min_count)
            self.vocab.save(self.out / VOCAB)
        self.train_rows = shortlist_ngrams(train, self.vocab, order)
        self.valid_rows = shortlist_ngrams(read_sentences(data.valid), self.vocab, order)
        if not len(self.train_rows) or not len(self.valid_rows):
            raise ConfigError(f"no n-grams to {'train on' if not len(self.train_rows) else 'validate on'} "
                              f"({data.train if not len(self.train_rows) else data.valid})")

    def _resume(self) -> None:
        path = self.out / CHECKPOINT
        state = load_state(path)
        load_model_weights(self.net, state.get("model"), path)  # type: ignore[arg-type]
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self.progress = Progress(**state["progress"])
            torch.set_rng_state(state["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise RerankError(f"{path}: refused: not a training checkpoint of this run ({e})") from None
        logger.info("resuming %s at update %d (epoch %d, batch %d)", self.out, self.progress.updates,
                    self.progress.epoch + 1, self.progress.batch)

    def train(self) -> Progress:
        """Train until max_epochs, max_updates, max_minutes or early stopping, with ``training.threads``."""
        with torch_threads(self.config.training.threads):
            return self._train()

    def _train(self) -> Progress:
        t, p = self.config.training, self.progress
        p.finished = self._stop_reason()
        if p.finished:
            logger.info("%s: nothing to do, training %s", self.out, p.finished)
            return p
        batches = math.ceil(len(self.train_rows) / t.batch_size)
        started = time.monotonic() - p.seconds
        window_start, window_loss, window_count = time.monotonic(), 0.0, 0
        order, order_epoch = np.empty(0, dtype=np.int64), -1
        self.net.train()
        while not p.finished:
            if order_epoch != p.epoch:
                order = np.random.default_rng([t.seed, p.epoch]).permutation(len(self.train_rows))
                order_epoch = p.epoch
            rows = self.train_rows[order[p.batch * t.batch_size:(p.batch + 1) * t.batch_size]]
            window_loss += self._update(rows)
            window_count += len(rows)
            p.updates += 1
            p.batch += 1
            if p.batch == batches:
                p.epoch, p.batch = p.epoch + 1, 0
            p.seconds = time.monotonic() - started
            if p.updates % t.log_every == 0:
                elapsed = time.monotonic() - window_start
                logger.info("epoch %d update %d: loss %.3f/n-gram, %.2f updates/s, %.0f n-grams/s, lr %.3g",
                            p.epoch + 1, p.updates, window_loss / window_count, t.log_every / elapsed,
                            window_count / elapsed, p.learning_rate)
                window_start, window_loss, window_count = time.monotonic(), 0.0, 0
            p.finished = self._stop_reason()
            if p.finished or p.updates % t.valid_every == 0:
                self._validate()
                p.finished = self._stop_reason()
        logger.info("%s: %s after %d updates (%s); best validation perplexity %.2f (shortlist n-grams)",
                    self.out, p.finished, p.updates, _duration(p.seconds), p.best_ppl)
        return p

    def _update(self, rows: np.ndarray) -> float:
        batch = torch.from_numpy(rows).to(self.device)
        nll = self.net.nll(batch[:, :-1], batch[:, -1])
        self.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(nll / len(rows))
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.config.training.clip_norm)
        self.optimizer.step()
        return float(nll.item())

    def _stop_reason(self) -> str:
        t, p = self.config.training, self.progress
        if p.bad_validations >= t.patience:
            return f"stopped early: no improvement in {t.patience} validations"
        if t.max_updates is not None and p.updates >= t.max_updates:
            return f"reached max_updates {t.max_updates}"
        if t.max_minutes is not None and p.seconds >= 60 * t.max_minutes:
            return f"reached max_minutes {t.max_minutes:g}"
        if p.epoch >= t.max_epochs:
            return f"reached max_epochs {t.max_epochs}"
        return ""

    def _validate(self) -> None:
        p, t = self.progress, self.config.training
        ppl = network_perplexity(self.net, self.valid_rows)
        self.net.train()
        improved = ppl < p.best_ppl
        p.history.append({"updates": float(p.updates), "valid_ppl": ppl, "seconds": p.seconds})
        if improved:
            p.best_ppl, p.bad_validations = ppl, 0
            save_state({"model": self.net.state_dict()}, self.out / WEIGHTS)
        else:
            p.bad_validations += 1
            p.learning_rate *= t.lr_decay
            for group in self.optimizer.param_groups:
                group["lr"] = p.learning_rate
        logger.info("validation at update %d: perplexity %.2f on shortlist n-grams%s", p.updates, ppl,
                    " (best so far, saved)" if improved else f" (best {p.best_ppl:.2f})")
        save_state({"model": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "progress": vars(p), "rng": torch.get_rng_state()}, self.out / CHECKPOINT)


def network_perplexity(net: CSLMNet, rows: np.ndarray, batch_size: int = 4096) -> float:
    """exp(−mean ln P_NN) of the network over (context, word) rows, the words in its shortlist."""
    net.eval()
    device = net.excluded.device
    nll = 0.0
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = torch.from_numpy(rows[start:start + batch_size]).to(device)
            nll += float(net.nll(batch[:, :-1], batch[:, -1]))
    return math.exp(nll / len(rows))


def train_cslm(config: CSLMTrainConfig, device: str | torch.device = "cpu") -> Progress:
    return CSLMTrainer(config, device).train()
