"""Where and how torch runs: a device checked to exist, and CPU threads set for a scope only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from rerank.errors import RerankError


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
