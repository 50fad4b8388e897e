"""Neural translation model features: ln p(hypothesis | source) under an RNN encoder-decoder or RNNsearch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import ConfigError
from rerank.formats.tokens import Pair
from rerank.models.config import DEFAULT_LABELS, read_model_config


class NeuralTranslationModel:
    """ln p(hypothesis | source), ``</s>`` included, by forced decoding (Cho et al. 2014, Sec. 4.1 and 4.2).

    The label is ``RNN0`` for an encoder-decoder (``architecture: encdec``) and ``RNNsearch0`` for
    RNNsearch unless ``name`` says otherwise. The source sentence is encoded once for all its
    hypotheses. Unset sizes keep the defaults of :class:`rerank.search.scoring.ScoringConfig`.
    """

    @dataclass(frozen=True)
    class Config:
        model: str  # model directory written by ``rerank train``
        name: str | None = None
        max_tokens: int | None = None  # padded target tokens per batch
        window: int | None = None  # hypotheses sorted and scored together
        device: str = "cpu"

    needs_source = True

    @staticmethod
    def label(config: Config) -> str:
        """``name``, or the label of the model's architecture (read from its config.yaml, without torch)."""
        return config.name or DEFAULT_LABELS[read_model_config(config.model).architecture]
    dims = 1

    def __init__(self, config: Config):
        from rerank.models.device import torch_device
        from rerank.search.scoring import Scorer, ScoringConfig

        try:
            scoring = ScoringConfig(**{key: value for key in ("max_tokens", "window")
                                       if (value := getattr(config, key)) is not None})
        except ValueError as e:
            raise ConfigError(f"nmt feature ({config.model}): {e}") from None
        self.config = config
        self.scorer = Scorer.load(config.model, torch_device(config.device), scoring)
        self.name = config.name or DEFAULT_LABELS[self.scorer.model.config.architecture]

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        return np.fromiter(self.scorer.score(pairs), dtype=np.float64, count=len(pairs)).reshape(-1, 1)
