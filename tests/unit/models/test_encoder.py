"""The encoders: each sentence's annotations and final states are those it has alone (padding after it changes
nothing and reads as 0), the forward final state is at its last word and the backward one at its first."""

from __future__ import annotations

import pytest
import torch

from rerank.models.batching import pad
from rerank.models.encoder import DeepBidirectionalEncoder, RecurrentEncoder
from rerank.models.vocab import EOS_ID

SOURCES = [[5, 6, 7, 8, 9, EOS_ID], [12, EOS_ID], [13, 14, 15, 16, 17, 18, 19, EOS_ID]]
SIZE = 8  # units per direction


def check_alone_and_ends(encoder: torch.nn.Module, directions: int) -> None:
    """``encoder``'s outputs for the padded batch of SOURCES against each sentence alone, and its final states."""
    src, src_len = pad(SOURCES)
    with torch.no_grad():
        annotations, final = encoder(src, src_len)
        assert annotations.shape == (len(SOURCES), src.shape[1], directions * SIZE)
        assert final.shape == (directions, len(SOURCES), SIZE)
        for row, sentence in enumerate(SOURCES):
            alone, alone_final = encoder(torch.tensor([sentence]), torch.tensor([len(sentence)]))
            torch.testing.assert_close(annotations[row, : len(sentence)], alone[0], rtol=0, atol=1e-12)
            assert not annotations[row, len(sentence):].any()
            torch.testing.assert_close(final[:, row], alone_final[:, 0], rtol=0, atol=1e-12)
    for row, length in enumerate(src_len.tolist()):
        torch.testing.assert_close(final[0, row], annotations[row, length - 1, :SIZE])  # →h at the last word
        if directions == 2:
            torch.testing.assert_close(final[1, row], annotations[row, 0, SIZE:])  # ←h_1


def test_the_deep_encoder_ignores_padding_and_ends_at_each_sentence() -> None:
    torch.manual_seed(0)
    encoder = DeepBidirectionalEncoder(30, 12, SIZE, layer_norm=True, depth=2).double().eval()
    check_alone_and_ends(encoder, 2)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_gru_encoder_ignores_padding_and_ends_at_each_sentence(bidirectional: bool) -> None:
    torch.manual_seed(0)
    encoder = RecurrentEncoder(30, 12, SIZE, bidirectional, embedding_rank=4).double().eval()
    check_alone_and_ends(encoder, 2 if bidirectional else 1)


def test_word_dropout_acts_in_training_only() -> None:
    torch.manual_seed(0)
    encoder = RecurrentEncoder(30, 12, SIZE, True, word_dropout=0.5).double()
    src = torch.tensor([list(range(4, 30))])
    encoder.train()
    dropped = (encoder.embedded(src) == 0).all(-1)
    assert 0 < int(dropped.sum()) < src.shape[1]  # whole tokens, some of them
    encoder.eval()
    assert not (encoder.embedded(src) == 0).all(-1).any()
