"""The training loop of every model (:class:`TrainingLoop`: the stop rule, validation with early stopping and
learning-rate decay, checkpoints that resume exactly where a run stopped, the resume rule, a checkpoint saved on
SIGINT or SIGTERM) and the loop's parts for both translation architectures (:class:`Trainer`: maximum likelihood,
length-bucketed batches, clipping, validation perplexity; in one process, or in several under torchrun, see
:mod:`rerank.training.distributed`). The CSLM's parts are in :mod:`rerank.training.cslm`."""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, Generic, TypeVar, cast, get_type_hints

import numpy as np
import torch

from rerank.config import from_dict, load_yaml, to_dict
from rerank.errors import RerankError
from rerank.formats.files import atomic_binary_output, make_output_dir
from rerank.formats.shards import file_digest
from rerank.models.architectures import build_model
from rerank.models.averaging import checkpoint_path, checkpoint_updates, select_checkpoints
from rerank.models.batching import sorted_batches, to_ids
from rerank.models.checkpoint import (
    CHECKPOINT,
    SRC_VOCAB,
    TRG_VOCAB,
    WEIGHTS,
    load_model_weights,
    load_state,
    load_vocabularies,
    save_config,
    save_state,
)
from rerank.models.config import CONFIG, SubwordConfig, read_model_config
from rerank.models.device import torch_threads
from rerank.models.seq2seq import Seq2Seq
from rerank.models.subwords import SubwordVocabulary
from rerank.training.config import AnyTrainConfig, TrainConfig
from rerank.training.data import Batch, make_batch, read_parallel
from rerank.training.distributed import World, data_parallel
from rerank.training.prepare import MANIFEST, PREPARED_DIR, SIDES, SUBWORD_FILES, prepared_data, same_vocabularies
from rerank.training.prepared import EpochPlan, PreparedCorpus, check_prepared_settings
from rerank.training.subword_sampling import SubwordSampler

logger = logging.getLogger(__name__)

Step = Callable[[int, int], tuple[float, int]]  # (epoch, batch) -> the update's summed loss and what it counted
_Config = TypeVar("_Config", bound=AnyTrainConfig)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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


class TrainingInterrupted(KeyboardInterrupt):
    """A run stopped by ``signum`` (SIGINT or SIGTERM) after its checkpoint at ``updates`` was saved in
    ``directory``; a caller that does not know it sees an interruption."""

    def __init__(self, signum: int, updates: int, directory: Path):
        super().__init__(f"{signal.Signals(signum).name} at update {updates}")
        self.signum, self.updates, self.directory = signum, updates, directory


class StopSignals:
    """SIGINT and SIGTERM noted while the loop runs (in the main thread; elsewhere none is caught): the loop
    stops at the end of its update. A second signal acts as it would have without the loop."""

    def __init__(self) -> None:
        self.received = 0
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self._note) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        self._restore()

    def _restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}


class TrainingLoop(Generic[_Config]):
    """The loop of every model: updates until a limit is met (:meth:`_stop_reason`), validation every
    ``valid_every`` updates (the best weights kept, the learning rate decayed after a validation without
    improvement, a checkpoint written), and an exact resume from the checkpoint in ``config.output_dir``.
    A model's trainer gives the parts: :attr:`model`, :attr:`optimizer`, :meth:`_batches` (its updates),
    :meth:`_epoch_batches` and :meth:`_perplexity`."""

    LOSS_PER: ClassVar[str] = "token"  # in the log: what the loss is a mean over, and what an update counts
    COUNTED: ClassVar[str] = "target tokens"
    PERPLEXITY_OF: ClassVar[str] = ""  # what the validation perplexity is measured on, if not said otherwise

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def __init__(self, config: _Config, world: World | None, device: str | torch.device):
        self.config = config
        self.device = torch.device(device)
        self.world = world or World()
        self.out = Path(config.output_dir)

    # -- the model's parts

    def _batches(self) -> contextlib.AbstractContextManager[Step]:
        """The update of each (epoch, batch), while the loop runs."""
        raise NotImplementedError

    def _epoch_batches(self, epoch: int) -> int:
        raise NotImplementedError

    def _perplexity(self) -> float:
        """The validation perplexity (process 0 alone measures it)."""
        raise NotImplementedError

    def _after_validation(self) -> None:
        """What a model's trainer does after each validation, before the checkpoint is written."""

    # -- the loop

    def _prepare_output(self) -> None:
        """The resume rule: a directory whose run made progress must hold the same ``model`` and ``data`` (each
        saved section read with today's defaults, so that one written before a key was added compares equal)."""
        make_output_dir(self.out, "output_dir")
        config_path = self.out / CONFIG
        current = to_dict(self.config)
        if config_path.exists() and (self.out / CHECKPOINT).exists():  # a run made progress: it must match
            saved = load_yaml(config_path) or {}
            kinds = get_type_hints(type(self.config))
            for section in ("model", "data"):
                if _as_set(saved.get(section), kinds[section]) != _set_keys(current[section]):
                    raise RerankError(f"{self.out} holds a run with another '{section}' config ({config_path}); "
                                      "choose a new output_dir or delete it")
            if saved != current:
                logger.info("%s: training settings changed since the last run; using the new ones", self.out)
        save_config(self.config, config_path)

    def _start_or_resume(self) -> None:
        """A new run's progress, or the stopped run's from its checkpoint."""
        self.progress = Progress(learning_rate=self.config.training.learning_rate)
        if (self.out / CHECKPOINT).exists():
            self._resume()
        elif self.world.distributed:  # the same weights everywhere, dropout masks of each process's own
            torch.manual_seed(dropout_seed(self.config.training.seed, self.world.rank))

    def _resume(self) -> None:
        path = self.out / CHECKPOINT
        state = load_state(path)
        load_model_weights(cast(Any, self.model), state.get("model"), path)
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
        if self.world.is_main:  # weights kept after the checkpoint by the run that stopped are not this run's
            for updates in checkpoint_updates(self.out):
                if updates > self.progress.updates:
                    checkpoint_path(self.out, updates).unlink()

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
        """Train until a limit is met (see :meth:`_stop_reason`), with ``training.threads`` CPU threads; on
        SIGINT or SIGTERM, save a checkpoint at the end of the update and raise :class:`TrainingInterrupted`."""
        with torch_threads(self.config.training.threads), StopSignals() as signals:
            return self._train(signals)

    def _train(self, signals: StopSignals) -> Progress:
        """Run until max_epochs, max_updates, max_minutes or early stopping; returns the final progress.

        A run that already met its limits does nothing: raise a limit to train further.
        """
        t, p = self.config.training, self.progress
        p.finished = self._stop_reason()
        if p.finished:
            logger.info("%s: nothing to do, training %s", self.out, p.finished)
            return p
        started = time.monotonic() - p.seconds
        window_start, window_count, window_loss, window_updates = time.monotonic(), 0, 0.0, 0
        total_updates = self._planned_updates()
        with self._batches() as step:
            self.model.train()
            while not p.finished:
                loss_sum, count = step(p.epoch, p.batch)
                p.updates += 1
                p.batch += 1
                if p.batch == self._epoch_batches(p.epoch):
                    p.epoch, p.batch = p.epoch + 1, 0
                # the whole batch's loss and count, process 0's clock, and whether a process was told to stop: every
                # process stops at the same update
                totals, p.seconds = self.world.sum_and_main([loss_sum, count, signals.received],
                                                            time.monotonic() - started)
                loss_sum, count, stop = totals[0], round(totals[1]), totals[2]
                window_count += count
                window_loss += loss_sum
                window_updates += 1
                if p.updates % t.log_every == 0:
                    elapsed = time.monotonic() - window_start
                    rate = window_updates / elapsed
                    eta = (total_updates - p.updates) / rate if total_updates else float("nan")
                    logger.info("epoch %d update %d: loss %.3f/%s, %.2f updates/s, %.0f %s/s, lr %.3g, ETA %s",
                                p.epoch + 1, p.updates, window_loss / window_count, self.LOSS_PER, rate,
                                window_count / elapsed, self.COUNTED, self.optimizer.param_groups[0]["lr"],
                                _duration(eta))
                    window_start, window_count, window_loss, window_updates = time.monotonic(), 0, 0.0, 0
                p.finished = self._stop_reason()
                if p.finished or p.updates % t.valid_every == 0:
                    self._validate()
                    p.finished = self._stop_reason()
                if stop and not p.finished:
                    self._save_checkpoint()
                    raise TrainingInterrupted(signals.received or signal.SIGTERM, p.updates, self.out)
        logger.info("%s: %s after %d updates (%s); best validation perplexity %.2f%s", self.out, p.finished,
                    p.updates, _duration(p.seconds), p.best_ppl, self.PERPLEXITY_OF)
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
        total = self._epoch_batches(0) * t.max_epochs
        return min(t.max_updates, total) if t.max_updates is not None else total

    def _validate(self) -> None:
        """Process 0 validates and tells the others the perplexity; every process keeps the same progress."""
        p, t = self.progress, self.config.training
        ppl = math.nan
        if self.world.is_main:
            ppl = self._perplexity()
            self.model.train()
        ppl = self.world.from_main(ppl)
        improved = ppl < p.best_ppl
        p.history.append({"updates": float(p.updates), "valid_ppl": ppl, "seconds": p.seconds})
        if improved:
            p.best_ppl, p.bad_validations = ppl, 0
        else:
            p.bad_validations += 1
            if t.lr_decay != 1.0:
                p.learning_rate *= t.lr_decay
                self._set_learning_rate(p.learning_rate)
        saved = improved or t.keep_weights == "last"
        if saved and self.world.is_main:
            save_state({"model": self.model.state_dict()}, self.out / WEIGHTS)
        self._after_validation()
        best = " (best so far" if improved else f" (best {p.best_ppl:.2f}"
        logger.info("validation at update %d: perplexity %.2f%s%s%s)", p.updates, ppl, self.PERPLEXITY_OF, best,
                    ", saved" if saved else "")
        self._save_checkpoint()

    def _set_learning_rate(self, rate: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = rate


class Trainer(TrainingLoop[TrainConfig]):
    """Trains the model of a :class:`TrainConfig` into ``config.output_dir``, resuming if a checkpoint is there;
    ``world``: this process's place under torchrun (the process group must be set up); ``device``: where the
    model and its batches go."""

    model: Seq2Seq

    def __init__(self, config: TrainConfig, world: World | None = None, device: str | torch.device = "cpu"):
        super().__init__(config, world, device)
        self.data_dir, prepared_now = Path(), False
        self._plan: EpochPlan | None = None
        init = config.training.init_from
        initial = self._initial_weights(Path(init)) if init is not None and not (self.out / CHECKPOINT).exists() \
            else None  # checked before the data are prepared
        waiting = self.world.long_wait_group()
        if self.world.is_main:
            self._prepare_output()
            self.data_dir, prepared_now = prepared_data(config.data, config.model.subwords, self.out, init)
        self.world.barrier(waiting)  # the others read what process 0 wrote
        self._load_data(verify=self.world.is_main and not prepared_now)
        torch.manual_seed(config.training.seed)
        self.model = build_model(config.model, len(self.src_vocab), len(self.trg_vocab)).to(self.device)
        self.optimizer = self._make_optimizer()
        self._start_or_resume()
        if initial is not None:
            self.model.load_state_dict(initial)
            logger.info("starting from the weights of %s", Path(cast(str, init)) / WEIGHTS)
        self.parallel_model = data_parallel(self.model, self.world)

    def _initial_weights(self, model: Path) -> dict[str, torch.Tensor]:
        """The weights of the model in directory ``model`` (training.init_from) that this run starts from, checked
        to fit the config's model with the model's vocabularies."""
        try:
            init_config = read_model_config(model)
            if init_config.subwords != self.config.model.subwords:
                raise RerankError(f"{model / CONFIG}: refused: its model.subwords ({init_config.subwords}) are not "
                                  f"the config's ({self.config.model.subwords}); its ids are the run's")
            src_vocab, trg_vocab = load_vocabularies(model, init_config)
            fitted = build_model(self.config.model, len(src_vocab), len(trg_vocab))
            load_model_weights(fitted, load_state(model / WEIGHTS).get("model"), model / WEIGHTS,
                               "the model section of the config, the run's")
        except RerankError as e:
            raise RerankError(f"training.init_from: {e}") from None
        return fitted.state_dict()

    def _load_data(self, verify: bool) -> None:
        """The prepared training data (read by position; with ``verify``, its files checked against their
        checksums), its vocabularies (a resumed run's must be the model's own), and the validation pairs."""
        data = self.config.data
        if not self.world.is_main:
            self.data_dir = Path(data.prepared) if data.prepared is not None else self.out / PREPARED_DIR
        self.corpus = PreparedCorpus(self.data_dir, verify=verify)
        manifest = self.corpus.manifest
        check_prepared_settings(manifest, data, self.data_dir)
        init = self.config.training.init_from
        if init is not None and not (self.out / CHECKPOINT).exists() and not same_vocabularies(manifest, Path(init)):
            raise RerankError(f"{self.data_dir / MANIFEST}: refused: its vocabularies are not those of {init} "
                              f"(training.init_from), whose weights start the run; prepare the data with them "
                              f"(rerank prepare --vocabularies {init})")
        logger.info("training pairs: %d (%d longer than %d words skipped)", len(self.corpus),
                    manifest["skipped_longer"], manifest["settings"]["max_length"])
        self.src_vocab, self.trg_vocab = self.corpus.src_vocab, self.corpus.trg_vocab
        subwords = self.config.model.subwords
        prepared_subwords = manifest["settings"].get("subwords")
        if isinstance(prepared_subwords, dict):  # read with today's defaults: keys added later take theirs
            with contextlib.suppress(ValueError, RerankError):
                prepared_subwords = asdict(from_dict(SubwordConfig, prepared_subwords))
        if prepared_subwords != (None if subwords is None else asdict(subwords)):
            raise RerankError(f"{self.data_dir / MANIFEST}: refused: prepared with subwords "
                              f"{manifest['settings'].get('subwords')}, the model asks for model.subwords {subwords}; "
                              "prepare the data with the model's settings")
        files = [(manifest["vocabularies"][side], name) for side, name in zip(SIDES, (SRC_VOCAB, TRG_VOCAB),
                                                                              strict=True)]
        if subwords is not None:
            files += [(manifest["subwords"][side], name) for side, name in zip(SIDES, SUBWORD_FILES, strict=True)]
        for record, name in files:
            if (self.out / CHECKPOINT).exists():  # resuming: the run's own vocabularies
                if not (self.out / name).exists() or file_digest(self.out / name)[1] != record["sha256"]:
                    raise RerankError(f"{self.data_dir / record['file']}: refused: its vocabulary is not that of the "
                                      f"model in {self.out} ({name}); train with the data the model was trained on")
            elif self.world.is_main:
                with atomic_binary_output(self.out / name) as out:
                    out.write((self.data_dir / record["file"]).read_bytes())
        if self.config.model.tie_source_target_embeddings and self.src_vocab.tokens != self.trg_vocab.tokens:
            raise RerankError(f"{self.data_dir / MANIFEST}: refused: model.tie_source_target_embeddings needs one "
                              "vocabulary for both languages, and the prepared data has two; prepare it with "
                              "model.subwords joint: true")
        logger.info("vocabularies: %d source, %d target (with 4 special tokens)", len(self.src_vocab),
                    len(self.trg_vocab))
        t = self.config.training
        self.sampler: SubwordSampler | None = None
        if t.subword_dropout:  # the config has model.subwords, and the data were checked to be prepared with them
            assert isinstance(self.src_vocab, SubwordVocabulary) and isinstance(self.trg_vocab, SubwordVocabulary)
            self.sampler = SubwordSampler(self.src_vocab, self.trg_vocab, t.subword_dropout,
                                          manifest["settings"]["max_length"], t.seed)
        valid = read_parallel(data.valid.source, data.valid.target)
        if not valid.sources:
            raise RerankError(f"{data.valid.source}: expected validation sentences (data.valid), got an empty file")
        if self.config.model.reverse_target:
            valid = valid.reverse_targets()
        self.valid_src = to_ids(valid.sources, self.src_vocab)
        self.valid_trg = to_ids(valid.targets, self.trg_vocab)

    def epoch_plan(self, epoch: int) -> EpochPlan:
        """The batches of ``epoch`` (pair indices), the same in every process and after a restart."""
        t = self.config.training
        return EpochPlan(self.corpus, t.batch_size, t.bucket_window, t.pool_pairs, t.seed, epoch,
                         t.batch_tokens_on(self.device.type))

    def _make_optimizer(self) -> torch.optim.Optimizer:
        t = self.config.training
        if t.optimizer == "adadelta":
            return torch.optim.Adadelta(self.model.parameters(), lr=t.learning_rate, rho=t.adadelta_rho,
                                        eps=t.adadelta_eps)
        return torch.optim.Adam(self.model.parameters(), lr=t.learning_rate, fused=True)

    @contextlib.contextmanager
    def _batches(self) -> Iterator[Step]:
        loader = BatchLoader(self.epoch_plan, self._batch, self.device)
        try:
            yield lambda epoch, batch: self._update(*loader.get(epoch, batch, self._epoch_batches(epoch)))
        finally:
            loader.close()

    def _epoch_batches(self, epoch: int) -> int:
        if self._plan is None or self._plan.epoch != epoch:
            self._plan = self.epoch_plan(epoch)
        return len(self._plan)

    def _perplexity(self) -> float:
        return validation_perplexity(self.model, self.valid_src, self.valid_trg)

    def _after_validation(self) -> None:
        if self.config.training.keep_checkpoints and self.world.is_main:
            self._keep_checkpoint()

    def _batch(self, indices: np.ndarray, position: tuple[int, int]) -> tuple[Batch, int]:
        """This process's pairs of a global batch (all of it in one process: each reads only its own pairs), and
        the weight of their loss; with ``training.subword_dropout``, segmented anew as seeded by the batch's
        ``position`` (epoch, batch) and this process's rank."""
        part, weight = self.world.share(indices)
        reverse = self.config.model.reverse_target
        batch = self.corpus.batch(part, reverse)
        if self.sampler is not None:
            batch = self.sampler(batch, (*position, self.world.rank), reverse)
        return batch, weight

    def _update(self, indices: np.ndarray, prepared: tuple[Batch, int]) -> tuple[float, int]:
        """One optimiser step on a batch (``prepared``: this process's part, made ahead by the loader); returns
        its summed loss (the negative log-likelihood, or with label smoothing the smoothed loss) and target
        tokens. Under warm-up, the learning rate of this update is ``progress.learning_rate`` (the rate decayed
        on plateaus) × min(1, update / warmup_updates)."""
        batch, weight = prepared
        batch = batch.to(self.device)
        t = self.config.training
        with torch.autocast(self.device.type, torch.bfloat16, enabled=t.precision == "bf16"):
            loss = self.parallel_model(batch.src, batch.src_len, batch.trg,  # −Σ ln p of the targets, or smoothed
                                       label_smoothing=t.label_smoothing)
        if t.warmup_updates:
            self._set_learning_rate(self.progress.learning_rate * min(1.0, (self.progress.updates + 1)
                                                                       / t.warmup_updates))
        self.optimizer.zero_grad(set_to_none=True)
        # mean sentence log-likelihood of the whole batch (Cho et al. 2014, Eq. 4); under torchrun the
        # gradients are averaged over the processes, hence the weight (the number of processes)
        torch.autograd.backward(loss.float() * weight / len(indices))
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.training.clip_norm)
        self.optimizer.step()
        return (loss.item(), batch.target_tokens) if weight else (0.0, 0)

    def _keep_checkpoint(self) -> None:
        """Keep this validation's weights for averaging; drop those neither among the last N nor the best N."""
        count = self.config.training.keep_checkpoints
        path = checkpoint_path(self.out, self.progress.updates)
        path.parent.mkdir(exist_ok=True)
        save_state({"model": self.model.state_dict()}, path)
        ppl = {int(entry["updates"]): entry["valid_ppl"] for entry in self.progress.history}
        kept = {updates: ppl.get(updates, math.inf) for updates in checkpoint_updates(self.out)}
        keep = set(select_checkpoints(kept, min(count, len(kept)), "last"))
        keep |= set(select_checkpoints(kept, min(count, len(kept)), "best"))
        for updates in set(kept) - keep:
            checkpoint_path(self.out, updates).unlink()


def _as_set(section: object, kind: type[Any]) -> object:
    """A saved config section read with today's defaults (keys added since it was written take theirs), without
    its unset keys; as it is if it no longer reads."""
    try:
        return _set_keys(to_dict(from_dict(kind, section)))
    except (ValueError, RerankError):
        return _set_keys(section)


class BatchLoader:
    """Batches made ahead: while an update runs, a thread assembles the next batch from the shards (into pinned
    memory for a GPU, whose copy can then overlap). The batches are those :meth:`Trainer.epoch_plan` gives, in
    order; asked for another one (a restart), the loader makes it then."""

    def __init__(self, plans: Callable[[int], EpochPlan],
                 make: Callable[[np.ndarray, tuple[int, int]], tuple[Batch, int]], device: torch.device):
        self.plans, self.make, self.pin = plans, make, device.type == "cuda"
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="batches")
        self.plan: EpochPlan | None = None
        self.next: tuple[tuple[int, int], Future[tuple[np.ndarray, tuple[Batch, int]]]] | None = None

    def get(self, epoch: int, batch: int, batches: int) -> tuple[np.ndarray, tuple[Batch, int]]:
        """Batch ``batch`` of ``epoch`` (of ``batches``): its pair indices, and this process's part with its weight."""
        if self.next is not None and self.next[0] == (epoch, batch):
            made = self.next[1].result()
        else:
            made = self._make(epoch, batch)
        following = (epoch, batch + 1) if batch + 1 < batches else (epoch + 1, 0)
        self.next = following, self.executor.submit(self._make, *following)
        return made

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)

    def _make(self, epoch: int, batch: int) -> tuple[np.ndarray, tuple[Batch, int]]:
        if self.plan is None or self.plan.epoch != epoch:
            self.plan = self.plans(epoch)  # the thread's own plan: a plan is not shared between threads
        indices = self.plan[batch]
        made, weight = self.make(indices, (epoch, batch))
        if self.pin:
            made = Batch(made.src.pin_memory(), made.src_len, made.trg.pin_memory(), made.trg_len)
        return indices, (made, weight)


def _set_keys(section: object) -> object:
    """A config section without its unset keys (None): a model directory written before a key was added
    compares equal."""
    return {k: v for k, v in section.items() if v is not None} if isinstance(section, dict) else section


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
