"""Attention as alignments: hard alignments, UNK replacement from a dictionary or the source word, the attention
record, and outputs that need attention refused for a model without."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_config

from rerank.errors import RerankError
from rerank.models.architectures import build_model
from rerank.models.ensemble import Ensemble
from rerank.models.vocab import UNK
from rerank.search.alignment import attention_record, hard_alignment, replace_unknowns, require_attention
from rerank.search.beam import Hypothesis

# rows: target words then </s>; columns: source words then </s>
ATTENTION = torch.tensor([[0.1, 0.7, 0.1, 0.1],
                          [0.6, 0.1, 0.1, 0.2],
                          [0.1, 0.1, 0.2, 0.6],  # most on </s>: the heaviest word is 2
                          [0.0, 0.0, 0.1, 0.9]])


def hypothesis(tokens: list[int], attention: torch.Tensor | None = ATTENTION) -> Hypothesis:
    return Hypothesis(tokens=tokens, score=-3.0, normalised=-3.0, token_scores=[-1.0] * (len(tokens) + 1),
                      attention=attention)


def test_hard_alignment_links_each_target_word_to_its_heaviest_source_word() -> None:
    assert hard_alignment(hypothesis([7, 8, 9]), source_words=3) == [(0, 1), (1, 0), (2, 2)]
    assert hard_alignment(hypothesis([]), source_words=0) == []
    assert hard_alignment(hypothesis([7, 8, 9], attention=None), source_words=3) == []


def test_replace_unknowns_with_the_dictionary_or_the_source_word() -> None:
    source = ["the", "Zorglub", "sleeps"]
    words = [UNK, UNK, "dort"]
    assert replace_unknowns(words, source, ATTENTION, {}) == ["Zorglub", "the", "dort"]
    assert replace_unknowns(words, source, ATTENTION, {"the": "le"}) == ["Zorglub", "le", "dort"]
    assert replace_unknowns(["le", "chat"], source, ATTENTION, {}) == ["le", "chat"]
    assert replace_unknowns([UNK], [], ATTENTION[:, 3:], {}) == [UNK]  # nothing to copy from an empty source


def test_attention_record() -> None:
    record = attention_record(3, ["a", "b", "c"], ["x", "y", "z"], ATTENTION / 3 * 3)
    assert record["id"] == 3 and record["source"] == ["a", "b", "c", "</s>"] and record["target"][-1] == "</s>"
    assert record["attention"][0] == [0.1, 0.7, 0.1, 0.1]


def test_outputs_that_need_attention_are_refused_for_a_model_without() -> None:
    encdec, rnnsearch = build_model(tiny_config("encdec"), 20, 20), build_model(tiny_config("rnnsearch"), 20, 20)
    require_attention(rnnsearch, "--alignments")
    with pytest.raises(RerankError, match=r"--alignments needs attention weights, and an encdec model has none "
                                          r"\(use an rnnsearch model\)"):
        require_attention(encdec, "--alignments")
    assert Ensemble([encdec, rnnsearch]).has_attention  # its attention: the rnnsearch member's
    assert not Ensemble([encdec, encdec]).has_attention
