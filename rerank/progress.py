"""Progress of a long streaming job on stderr: a bar redrawn in place on a terminal, a log line now and then
elsewhere (a batch job's log file), with the rate in items per second and the time left."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO, TypeVar

logger = logging.getLogger(__name__)

BAR_WIDTH = 30
T = TypeVar("T")


class ProgressBar:
    """Counts items; shows ``[#####-----] 43.1% 525,312/1,219,049 pairs, 2,917 pairs/s, ETA 3m58s``.

    ``total`` may be unknown (``None``): then no bar and no ETA. ``enabled=False`` shows nothing
    but the counts are kept (for a summary).
    """

    def __init__(self, unit: str, total: int | None = None, *, enabled: bool = True, stream: TextIO | None = None,
                 interval: float | None = None):
        self.unit = unit
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self.interval = interval if interval is not None else (0.5 if self.tty else 30.0)
        self.done = 0
        self.start = self.last = time.monotonic()

    def update(self, items: int = 1) -> None:
        self.done += items
        now = time.monotonic()
        if self.enabled and now - self.last >= self.interval:
            self.last = now
            self._show(self.describe(now))

    def track(self, items: Iterable[T], size: Callable[[T], int] | None = None) -> Iterator[T]:
        """The items, counted as they pass; ``size`` counts what an item holds (``len`` for batches)."""
        for item in items:
            self.update(size(item) if size is not None else 1)
            yield item

    def close(self) -> str:
        """Ends the bar's line and returns a one-line summary (``1,219,049 pairs in 7m12s, 2,822 pairs/s``)."""
        now = time.monotonic()
        if self.enabled and self.tty:
            self._show(self.describe(now))
            self.stream.write("\n")
            self.stream.flush()
        return f"{self.done:,} {self.unit} in {duration(now - self.start)}, {self.rate(now):,.0f} {self.unit}/s"

    def rate(self, now: float) -> float:
        return self.done / max(now - self.start, 1e-9)

    def describe(self, now: float) -> str:
        rate = self.rate(now)
        if self.total is None:
            return f"{self.done:,} {self.unit}, {rate:,.0f} {self.unit}/s"
        share = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = round(share * BAR_WIDTH)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {100 * share:.1f}% {self.done:,}/{self.total:,} "
                f"{self.unit}, {rate:,.0f} {self.unit}/s, ETA {duration(eta)}")

    def _show(self, line: str) -> None:
        if self.tty:
            self.stream.write(f"\r{line}\x1b[K")
            self.stream.flush()
        else:
            logger.info("%s", line)


def duration(seconds: float) -> str:
    """``7m12s``, ``1h03m00s``, ``?`` for an unknown time."""
    if seconds != seconds or seconds == float("inf"):
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
