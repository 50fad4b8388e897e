"""Streams: the first record seen without losing it, and records a chunk at a time, both lazy."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from rerank.formats.streams import chunks, peek


def counting(items: list[int], pulled: list[int]) -> Iterator[int]:
    """``items``, appending each to ``pulled`` as it is taken."""
    for item in items:
        pulled.append(item)
        yield item


def test_peek_gives_the_first_item_and_every_item_taking_only_the_first() -> None:
    pulled: list[int] = []
    first, items = peek(counting([3, 1, 4], pulled))
    assert first == 3 and pulled == [3]
    assert list(items) == [3, 1, 4]


def test_peek_at_nothing_gives_none_and_an_empty_stream() -> None:
    first, items = peek(iter([]))
    assert first is None and list(items) == []


def test_peek_keeps_a_first_item_that_is_none() -> None:
    first, items = peek([None, 2])
    assert first is None
    assert list(items) == [None, 2]


def test_chunks_cut_every_size_items_the_last_shorter() -> None:
    assert list(chunks(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks(range(6), 3)) == [[0, 1, 2], [3, 4, 5]]  # no empty chunk at the end
    assert list(chunks([], 3)) == []
    assert list(chunks("ab", 5)) == [["a", "b"]]


def test_chunks_read_the_stream_a_chunk_at_a_time() -> None:
    pulled: list[int] = []
    stream = chunks(counting(list(range(100)), pulled), 4)
    assert next(stream) == [0, 1, 2, 3] and pulled == [0, 1, 2, 3]
    assert list(itertools.islice(chunks(itertools.count(), 2), 3)) == [[0, 1], [2, 3], [4, 5]]  # endless input
