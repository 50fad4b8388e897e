"""The architectures by name: each declares whether it has attention weights."""

from __future__ import annotations

from rerank.models.architectures import MODELS


def test_each_architecture_declares_its_attention() -> None:
    assert {name: kind.has_attention for name, kind in MODELS.items()} == {"encdec": False, "rnnsearch": True}
