"""Training both architectures: maximum likelihood, length-bucketed batches, clipping, validation
perplexity, early stopping, and checkpoints that resume exactly where a run stopped; in one process,
or in several under torchrun (see :mod:`rerank.training.distributed`)."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from rerank.config import load_yaml, save_config, to_dict
from rerank.errors import ConfigError, RerankError
from rerank.models.architectures import build_model
from rerank.models.batching import sorted_batches, to_ids
from rerank.models.checkpoint import (
    CHECKPOINT,
    SRC_VOCAB,
    TRG_VOCAB,
    WEIGHTS,
    load_model_weights,
    load_state,
    save_state,
)
from rerank.models.config import CONFIG
from rerank.models.device import torch_threads
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import Vocabulary
from rerank.training.config import TrainConfig
from rerank.training.data import bucketed_order, make_batch, read_parallel, read_phrase_pairs
from rerank.training.distributed import World, data_parallel

logger = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where a run stands; saved in every checkpoint."""

    epoch: int = 0
    batch: int = 0  # next batch of this epoch
    updates: int = 0
    best_ppl: float = math.inf
    bad_validations: int = 0
    learning_rate: float = 0.0
    seconds: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)
    finished: str = ""


class Trainer:
    """Trains the model of a :class:`TrainConfig` into ``config.output_dir``, resuming if a checkpoint is there;
    ``world``: this process's place under torchrun (the process group must be set up); ``device``: where the
    model and its batches go."""

    def __init__(self, config: TrainConfig, world: World | None = None, device: str | torch.device = "cpu"):
        self.config = config
        self.device = torch.device(device)
        self.world = world or World()
        self.out = Path(config.output_dir)
        if self.world.is_main:
            self._prepare_output()
        self.world.barrier()  # the others read what process 0 wrote
        self._load_data()
        torch.manual_seed(config.training.seed)
        self.model = build_model(config.model, len(self.src_vocab), len(self.trg_vocab)).to(self.device)
        self.optimizer = self._make_optimizer()
        self.progress = Progress(learning_rate=config.training.learning_rate)
        if (self.out / CHECKPOINT).exists():
            self._resume()
        elif self.world.distributed:  # the same weights everywhere, dropout masks of each process's own
            torch.manual_seed(dropout_seed(config.training.seed, self.world.rank))
        self.parallel_model = data_parallel(self.model, self.world)

    def _prepare_output(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        config_path = self.out / CONFIG
        current = to_dict(self.config)
        if config_path.exists() and (self.out / CHECKPOINT).exists():  # a run made progress: it must match
            saved = load_yaml(config_path) or {}
            for section in ("model", "data"):
                if saved.get(section) != current[section]:
                    raise RerankError(f"{self.out} holds a run with another '{section}' config ({config_path}); "
                                      "choose a new output_dir or delete it")
            if saved != current:
                logger.info("%s: training settings changed since the last run; using the new ones", self.out)
        save_config(self.config, config_path)

    def _load_data(self) -> None:
        data = self.config.data
        if data.phrase_table is not None:
            corpus = read_phrase_pairs(data.phrase_table)
        else:
            assert data.train is not None  # DataConfig has one or the other
            corpus = read_parallel(data.train.source, data.train.target)
        kept = corpus.filter_length(data.max_length)
        reverse = self.config.model.reverse_target
        if reverse:
            kept = kept.reverse_targets()
        logger.info("training pairs: %d (%d longer than %d words skipped)", len(kept), len(corpus) - len(kept),
                    data.max_length)
        if not len(kept):
            raise ConfigError("no training pairs left after the length filter")
        if (self.out / CHECKPOINT).exists():  # resuming: the run's own vocabularies
            self.src_vocab = Vocabulary.load(self.out / SRC_VOCAB)
            self.trg_vocab = Vocabulary.load(self.out / TRG_VOCAB)
        else:
            self.src_vocab = Vocabulary.build(kept.sources, data.src_vocab_size)
            self.trg_vocab = Vocabulary.build(kept.targets, data.trg_vocab_size)
            if self.world.is_main:
                self.src_vocab.save(self.out / SRC_VOCAB)
                self.trg_vocab.save(self.out / TRG_VOCAB)
        logger.info("vocabularies: %d source, %d target (with 4 special tokens)", len(self.src_vocab),
                    len(self.trg_vocab))
        self.train_src = to_ids(kept.sources, self.src_vocab)
        self.train_trg = to_ids(kept.targets, self.trg_vocab)
        self.train_lengths = np.array([len(s) + len(t) / 1000 for s, t in zip(self.train_src, self.train_trg,
                                                                                  strict=True)])
        valid = read_parallel(data.valid.source, data.valid.target)
        if reverse:
            valid = valid.reverse_targets()
        self.valid_src = to_ids(valid.sources, self.src_vocab)
        self.valid_trg = to_ids(valid.targets, self.trg_vocab)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        t = self.config.training
        if t.optimizer == "adadelta":
            return torch.optim.Adadelta(self.model.parameters(), lr=t.learning_rate, rho=t.adadelta_rho,
                                        eps=t.adadelta_eps)
        return torch.optim.Adam(self.model.parameters(), lr=t.learning_rate, fused=True)

    def _resume(self) -> None:
        path = self.out / CHECKPOINT
        state = load_state(path)
        load_model_weights(self.model, state.get("model"), path)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self.progress = Progress(**state["progress"])
            states = state.get("rng_ranks", [state["rng"]])
            if len(states) == self.world.size:
                torch.set_rng_state(states[self.world.rank])
            else:  # another number of processes: the run goes on, with dropout masks of its own from here
                torch.manual_seed(dropout_seed(self.config.training.seed, self.world.rank, self.progress.updates))
                if self.world.is_main:
                    logger.warning("%s was written by %d training processes, resumed by %d: the dropout masks "
                                   "differ from here on from those of the run that stopped", path, len(states),
                                   self.world.size)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise RerankError(f"{path}: refused: not a training checkpoint of this run ({e})") from None
        logger.info("resuming %s at update %d (epoch %d, batch %d)", self.out, self.progress.updates,
                    self.progress.epoch + 1, self.progress.batch)

    def _save_checkpoint(self) -> None:
        """Process 0 writes the checkpoint, with every process's random state (gathered from all)."""
        states = self.world.rng_states()
        if not self.world.is_main:
            return
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "progress": vars(self.progress), "rng": states[0]}
        if self.world.distributed:
            state["rng_ranks"] = states
        save_state(state, self.out / CHECKPOINT)

    def train(self) -> Progress:
        """Train until a limit is met (see :meth:`_stop_reason`), with ``training.threads`` CPU threads."""
        with torch_threads(self.config.training.threads):
            return self._train()

    def _train(self) -> Progress:
        """Run until max_epochs, max_updates, max_minutes or early stopping; returns the final progress.

        A run that already met its limits does nothing: raise a limit to train further.
        """
        t, p = self.config.training, self.progress
        p.finished = self._stop_reason()
        if p.finished:
            logger.info("%s: nothing to do, training %s", self.out, p.finished)
            return p
        started = time.monotonic() - p.seconds
        window_start, window_tokens, window_loss, window_updates = time.monotonic(), 0, 0.0, 0
        total_updates = self._planned_updates()
        batches, batches_epoch = [], -1
        self.model.train()
        while not p.finished:
            if batches_epoch != p.epoch:
                batches = bucketed_order(self.train_lengths, t.batch_size, t.bucket_window,
                                         np.random.default_rng([t.seed, p.epoch]))
                batches_epoch = p.epoch
            loss_sum, tokens = self._update(batches[p.batch])
            p.updates += 1
            p.batch += 1
            if p.batch == len(batches):
                p.epoch, p.batch = p.epoch + 1, 0
            # the whole batch's loss and tokens, and process 0's clock: every process stops at the same update
            totals, p.seconds = self.world.sum_and_main([loss_sum, tokens], time.monotonic() - started)
            loss_sum, tokens = totals[0], round(totals[1])
            window_tokens += tokens
            window_loss += loss_sum
            window_updates += 1
            if p.updates % t.log_every == 0:
                elapsed = time.monotonic() - window_start
                rate = window_updates / elapsed
                eta = (total_updates - p.updates) / rate if total_updates else float("nan")
                logger.info("epoch %d update %d: loss %.3f/token, %.2f updates/s, %.0f target tokens/s, "
                            "lr %.3g, ETA %s", p.epoch + 1, p.updates, window_loss / window_tokens, rate,
                            window_tokens / elapsed, p.learning_rate, _duration(eta))
                window_start, window_tokens, window_loss, window_updates = time.monotonic(), 0, 0.0, 0
            p.finished = self._stop_reason()
            if p.finished or p.updates % t.valid_every == 0:
                self._validate()
                p.finished = self._stop_reason()
        logger.info("%s: %s after %d updates (%s); best validation perplexity %.2f", self.out, p.finished,
                    p.updates, _duration(p.seconds), p.best_ppl)
        return p

    def _stop_reason(self) -> str:
        """Why training must stop now, or ``""``."""
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

    def _planned_updates(self) -> int:
        t = self.config.training
        per_epoch = math.ceil(len(self.train_src) / t.batch_size)
        total = per_epoch * t.max_epochs
        return min(t.max_updates, total) if t.max_updates is not None else total

    def _update(self, indices: np.ndarray) -> tuple[float, int]:
        """One optimiser step on a batch; returns its summed negative log-likelihood and target tokens."""
        part, weight = self.world.share(indices)  # all of it in one process
        batch = make_batch([self.train_src[i] for i in part], [self.train_trg[i] for i in part]).to(self.device)
        nll = self.parallel_model(batch.src, batch.src_len, batch.trg)  # −Σ ln p of the targets
        self.optimizer.zero_grad(set_to_none=True)
        # mean sentence log-likelihood of the whole batch (Cho et al. 2014, Eq. 4); under torchrun the
        # gradients are averaged over the processes, hence the weight (the number of processes)
        torch.autograd.backward(nll * weight / len(indices))
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.training.clip_norm)
        self.optimizer.step()
        return (nll.item(), batch.target_tokens) if weight else (0.0, 0)

    def _validate(self) -> None:
        """Process 0 validates and tells the others the perplexity; every process keeps the same progress."""
        p, t = self.progress, self.config.training
        ppl = math.nan
        if self.world.is_main:
            ppl = validation_perplexity(self.model, self.valid_src, self.valid_trg)
            self.model.train()
        ppl = self.world.from_main(ppl)
        improved = ppl < p.best_ppl
        p.history.append({"updates": float(p.updates), "valid_ppl": ppl, "seconds": p.seconds})
        if improved:
            p.best_ppl, p.bad_validations = ppl, 0
            if self.world.is_main:
                save_state({"model": self.model.state_dict()}, self.out / WEIGHTS)
        else:
            p.bad_validations += 1
            if t.lr_decay != 1.0:
                p.learning_rate *= t.lr_decay
                for group in self.optimizer.param_groups:
                    group["lr"] = p.learning_rate
        logger.info("validation at update %d: perplexity %.2f%s", p.updates, ppl,
                    " (best so far, saved)" if improved else f" (best {p.best_ppl:.2f})")
        self._save_checkpoint()


def dropout_seed(seed: int, rank: int, updates: int = 0) -> int:
    """The seed of a training process's own random stream (dropout masks) under torchrun."""
    return int(np.random.SeedSequence([seed, rank, updates]).generate_state(1)[0])


def validation_perplexity(model: Seq2Seq, src_ids: list[list[int]], trg_ids: list[list[int]],
                          batch_size: int = 64) -> float:
    """exp(−mean ln p per target token, ``</s>`` included) under forced decoding."""
    model.eval()
    nll, tokens = 0.0, 0
    device = next(model.parameters()).device
    with torch.inference_mode():
        for indices in sorted_batches([len(s) for s in src_ids], batch_size):
            batch = make_batch([src_ids[i] for i in indices], [trg_ids[i] for i in indices]).to(device)
            nll -= float(model.score(model.encode(batch.src, batch.src_len), batch.trg).sum())
            tokens += batch.target_tokens
    return math.exp(nll / tokens)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
