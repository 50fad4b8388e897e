"""The study's plan before its steps: the rows it tunes and the pools they tune on, which Moses list each split
uses, and the data checked against their sources first."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from rerank.config import from_dict
from rerank.errors import FormatError
from rerank.study.config import ExperimentConfig
from rerank.study.experiment import Experiment
from rerank.study.rows import ROWS

REPO = Path(__file__).resolve().parents[3]


def experiment(tmp_path: Path, **changes: Any) -> Experiment:
    """The sample study (configs/experiments/sample.yaml, absolute paths) into ``tmp_path``, with ``changes``."""
    data = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text(encoding="utf-8"))
    for section in ("moses", "dev", "test"):
        data[section] = {key: str(REPO / value) for key, value in data[section].items()}
    for key in ("encdec", "rnnsearch"):
        data[key] = str(REPO / data[key])
    data["output_dir"] = str(tmp_path / "run")
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return Experiment(from_dict(ExperimentConfig, data, "experiment.yaml"), source="experiment.yaml")


def test_the_sample_tunes_the_base_rows_on_moses_lists_and_the_union(tmp_path: Path) -> None:
    study = experiment(tmp_path)
    assert study.rows() == ROWS and study.union_pool() == "union"
    assert study.moses_list("dev") == str(REPO / "examples" / "data" / "val.100best.gz")


def test_with_moses_the_union_has_moses_features_and_moses_decodes_the_lists(tmp_path: Path) -> None:
    study = experiment(tmp_path, moses={"decoder": "moses", "nbest_size": 50}, consensus=True, list_sizes=[20],
                       right_to_left=str(REPO / "examples" / "models" / "rnnsearch"))
    rows = {row.key: row for row in study.rows()}
    assert study.union_pool() == "union-moses" and rows["union"].nbest == "union-moses"
    assert rows["union-consensus"].nbest == "union-moses-mbr" and rows["consensus"].nbest == "moses-mbr"
    assert {"plus-R2L0", "without-R2L0", "union-moses", "union-moses-consensus", "moses20", "moses20-alone"} <= \
        set(rows)
    assert "R2L0" in rows["extended"].features and "MBRbleu0" in rows["union-moses-consensus"].features
    assert study.moses_list("test") == str(tmp_path / "run" / "test.moses.50best")


def test_the_data_are_checked_against_their_sources(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rerank.study.experiment"):
        experiment(tmp_path).check_data()
    assert not caplog.records  # the sample's lists and references are tokenized alike
    source = tmp_path / "two.en"
    source.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"val.100best.gz:\d+: expected a sentence id below 2, the number of lines "
                                          r"of .*two.en"):
        experiment(tmp_path, dev={"source": str(source)}).check_data()


def test_references_of_another_split_are_warned_of_before_any_step(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    test_references = str(REPO / "examples" / "data" / "test.fr")  # as many lines as dev's
    with caplog.at_level(logging.WARNING, logger="rerank.study.experiment"):
        experiment(tmp_path, dev={"reference": test_references}).check_data()
    (record,) = caplog.records
    assert record.getMessage().startswith(f"{test_references} looks unrelated to ")
    assert "val.100best.gz" in record.getMessage()
