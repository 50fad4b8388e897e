"""The two architectures by name, and a model built from its configuration."""

from __future__ import annotations

from rerank.models.config import ModelConfig
from rerank.models.encdec import EncoderDecoder
from rerank.models.rnnsearch import RNNSearch
from rerank.models.seq2seq import Seq2Seq

MODELS: dict[str, type[Seq2Seq]] = {"encdec": EncoderDecoder, "rnnsearch": RNNSearch}


def build_model(config: ModelConfig, src_vocab_size: int, trg_vocab_size: int) -> Seq2Seq:
    return MODELS[config.architecture](config, src_vocab_size, trg_vocab_size)
