"""Devices: each kind of work takes the path the device's measurements chose, unless the environment says
otherwise."""

from __future__ import annotations

import pytest
from tiny_models import tiny_config, tiny_model

from rerank.errors import RerankError
from rerank.models.device import PATH_VARIABLE, faster_path
from rerank.models.seq2seq import reference_path


def test_the_measured_faster_path_per_device() -> None:
    for work in ("training", "scoring", "search"):
        for architecture in ("encdec", "rnnsearch"):
            assert faster_path("cpu", work, architecture) == "fast"
            assert faster_path("mps", work, architecture) == "reference"  # not measured: the device-neutral path
    assert [faster_path("cuda", work, "encdec") for work in ("training", "scoring", "search")] == ["reference"] * 3
    assert [faster_path("cuda", work, "rnnsearch") for work in ("training", "scoring", "search")] == \
        ["fast", "reference", "reference"]


def test_the_environment_overrides_the_measured_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATH_VARIABLE, "reference")
    assert faster_path("cpu", "scoring", "rnnsearch") == "reference"
    model = tiny_model(tiny_config())
    assert model.uses_reference("search")
    with reference_path(model, on=False):  # the model's own setting wins
        assert not model.uses_reference("search")
    monkeypatch.setenv(PATH_VARIABLE, "fastest")
    with pytest.raises(RerankError, match="RERANK_PATH='fastest': expected fast or reference"):
        faster_path("cpu", "scoring", "rnnsearch")
