"""Forced-decoding scores of both architectures, every decoder style and every attention score and window:
padding never changes a score, a batch scores as its sentences do one by one, the score is the sum of the
step-by-step log-probabilities, and repeated decoder states score as freshly encoded ones."""

from __future__ import annotations

import itertools

import pytest
import torch
from tiny_models import DECODERS, SCORES, WINDOWS, tiny_config, tiny_model

from rerank.models.batching import pad
from rerank.models.config import ModelConfig
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import BOS_ID, EOS_ID, PAD_ID

# Source and target ids (vocabularies of 30 and 25), each ending in </s>; lengths 1 to 12.
SOURCES = [[5, 6, 7, 8, 9, 10, 11, EOS_ID], [12, EOS_ID], [EOS_ID], [13, 14, 15, 16, EOS_ID],
           [17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, EOS_ID], [7, 7, 7, EOS_ID]]
TARGETS = [[4, 5, 6, EOS_ID], [7, 8, 9, 10, 11, 12, 13, 14, 15, EOS_ID], [EOS_ID], [16, EOS_ID],
           [17, 18, 19, 20, 21, 22, 23, 24, 4, 5, 6, 7, EOS_ID], [8, 8, EOS_ID]]


def every_model() -> list[tuple[str, ModelConfig]]:
    """The encoder-decoder, and RNNsearch with every decoder style x attention score x window."""
    configs = [("encdec", tiny_config("encdec"))]
    for (architecture, decoder, feeding), score, window in itertools.product(DECODERS[1:], SCORES, WINDOWS):
        name = f"{decoder}{'-feed' if feeding else ''}-{score}-{window}"
        configs.append((name, tiny_config(architecture, decoder, feeding, score, window)))
    return configs


MODELS = every_model()



@pytest.fixture(scope="module", params=MODELS, ids=[name for name, _ in MODELS])
def model(request: pytest.FixtureRequest) -> Seq2Seq:
    return tiny_model(request.param[1])  # float64, so that equal means equal to 1e-10


def forced(model: Seq2Seq, sources: list[list[int]], targets: list[list[int]], extra_padding: int = 0) -> torch.Tensor:
    """ln p (B,) by ``model.score``, with ``extra_padding`` columns of <pad> after the longest source and target."""
    src, src_len = pad(sources)
    trg, _ = pad(targets)
    src = torch.nn.functional.pad(src, (0, extra_padding), value=PAD_ID)
    trg = torch.nn.functional.pad(trg, (0, extra_padding), value=PAD_ID)
    with torch.inference_mode():
        return model.score(model.encode(src, src_len), trg)


def stepwise(model: Seq2Seq, source: list[int], target: list[int]) -> float:
    """Σ ln p(y_t | y_<t, x) from a decode of one word at a time with ``model.step``."""
    src, src_len = pad([source])
    total = 0.0
    with torch.inference_mode():
        state, prev = model.encode(src, src_len), torch.tensor([BOS_ID])
        for word in target:
            log_probs, state = model.step(prev, state)
            total += float(log_probs[0, word])
            prev = torch.tensor([word])
    return total


def test_padding_never_changes_a_score(model: Seq2Seq) -> None:
    tight = forced(model, SOURCES, TARGETS)
    for extra in (1, 4):
        torch.testing.assert_close(forced(model, SOURCES, TARGETS, extra_padding=extra), tight, rtol=0, atol=1e-10)


def test_batched_equals_one_by_one(model: Seq2Seq) -> None:
    alone = torch.cat([forced(model, [s], [t]) for s, t in zip(SOURCES, TARGETS, strict=True)])
    torch.testing.assert_close(forced(model, SOURCES, TARGETS), alone, rtol=0, atol=1e-10)


def test_score_is_the_sum_of_stepwise_log_probs(model: Seq2Seq) -> None:
    steps = torch.tensor([stepwise(model, s, t) for s, t in zip(SOURCES, TARGETS, strict=True)], dtype=torch.float64)
    torch.testing.assert_close(forced(model, SOURCES, TARGETS), steps, rtol=0, atol=1e-10)


def test_repeated_states_score_as_freshly_encoded_sources(model: Seq2Seq) -> None:
    order = [4, 0, 0, 2, 4, 4, 1]
    src, src_len = pad(SOURCES)
    trg, _ = pad([TARGETS[i] for i in order])
    with torch.inference_mode():
        repeated = model.score(model.encode(src, src_len).index_select(torch.tensor(order)), trg)
    fresh = forced(model, [SOURCES[i] for i in order], [TARGETS[i] for i in order])
    torch.testing.assert_close(repeated, fresh, rtol=0, atol=1e-10)


def test_a_score_is_a_log_probability(model: Seq2Seq) -> None:
    scores = forced(model, SOURCES, TARGETS)
    assert torch.isfinite(scores).all() and (scores < 0).all()
