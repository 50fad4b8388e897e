"""The progress bar: its line, its summary, and where it writes."""

from __future__ import annotations

import io

import pytest

from rerank.progress import ProgressBar, duration


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("seconds,text", [(0, "0m00s"), (59.6, "1m00s"), (3 * 3600 + 62, "3h01m02s"),
                                          (float("inf"), "?"), (float("nan"), "?")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_bar_rate_and_eta() -> None:
    bar = ProgressBar("pairs", 1000, stream=io.StringIO())
    bar.done = 250
    line = bar.describe(bar.start + 10)
    assert line == f"[{'#' * 8}{'-' * 22}] 25.0% 250/1,000 pairs, 25 pairs/s, ETA 0m30s"
    assert ProgressBar("pairs", None, stream=io.StringIO()).describe(0) == "0 pairs, 0 pairs/s"


def test_a_terminal_gets_a_bar_redrawn_in_place_and_a_summary() -> None:
    stream = Terminal()
    bar = ProgressBar("pairs", 3, stream=stream, interval=0)
    assert list(bar.track("abc")) == ["a", "b", "c"]
    summary = bar.close()
    assert stream.getvalue().count("\r") == 4 and stream.getvalue().endswith("\n")
    assert summary.startswith("3 pairs in 0m00s, ")


def test_batches_count_their_items() -> None:
    bar = ProgressBar("pairs", 5, stream=io.StringIO())
    assert list(bar.track([[1, 2], [3, 4, 5]], len)) == [[1, 2], [3, 4, 5]]
    assert bar.done == 5


def test_a_log_file_gets_lines_now_and_then(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    bar = ProgressBar("pairs", 2, stream=stream, interval=0)
    with caplog.at_level("INFO", logger="rerank.progress"):
        list(bar.track([1, 2]))
        bar.close()
    assert stream.getvalue() == "" and len(caplog.records) == 2 and "100.0% 2/2 pairs" in caplog.records[-1].message


def test_disabled_shows_nothing_but_counts(caplog: pytest.LogCaptureFixture) -> None:
    stream = Terminal()
    bar = ProgressBar("pairs", 2, stream=stream, interval=0, enabled=False)
    with caplog.at_level("INFO", logger="rerank.progress"):
        list(bar.track([1, 2]))
        assert bar.close().startswith("2 pairs")
    assert stream.getvalue() == "" and not caplog.records
