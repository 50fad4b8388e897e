"""Progress of a long streaming job on stderr, with tqdm: a bar redrawn in place on a terminal, a line
every 30 seconds elsewhere (a batch job's log file), and a one-line summary at the end."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

LOG_INTERVAL = 30.0  # seconds between lines when stderr is not a terminal


def progress_bar(unit: str, total: int | None = None, *, enabled: bool = True) -> tqdm[Any]:
    """A tqdm bar counting ``unit`` (a plural noun); disabled, it still counts (for :func:`summary`) but
    shows nothing."""
    tty = sys.stderr.isatty()
    interval = 0.5 if tty else LOG_INTERVAL
    return tqdm(total=total, unit=f" {unit}", file=sys.stderr, mininterval=interval, maxinterval=LOG_INTERVAL,
                delay=interval if enabled else float("inf"), leave=tty, dynamic_ncols=tty, ascii=not tty)


def summary(bar: tqdm[Any]) -> str:
    """``1,219,049 pairs in 07:12, 2,822 pairs/s``; closes the bar."""
    bar.close()
    elapsed = bar.format_dict["elapsed"]
    unit = bar.unit.strip()
    count = f"{bar.n:,} {unit}" if bar.n != 1 else f"1 {unit.removesuffix('s')}"
    return f"{count} in {tqdm.format_interval(elapsed)}, {bar.n / max(elapsed, 1e-9):,.0f} {unit}/s"
