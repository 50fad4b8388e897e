"""Scoring a phrase table on a Ray cluster: the same output as :func:`~rerank.scoring.table.score_phrase_table`,
byte for byte, from many workers.

One Ray Data pipeline: a read task streams the table (plain or gzip) in groups of ``window`` lines,
in order, one group a row; an actor pool of scoring workers, each loading the model once (a
callable class), appends the score to the lines of each group it is given; the driver takes the
groups back in table order (``preserve_order``) and writes them through the same atomic writer.
A group is a window of the single-process run: :meth:`~rerank.scoring.pairs.Scorer.windows` cuts
the stream after every ``window``-th pair, so the workers score exactly the windows one process
scores, with the same batches, and the same function formats the value. The workers check the
lines (field count, numbers, encoding) as the single-process reader does, with the file's line
numbers; a bad line stops the run and leaves no output.

The table must be at the same path on every node (a shared file system), since the read task runs
in the cluster. Ray is an optional dependency (the ``ray`` extra), imported here only.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import inspect
import logging
import math
import os
import time
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rerank.errors import RerankError, counted, install_extra
from rerank.formats.files import atomic_output, decode_line, display_name, gzip_error, open_binary
from rerank.formats.phrase_table import MOSES_LOWEST_LOG, SEPARATOR, parse_phrase_table
from rerank.formats.shards import starts_table_segment
from rerank.formats.tokens import Pair
from rerank.models.checkpoint import load_model
from rerank.models.device import torch_device
from rerank.progress import progress_bar, summary
from rerank.scoring.pairs import Scorer, ScoringConfig, windows
from rerank.scoring.table import TARGET_GIVEN_SOURCE, Column, ScoreAppender

logger = logging.getLogger(__name__)

SEPARATOR_BYTES = SEPARATOR.encode()
LOCAL = "local"  # --ray local: start a Ray instance on this machine for the run


@dataclass(frozen=True)
class RayCluster:
    """Where and with what the workers run.

    ``address``: ``None`` connects to the cluster that RAY_ADDRESS or a running local instance names, or
    starts one on this machine (as ``ray.init()`` does); ``"local"`` always starts one; anything else is
    a cluster address (``host:6379``, ``ray://host:10001``). ``workers``: the size of the actor pool
    (default: as many as the cluster's CPUs, or GPUs, hold). Each worker reserves ``cpus`` CPUs (and
    runs torch on as many threads) and ``gpus`` GPUs (then it scores on its GPU).
    """

    address: str | None = None
    workers: int | None = None
    cpus: float = 1.0
    gpus: float = 0.0

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise RerankError(f"--ray-workers must be at least 1, got {self.workers}")
        if self.cpus <= 0 or self.gpus < 0:
            raise RerankError(f"a worker needs more than 0 CPUs and at least 0 GPUs, got {self.cpus:g} and "
                              f"{self.gpus:g}")

    @property
    def threads(self) -> int:
        return max(1, int(self.cpus))

    @property
    def device(self) -> str:
        return "cuda" if self.gpus > 0 else "cpu"


@dataclass
class RayRun:
    """What a run did: its workers, the pairs scored, the values floored, and the CPU time the workers
    spent on the pairs (their processes' time, all threads; start-up and model loading left out)."""

    workers: int
    pairs: int = 0
    floored: int = 0
    cpu_seconds: float = 0.0

    @property
    def pairs_per_cpu_second(self) -> float:
        return self.pairs / self.cpu_seconds if self.cpu_seconds else math.nan


def score_phrase_table_ray(table: str | os.PathLike[str], model: str | os.PathLike[str], *,
                           output: str | os.PathLike[str], cluster: RayCluster, num_scores: int,
                           scoring: ScoringConfig | None = None, encoding: str = "utf-8",
                           show_progress: bool = True, column: Column = TARGET_GIVEN_SOURCE) -> RayRun:
    """Write ``table`` to ``output`` (atomically) with exp(ln p(target | source)) under ``model`` appended to
    each line, as :func:`~rerank.scoring.table.score_phrase_table` does, scored on ``cluster``; every line
    must have ``num_scores`` scores (the first line's). Returns what the run did."""
    ray = import_ray()
    scoring = scoring or ScoringConfig()
    name = display_name(table)
    load_model(model)  # a bad model directory is an error here, before any worker starts
    started = not ray.is_initialized()
    if started:
        ray.init(address=cluster.address, logging_level=logging.WARNING, include_dashboard=False)
    try:
        workers = cluster.workers or default_workers(ray.cluster_resources(), cluster)
        logger.info("%s: scoring on %s of %g CPU%s%s each", name, counted(workers, "Ray worker"), cluster.cpus,
                    "" if cluster.cpus == 1 else "s", f" and {cluster.gpus:g} GPU" if cluster.gpus else "")
        dataset = _pipeline(ray, table, model, cluster, workers, scoring, encoding, num_scores, column)
        progress = progress_bar("pairs", None, enabled=show_progress)
        run = RayRun(workers)
        with atomic_output(output, encoding) as out:
            for batch in _batches(dataset):
                for text, lines, low, cpu in zip(batch["text"], batch["lines"], batch["floored"], batch["cpu"],
                                                 strict=True):
                    out.write(text)
                    progress.update(int(lines))
                    run.pairs += int(lines)
                    run.floored += int(low)
                    run.cpu_seconds += float(cpu)
        progress.close()
        logger.info("%s: %s; %s floored at exp(%g); the workers' CPU time %.1f s, %s pairs per CPU second",
                    display_name(output), summary(progress), counted(run.floored, "value"), MOSES_LOWEST_LOG,
                    run.cpu_seconds, f"{run.pairs_per_cpu_second:,.0f}")
        return run
    finally:
        if started:
            ray.shutdown()


def import_ray() -> Any:
    """The ``ray`` module with Ray Data, or a :class:`RerankError` that says how to install it."""
    try:
        import ray
        import ray.data
    except ImportError as e:
        raise RerankError(f"--ray needs Ray Data, which is not installed ({e.msg}): {install_extra('ray')}") from None
    return ray


def default_workers(resources: dict[str, float], cluster: RayCluster) -> int:
    """As many workers as the cluster's GPUs (when workers use GPUs) or CPUs hold, at least one."""
    if cluster.gpus > 0:
        return max(1, int(resources.get("GPU", 0) // cluster.gpus))
    return max(1, int(resources.get("CPU", 0) // cluster.cpus))


def _pipeline(ray: Any, table: str | os.PathLike[str], model: str | os.PathLike[str], cluster: RayCluster,
              workers: int, scoring: ScoringConfig, encoding: str, num_scores: int, column: Column) -> Any:
    """The Ray Data pipeline: read the groups, score them on the actor pool, in table order."""
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    context.raise_original_map_exception = True  # a worker's RerankError, not Ray's wrapper of it
    context.target_max_block_size = 1  # a block per group, so that each group can go to any worker
    # Ray Data logs a worker's error with Ray's traceback before raising it; the error is ours to report,
    # in one line (an error of Ray's own is raised here too, with its traceback)
    logging.getLogger("ray.data").setLevel(logging.CRITICAL)
    source = ray.data.from_items([{"path": os.path.abspath(table)}])
    rows = source.map_batches(read_windows, batch_size=1, num_cpus=0,
                              fn_kwargs={"scoring": scoring, "encoding": encoding})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
        return rows.map_batches(
            GroupScorer, batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=cluster.cpus,
            num_gpus=cluster.gpus or None, **not_restarted(rows.map_batches),
            fn_constructor_kwargs={"model": os.path.abspath(model), "device": cluster.device,
                                   "threads": cluster.threads, "scoring": scoring, "table": display_name(table),
                                   "encoding": encoding, "num_scores": num_scores,
                                   "column": column})


def not_restarted(map_batches: Any) -> dict[str, int]:
    """``max_restarts=0`` for Ray Data's workers where ``map_batches`` still takes Ray's remote arguments (until Ray
    2.64): a worker that dies ends the run with Ray's error instead of being restarted. Ray Data hands its workers
    their code through the object store, and for a worker that may restart, Ray's core worker prints an error line
    about that on every run, a successful one included ("core_worker.cc: Actor ... has constructor arguments in the
    object store and max_restarts > 0"). Scoring is deterministic and its output whole or absent: a run whose
    worker died (out of memory, say) is better started again than its worker restarted without end."""
    accepts = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(map_batches).parameters.values())
    return {"max_restarts": 0} if accepts else {}


def _batches(dataset: Any) -> Iterator[dict[str, np.ndarray]]:
    """The dataset's rows in order; an error a worker raised about the input is a :class:`RerankError` here."""
    try:
        yield from dataset.iter_batches(batch_size=None, batch_format="numpy")
    except Exception as e:
        user = user_error(e)
        if user is None:
            raise
        raise user from None


def user_error(error: BaseException) -> RerankError | None:
    """The :class:`RerankError` that caused ``error`` (a Ray task's error wraps it), as a plain one."""
    stack: list[BaseException] = [error]
    seen: set[int] = set()
    while stack:
        here = stack.pop()
        if id(here) in seen:
            continue
        seen.add(id(here))
        cause = getattr(here, "cause", None)  # a RayTaskError's original exception
        if isinstance(here, RerankError) and not isinstance(cause, BaseException):
            message = here.args[0] if here.args and isinstance(here.args[0], str) else str(here)
            return RerankError(message.split("\n", 1)[0])  # without what Ray Data appends to it
        stack += [e for e in (cause, here.__cause__, here.__context__) if isinstance(e, BaseException)]
    return None


# ------------------------------------------------------------------------------ run in the cluster

def read_windows(batch: dict[str, np.ndarray], scoring: ScoringConfig,
                 encoding: str) -> Iterator[dict[str, np.ndarray]]:
    """The table ``batch["path"][0]`` as rows of the lines that one process scores together (a window of a
    segment of the table, see :class:`~rerank.scoring.table.ScoreAppender`): their raw bytes and the first
    one's line number."""
    path = str(batch["path"][0])
    for first, lines, sources in _segments(path):
        with _no_gc():  # a list of words per source: the cyclic collector would take most of the time
            cuts = [len(window) for window in windows(_pairs(sources, encoding), scoring)]
        start = 0
        for size in cuts:
            yield {"first_line": np.array([first + start]),
                   "text": np.array([b"".join(lines[start: start + size])], dtype=object)}
            start += size


def _pairs(sources: list[bytes], encoding: str) -> Iterator[Pair]:
    """What :func:`~rerank.scoring.pairs.windows` looks at of each line: its source words (a bad byte is
    the scoring worker's to report)."""
    previous: bytes | None = None
    words: tuple[str, ...] = ()
    for source in sources:
        if source is not previous:
            previous, words = source, tuple(source.decode(encoding, errors="replace").split())
        yield words, ()


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The block without the cyclic garbage collector (nothing it makes is cyclic)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _segments(path: str) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """The segments of the table ``path`` (:func:`~rerank.formats.shards.starts_table_segment`): the number
    of each one's first line, its lines (with their ends) and their source phrases (one object for a run
    of equal ones)."""
    lines: list[bytes] = []
    sources: list[bytes] = []
    source = b""
    read = 0
    with open_binary(path) as stream:
        try:
            for line in stream:
                here = line[: line.find(SEPARATOR_BYTES)].strip()
                if here != source or not lines:  # a table is sorted by source: most lines repeat the one before's
                    if lines and starts_table_segment(source, here):
                        yield read - len(lines) + 1, lines, sources
                        lines, sources = [], []
                    source = here
                lines.append(line)
                sources.append(source)
                read += 1
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise RerankError(str(gzip_error(display_name(path), read + 1, e))) from None
    if lines:
        yield read - len(lines) + 1, lines, sources


class GroupScorer:
    """A Ray worker: loads the model once, then appends the score to the lines of each group it is given."""

    def __init__(self, model: str, device: str, threads: int, scoring: ScoringConfig, table: str, encoding: str,
                 num_scores: int, column: Column = TARGET_GIVEN_SOURCE):
        torch.set_num_threads(threads)
        self.appender = ScoreAppender(Scorer.load(model, torch_device(device), scoring), table, column=column)
        self.table = table
        self.encoding = encoding
        self.num_scores = num_scores

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts, lines, floored, cpu = [], [], [], []
        try:
            for first, raw in zip(batch["first_line"].tolist(), batch["text"], strict=True):
                started = time.process_time()
                text, count, low = self.score_group(int(first), bytes(raw))
                texts.append(text)
                lines.append(count)
                floored.append(low)
                cpu.append(time.process_time() - started)
        except RerankError as e:  # as a plain RerankError, which crosses process boundaries intact
            raise RerankError(str(e)) from None
        return {"text": np.array(texts, dtype=object), "lines": np.array(lines), "floored": np.array(floored),
                "cpu": np.array(cpu)}

    def score_group(self, first: int, raw: bytes) -> tuple[str, int, int]:
        """The lines of ``raw`` (the first is line ``first`` of the table) with their score, how many there
        are and how many values were floored."""
        pieces = raw.split(b"\n")
        if pieces[-1] == b"":
            pieces.pop()
        numbered = ((first + i, decode_line(line, self.table, first + i, self.encoding))
                    for i, line in enumerate(pieces))
        entries = parse_phrase_table(numbered, self.table, self.num_scores)
        before = self.appender.floored
        text = "".join(f"{entry.line()}\n" for window in self.appender.scored(entries) for entry in window)
        return text, len(pieces), self.appender.floored - before
