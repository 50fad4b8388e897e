"""The encoder-decoder: its decoder states by one call of ``torch.nn.GRU`` (cuDNN's kernel on a GPU) equal the
step-by-step ones."""

from __future__ import annotations

import torch
from tiny_models import tiny_config, tiny_model

from rerank.models.batching import pad
from rerank.models.encdec import EncoderDecoder
from rerank.models.seq2seq import shift_right


def test_decoder_states_by_one_gru_call_equal_the_steps() -> None:
    model = tiny_model(tiny_config("encdec"))
    assert isinstance(model, EncoderDecoder)
    src, src_len = pad([[5, 6, 7, 3], [8, 3]])
    trg, _ = pad([[9, 10, 11, 12, 3], [13, 3]])
    state = model.encode(src, src_len)
    embedded = model.embed(shift_right(trg))
    gates_c, _ = model._source_parts(state)
    whole, looped = model.states_whole(state, embedded), model.states_looped(state, embedded, gates_c)
    assert whole.shape == looped.shape == (2, 5, 16)
    assert torch.allclose(whole, looped, rtol=0, atol=1e-12)
