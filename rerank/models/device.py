"""Where and how torch runs: a device checked to exist, CPU threads set for a scope only, and which of the
models' two paths (the fast, CPU-tuned one or the straightforward reference one) each kind of work takes on
each kind of device."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Literal

import torch

from rerank.errors import RerankError

Work = Literal["training", "scoring", "search"]  # the loss and its gradients; forced decoding; beam search
PATH_VARIABLE = "RERANK_PATH"  # fast or reference: every kind of work takes that path, on any device

# The path that measured faster, by device type and work, and for one architecture where it differs (see
# docs/results/speed.md, "The path per device"). CPU: bench/bench_train.py, bench_scoring.py and bench_translate.py on
# 2 cores, the fast path 1.3-3.1x faster throughout. CUDA: the same benchmarks by bench/gpu.sh on one H200
# (fast / reference): scoring tables 0.45-0.50x, n-best lists 0.29-0.80x, beam 10 0.74x, training encdec-small
# 0.85x, rnnsearch-small 1.20x. A device type not listed takes the reference path (written for any device).
FASTER_PATH: dict[tuple[str, Work], str] = {
    ("cpu", "training"): "fast", ("cpu", "scoring"): "fast", ("cpu", "search"): "fast",
    ("cuda", "training"): "reference", ("cuda", "scoring"): "reference", ("cuda", "search"): "reference",
}
FASTER_PATH_OF_ARCHITECTURE: dict[tuple[str, Work, str], str] = {("cuda", "training", "rnnsearch"): "fast"}


def faster_path(device_type: str, work: Work, architecture: str) -> str:
    """``fast`` or ``reference``: the path ``work`` takes for a model of ``architecture`` on a device of
    ``device_type``; the environment variable ``RERANK_PATH`` (fast or reference), when set, overrides the
    measured choice."""
    forced = os.environ.get(PATH_VARIABLE)
    if forced:
        if forced not in ("fast", "reference"):
            raise RerankError(f"{PATH_VARIABLE}={forced!r}: expected fast or reference")
        return forced
    return FASTER_PATH_OF_ARCHITECTURE.get((device_type, work, architecture),
                                           FASTER_PATH.get((device_type, work), "reference"))


def torch_device(name: str) -> torch.device:
    """The device called ``name`` (``cpu``, ``cuda``, ``cuda:1``), checked to exist on this machine."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise RerankError(f"unknown device {name!r}; expected cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RerankError(f"device {name!r} asked for, but this machine has no CUDA GPU (use cpu)")
    return device


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` CPU threads (``None``: as they are), and restore the number after it."""
    if not threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
