"""The progress bar (tqdm): it counts even when nothing is shown, and sums up in one line."""

from __future__ import annotations

import re

import pytest

from rerank.progress import progress_bar, summary


@pytest.mark.parametrize("enabled", [True, False])
def test_summary_counts_what_passed(enabled: bool, capsys: pytest.CaptureFixture[str]) -> None:
    bar = progress_bar("pairs", 10, enabled=enabled)
    for _ in range(4):
        bar.update(3)
    line = summary(bar)
    assert re.fullmatch(r"12 pairs in \d\d:\d\d, [\d,]+ pairs/s", line), line
    if not enabled:
        assert capsys.readouterr().err == ""


def test_an_unknown_total_is_fine() -> None:
    bar = progress_bar("sentences", None, enabled=False)
    bar.update(1500)
    assert summary(bar).startswith("1,500 sentences in ")
