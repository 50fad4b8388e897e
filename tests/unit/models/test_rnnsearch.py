"""RNNsearch: the location score's limit on the source length, an ensemble's the shortest of its members'."""

from __future__ import annotations

from tiny_models import tiny_config

from rerank.models.architectures import build_model
from rerank.models.ensemble import Ensemble


def test_the_location_score_limits_the_source_length() -> None:
    location = build_model(tiny_config("rnnsearch", score="location", max_source_length=12), 20, 20)
    shorter = build_model(tiny_config("rnnsearch", score="location", max_source_length=9), 20, 20)
    additive = build_model(tiny_config("rnnsearch"), 20, 20)
    assert location.max_source_length() == 12
    assert additive.max_source_length() is None
    assert build_model(tiny_config("encdec"), 20, 20).max_source_length() is None
    assert Ensemble([location, additive, shorter]).max_source_length() == 9
