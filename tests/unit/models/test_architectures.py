"""What a model can do is declared by its class: attention weights (alignments, UNK replacement) and a limit on
the source length; an ensemble's come from its members."""

from __future__ import annotations

import pytest

from rerank.errors import RerankError
from rerank.models.architectures import MODELS, build_model
from rerank.models.config import AttentionConfig, ModelConfig
from rerank.models.ensemble import Ensemble
from rerank.search.alignment import require_attention


def tiny(architecture: str, **attention: object) -> ModelConfig:
    return ModelConfig(architecture=architecture, embedding_size=8, hidden_size=8, maxout_size=4,  # type: ignore[arg-type]
                       attention=AttentionConfig(hidden_size=8, **attention))  # type: ignore[arg-type]


def test_each_architecture_declares_its_attention() -> None:
    assert {name: kind.has_attention for name, kind in MODELS.items()} == {"encdec": False, "rnnsearch": True}


def test_outputs_that_need_attention_are_refused_for_a_model_without() -> None:
    encdec, rnnsearch = build_model(tiny("encdec"), 20, 20), build_model(tiny("rnnsearch"), 20, 20)
    require_attention(rnnsearch, "--alignments")
    with pytest.raises(RerankError, match=r"--alignments needs attention weights, and an encdec model has none "
                                          r"\(use an rnnsearch model\)"):
        require_attention(encdec, "--alignments")
    assert Ensemble([encdec, rnnsearch]).has_attention  # its attention: the rnnsearch member's
    assert not Ensemble([encdec, encdec]).has_attention


def test_the_location_score_limits_the_source_length() -> None:
    location = build_model(tiny("rnnsearch", score="location", max_source_length=12), 20, 20)
    shorter = build_model(tiny("rnnsearch", score="location", max_source_length=9), 20, 20)
    additive = build_model(tiny("rnnsearch"), 20, 20)
    assert location.max_source_length() == 12
    assert additive.max_source_length() is None and build_model(tiny("encdec"), 20, 20).max_source_length() is None
    assert Ensemble([location, additive, shorter]).max_source_length() == 9
