"""The documentation's figures come from runs: the sample table in docs/results/sample.md is what
`rerank experiment configs/experiments/sample.yaml` (scripts/example.sh) writes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rerank.cli import main

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "results" / "sample.md"


def table_rows(text: str) -> list[list[str]]:
    """The cells of a markdown table's rows (header and separator included), stripped."""
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]


def documented_table() -> list[list[str]]:
    text = PAGE.read_text(encoding="utf-8")
    start, end = text.index("<!-- sample table"), text.index("<!-- end of the sample table -->")
    return table_rows(text[start:end])


def test_the_page_holds_a_table_of_every_row() -> None:
    rows = documented_table()
    assert rows[0][0] == "system" and len(rows) >= 9
    assert {len(row) for row in rows} == {len(rows[0])}


@pytest.mark.slow
def test_the_sample_table_is_what_the_example_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The experiment of scripts/example.sh, run afresh (about a minute on 2 cores), writes the documented table."""
    experiment = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text(encoding="utf-8"))
    experiment["output_dir"] = str(tmp_path / "sample")
    config = tmp_path / "sample.yaml"
    config.write_text(yaml.safe_dump(experiment), encoding="utf-8")
    monkeypatch.chdir(REPO)  # the config's paths are relative to the repository root
    assert main(["-q", "experiment", str(config)]) == 0
    written = table_rows((tmp_path / "sample" / "results.md").read_text(encoding="utf-8"))
    assert written == documented_table()
