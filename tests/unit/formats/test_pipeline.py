"""The host's threads (:mod:`rerank.formats.pipeline`): items in order, memory bounded, a worker's error
raised as it was in the calling thread, and workers that stop when the caller stops."""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Iterator

import pytest

from rerank.errors import FormatError
from rerank.formats.pipeline import SWITCH_INTERVAL, Behind, ahead

SETTING: contextvars.ContextVar[str] = contextvars.ContextVar("setting", default="unset")


@pytest.mark.parametrize("enabled", [True, False])
def test_items_come_in_order_and_are_consumed_in_order(enabled: bool) -> None:
    consumed: list[int] = []
    with Behind(consumed.append, depth=2, enabled=enabled) as writer:
        for item in ahead(range(100), depth=3, enabled=enabled):
            writer.put(item * 2)
    assert consumed == [2 * i for i in range(100)]


def test_the_reader_stays_within_its_depth() -> None:
    made: list[int] = []

    def produce() -> Iterator[int]:
        for i in range(50):
            made.append(i)
            yield i

    items = ahead(produce(), depth=3)
    assert next(items) == 0
    threading.Event().wait(0.3)
    assert len(made) <= 1 + 3 + 1  # the one taken, the queue, and one waiting to go in
    assert list(items) == list(range(1, 50))


def test_a_readers_error_is_raised_as_it_was_after_the_items_before_it() -> None:
    def produce() -> Iterator[int]:
        yield 1
        raise FormatError("table.gz", 2, "five fields", got="four")

    got = []
    with pytest.raises(FormatError, match="table.gz:2"):
        for item in ahead(produce()):
            got.append(item)
    assert got == [1]


def test_a_writers_error_is_raised_in_the_caller() -> None:
    def consume(item: int) -> None:
        if item == 3:
            raise FormatError("out", item, "a finite score")

    with pytest.raises(FormatError, match="out:3"), Behind(consume, depth=1) as writer:
        for item in range(1000):
            writer.put(item)
    # the caller learns of it at a later put, long before the end


def test_stopping_early_closes_the_readers_source() -> None:
    closed = threading.Event()

    def produce() -> Iterator[int]:
        try:
            yield from range(10_000)
        finally:
            closed.set()

    for item in ahead(produce(), depth=2):
        if item == 5:
            break
    assert closed.wait(2)


def test_a_callers_error_stops_the_writer() -> None:
    consumed: list[int] = []
    writer: Behind[int] = Behind(consumed.append, depth=2)
    with pytest.raises(KeyboardInterrupt), writer:
        writer.put(1)
        raise KeyboardInterrupt
    assert not writer.thread.is_alive()


def test_the_workers_see_the_callers_context() -> None:
    seen: list[str] = []
    token = SETTING.set("shard 2 of 3")
    try:
        with Behind[str](lambda _: seen.append(SETTING.get())) as writer:
            for item in ahead(SETTING.get() for _ in range(2)):
                writer.put(item)
                seen.append(item)
    finally:
        SETTING.reset(token)
    assert seen == ["shard 2 of 3"] * 4


def test_the_switch_interval_is_short_while_workers_run_and_comes_back() -> None:
    before = sys.getswitchinterval()
    seen = []
    with Behind(lambda _: seen.append(sys.getswitchinterval())) as writer:
        for item in ahead(range(3)):
            writer.put(item)
    assert seen and max(seen) <= SWITCH_INTERVAL and sys.getswitchinterval() == before
