"""What every benchmark prints beside its figures: this machine's own fp32 matrix-multiply rate, measured
in the same run at the same thread count, the load average, and timings in wall-clock and CPU seconds.

On a shared machine the wall clock counts the time other jobs hold the cores; the CPU time of this
process does not (with one thread it is the steadier figure), and ratios of two paths timed side by
side in one run are steadier than either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

T = TypeVar("T")


def matmul_rate(size: int = 1024, repeat: int = 10) -> float:
    """Best fp32 ``torch.mm`` rate of ``size`` x ``size`` matrices with torch's current threads, in FLOP/s."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best


@dataclass
class Timing:
    wall: float  # seconds
    cpu: float  # CPU seconds of this process, every thread
    matmul: float  # the machine's matmul rate (FLOP/s) measured just before


def timed(work: Callable[[], T], rate: bool = True) -> tuple[T, Timing]:
    """``work()``, its wall and CPU time, and the matmul rate: the higher of those measured just before and
    just after it (another job may hold the core during one of them); 0 without ``rate``."""
    matmul = matmul_rate() if rate else 0.0
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    timing = Timing(time.perf_counter() - wall, time.process_time() - cpu, matmul)
    if rate:
        timing.matmul = max(matmul, matmul_rate())
    return result, timing


def share(flops: float, timing: Timing, cpu: bool = False) -> float:
    """The share of the machine's matmul rate that ``flops`` done in ``timing`` reach: by the wall clock,
    or with ``cpu`` by the CPU time spread over torch's threads (the time the job had the cores)."""
    seconds = timing.cpu / torch.get_num_threads() if cpu else timing.wall
    return flops / seconds / timing.matmul


def describe() -> str:
    return (f"{os.cpu_count()} CPUs, torch {torch.__version__}, load average "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
