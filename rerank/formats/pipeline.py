"""The host's work beside the model's: a thread that reads and parses ahead (:func:`ahead`), and one that
formats and writes behind (:class:`Behind`), each through a bounded queue.

The model's matrix multiplies release the GIL, and so do reading, zlib and file writes: while a
batch is scored, the next ones are parsed and the last ones written. The items keep their order,
so what is written is the same, byte for byte, as when one thread does everything (``enabled=False``
runs the same code in the calling thread). Memory stays bounded by ``depth`` items each way. An
exception in a worker thread is raised again, as it was, in the calling thread (a
:class:`~rerank.errors.FormatError` stays the clear error it was); an exception in the calling
thread (Ctrl-C, SIGTERM) stops the workers at their next item. The workers run in a copy of the
calling thread's context (:mod:`contextvars`), so that settings held there hold in them too.

While a worker runs, Python's switch interval is 0.5 ms instead of 5: each of the model's operations
gives up the GIL, and a thread that wants it back waits up to the switch interval while a worker
parses; at 5 ms a model of many short operations lost to the workers more than it gained
(``bench/bench_host.py``, one run each on a loaded machine: the model's time grew by a fifth at 5 ms,
by 4% at 0.5 ms). A thread blocked reading a pipe cannot be stopped (nor the interpreter end cleanly
while it holds stdin): read stdin in the calling thread.
"""

from __future__ import annotations

import contextvars
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")

DEPTH = 4  # items queued each way
_POLL = 0.1  # seconds between looks at whether the other side stopped
_STUCK = 5.0  # seconds a stopped worker may take to finish its item (a read or write blocked on a pipe is left)
_END = object()
SWITCH_INTERVAL = 0.0005  # seconds, while workers run (see the module's docstring)
_switching = threading.Lock()
_workers = 0
_interval = 0.0


def _worker_started() -> None:
    global _workers, _interval
    with _switching:
        if _workers == 0:
            _interval = sys.getswitchinterval()
            sys.setswitchinterval(min(_interval, SWITCH_INTERVAL))
        _workers += 1


def _worker_stopped() -> None:
    global _workers
    with _switching:
        _workers -= 1
        if _workers == 0:
            sys.setswitchinterval(_interval)


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def ahead(items: Iterable[T], depth: int = DEPTH, *, enabled: bool = True, name: str = "reader") -> Iterator[T]:
    """The ``items``, made by a thread of their own up to ``depth`` ahead of the consumer (with ``enabled``);
    the iterable is created, read and closed in that thread."""
    if not enabled:
        yield from items
        return
    made: queue.Queue[object] = queue.Queue(depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                made.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        iterator = iter(items)
        try:
            for item in iterator:
                if not put(item):
                    return
            put(_END)
        except BaseException as e:  # handed to the consumer, which raises it
            put(_Failed(e))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(produce,), name=name, daemon=True)
    _worker_started()
    thread.start()
    finished = False
    try:
        while True:
            item = made.get()
            if item is _END:
                break
            if isinstance(item, _Failed):
                raise item.error
            yield item  # type: ignore[misc]
        finished = True
    finally:
        stop.set()
        # stopped early: the thread stops at its next item (a thread blocked reading a terminal is left behind)
        thread.join(None if finished else _STUCK)
        _worker_stopped()


class Behind(Generic[T]):
    """A thread that applies ``consume`` to each item given to :meth:`put`, in order, up to ``depth`` behind
    (with ``enabled``; otherwise :meth:`put` consumes at once). Leaving the ``with`` block waits for the
    last item; an error of ``consume`` is raised by the next :meth:`put` or on leaving."""

    def __init__(self, consume: Callable[[T], None], depth: int = DEPTH, *, enabled: bool = True,
                 name: str = "writer"):
        self.consume, self.enabled = consume, enabled
        self.queue: queue.Queue[object] = queue.Queue(depth)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run,), name=name,
                                       daemon=True)

    def __enter__(self) -> Behind[T]:
        if self.enabled:
            _worker_started()
            self.thread.start()
        return self

    def put(self, item: T) -> None:
        if not self.enabled:
            self.consume(item)
            return
        while True:
            self._raise()
            try:
                self.queue.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if not self.enabled:
            return
        try:
            if kind is not None:  # the caller failed: drop what is queued, let the item being written finish
                self.stop.set()
                self.thread.join(_STUCK)
                return
            self.put(_END)  # type: ignore[arg-type]
            self.thread.join()
            self._raise()
        finally:
            _worker_stopped()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            self.stop.set()
            raise error

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                item = self.queue.get(timeout=_POLL)
            except queue.Empty:
                continue
            if item is _END:
                return
            try:
                self.consume(item)  # type: ignore[arg-type]
            except BaseException as e:  # raised again in the calling thread
                self.error = e
                return
