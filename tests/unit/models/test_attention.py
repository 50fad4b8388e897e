"""Attention weights: every row sums to 1 and padding gets nothing, for every score, window and
decoder style; local windows stay inside the sentence; padding never changes a weight."""

from __future__ import annotations

import itertools

import pytest
import torch
from tiny_models import SCORES, WINDOWS, tiny_config, tiny_model

from rerank.models.attention import Attention
from rerank.models.batching import pad
from rerank.models.config import AttentionConfig
from rerank.models.seq2seq import shift_right
from rerank.models.vocab import EOS_ID

SOURCES = [[5, 6, 7, 8, 9, 10, 11, 12, EOS_ID], [13, EOS_ID], [EOS_ID], [14, 15, 16, 17, EOS_ID]]
TARGETS = [[4, 5, 6, EOS_ID], [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, EOS_ID], [18, EOS_ID], [5, EOS_ID]]
STYLES = [("bahdanau", False), ("luong", False), ("luong", True)]
WIDTH = 2



def teacher_forced_attention(model, sources: list[list[int]], targets: list[list[int]]) -> torch.Tensor:
    src, src_len = pad(sources)
    trg, _ = pad(targets)
    with torch.inference_mode():
        _, attention = model.teacher_forced(model.encode(src, src_len), shift_right(trg))
    return attention  # (B, T, S)


def stepwise_attention(model, sources: list[list[int]], targets: list[list[int]]) -> torch.Tensor:
    src, src_len = pad(sources)
    trg, _ = pad(targets)
    rows = []
    with torch.inference_mode():
        state = model.encode(src, src_len)
        for prev in shift_right(trg).T:
            _, state = model.step(prev, state)
            rows.append(state.attention)
    return torch.stack(rows, dim=1)  # (B, T, S)


def check_weights(attention: torch.Tensor, sources: list[list[int]], window: str) -> None:
    for b, source in enumerate(sources):
        weights = attention[b]  # (T, S)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[0], dtype=weights.dtype))
        assert (weights[:, len(source):] == 0).all(), "weight on padding"
        assert (weights >= 0).all()
        if window == "local-m":  # p_t = min(t, |x| - 1); nothing outside [p_t - D, p_t + D]
            for t in range(weights.shape[0]):
                centre = min(t, len(source) - 1)
                outside = [j for j in range(weights.shape[1]) if abs(j - centre) > WIDTH]
                assert (weights[t, outside] == 0).all()


@pytest.mark.parametrize("score, window, style", list(itertools.product(SCORES, WINDOWS, STYLES)),
                         ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x)))
def test_rows_sum_to_one_and_padding_gets_nothing(score: str, window: str, style: tuple[str, bool]) -> None:
    model = tiny_model(tiny_config("rnnsearch", style[0], style[1], score, window, width=WIDTH), src_vocab=20)
    forced = teacher_forced_attention(model, SOURCES, TARGETS)
    check_weights(forced, SOURCES, window)
    torch.testing.assert_close(stepwise_attention(model, SOURCES, TARGETS), forced)
    alone = teacher_forced_attention(model, SOURCES[:1], TARGETS[:1])  # no padding around it
    torch.testing.assert_close(alone[0], forced[0, : alone.shape[1], : alone.shape[2]])


def attention_module(window: str, score: str = "general") -> Attention:
    torch.manual_seed(0)
    config = AttentionConfig(score=score, window=window, width=WIDTH, hidden_size=8)
    return Attention(config, query_size=6, key_size=6).double()


@pytest.mark.parametrize("scale", [0.1, 1.0, 100.0])
def test_local_p_window_stays_inside_the_sentence(scale: float) -> None:
    """p_t = (|x| - 1) · sigmoid(...) lies in [0, |x| - 1], even for saturating queries, so the window
    always holds a word of the sentence and never padding."""
    attention = attention_module("local-p")
    src_len = torch.tensor([9, 4, 1, 2])
    queries = scale * torch.randn(4, 7, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    keys = torch.randn(4, 9, 6, dtype=torch.float64)
    pad_mask = torch.arange(9)[None, :] >= src_len[:, None]
    with torch.no_grad():
        distance = attention.window_distance(queries, src_len, first_step=0, length=9)  # (B, T, S)
        centre = torch.arange(9, dtype=torch.float64) - distance  # p_t, the same in every column
        _, weights = attention(queries, keys, attention.precompute(keys), pad_mask, src_len)
    assert (centre >= 0).all() and (centre <= (src_len - 1)[:, None, None]).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 7, dtype=torch.float64))
    assert (weights[pad_mask[:, None, :].expand_as(weights)] == 0).all()
    assert (weights[distance.abs() > WIDTH] == 0).all()


def test_local_p_weights_follow_a_gaussian_around_p_t() -> None:
    """Equal scores: α_tj ∝ exp(−(j − p_t)² / 2σ²), σ = D/2, in the window (Luong et al. 2015, Eq. 10)."""
    attention = attention_module("local-p", score="dot")
    src_len = torch.tensor([9])
    queries = torch.randn(1, 3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    keys = torch.zeros(1, 9, 6, dtype=torch.float64)  # every dot score 0
    with torch.no_grad():
        distance = attention.window_distance(queries, src_len, 0, 9)
        _, weights = attention(queries, keys, keys, torch.zeros(1, 9, dtype=torch.bool), src_len)
    sigma = WIDTH / 2
    expected = torch.exp(-distance.square() / (2 * sigma * sigma)).masked_fill(distance.abs() > WIDTH, 0.0)
    torch.testing.assert_close(weights, expected / expected.sum(-1, keepdim=True))


def test_local_m_follows_the_target_position_and_stops_at_the_last_word() -> None:
    attention = attention_module("local-m")
    src_len = torch.tensor([4, 8])
    queries = torch.randn(2, 3, 6, dtype=torch.float64)
    keys = torch.randn(2, 8, 6, dtype=torch.float64)
    pad_mask = torch.arange(8)[None, :] >= src_len[:, None]
    with torch.no_grad():
        _, weights = attention(queries, keys, attention.precompute(keys), pad_mask, src_len, first_step=5)
    for b, length in enumerate(src_len.tolist()):
        for t in range(3):
            centre = min(5 + t, length - 1)
            inside = [j for j in range(8) if abs(j - centre) <= WIDTH and j < length]
            assert weights[b, t, inside].sum().item() == pytest.approx(1.0)
            assert (weights[b, t, inside] > 0).all()
