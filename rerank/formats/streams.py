"""Helpers for records read as streams: look at the first one, and take them a chunk at a time."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def peek(items: Iterable[T]) -> tuple[T | None, Iterator[T]]:
    """The first item (``None`` if there is none) and an iterator over all the items, the first included."""
    iterator = iter(items)
    for first in iterator:
        return first, itertools.chain([first], iterator)
    return None, iterator


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last one shorter)."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
