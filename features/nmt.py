"""Neural translation model features: ln p(hypothesis | source) under an RNN encoder-decoder or RNNsearch,
read left to right or right to left, of one model or an ensemble; or the channel's ln p(source | hypothesis)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import ConfigError
from rerank.formats.tokens import Pair
from rerank.models.config import default_label, read_model_config

CHANNEL_LABEL = "Chan0"


class NeuralTranslationModel:
    """ln p(hypothesis | source), ``</s>`` included, by forced decoding (Cho et al. 2014, Sec. 4.1 and 4.2).

    ``model`` names a model directory, or several: an ensemble, whose ln p is the mean of its
    models' (the mean of their per-token log-probabilities: see :mod:`rerank.models.ensemble`).
    A right-to-left model (trained with ``reverse_target``) scores the hypothesis read backwards.
    With ``channel``, the model translates the other way (target to source, trained on the
    reversed corpus) and the feature is the noisy channel's ln p(source | hypothesis) (Yee et al.
    2019): each hypothesis is a source sentence for it, encoded once however often it occurs.
    With ``per_word``, a second value follows the sum: ln p per predicted token (the sum divided
    by the words of the predicted sentence plus one for ``</s>``); with ``sum: false`` as well, the
    per-word value alone (one weight; the form that cross-validation chose on Multi30k, see
    docs/results/cross-validation.md).

    The label is ``RNN0`` for an encoder-decoder, ``RNNsearch0`` for RNNsearch, ``R2L0`` for a
    right-to-left model and ``Chan0`` for a channel model, unless ``name`` says otherwise. Unset
    sizes keep the defaults of :class:`rerank.scoring.pairs.ScoringConfig`.
    """

    @dataclass(frozen=True)
    class Config:
        model: str | tuple[str, ...]  # model directory written by ``rerank train``, or several (an ensemble)
        name: str | None = None  # the label; none: RNN0, RNNsearch0, R2L0 or Chan0, from the model
        channel: bool = False  # ln p(source | hypothesis) under a target-to-source model
        per_word: bool = False  # also ln p per predicted token
        sum: bool = True  # the summed ln p; false (with per_word): the per-word value alone
        max_tokens: int | None = None  # padded target tokens per batch
        window: int | None = None  # hypotheses sorted and scored together
        device: str = "cpu"  # where the model runs: cpu, cuda or cuda:N
        precision: str = "fp32"  # or int8, on the CPU: the models' matrix multiplies with int8 weights

        @property
        def models(self) -> tuple[str, ...]:
            return (self.model,) if isinstance(self.model, str) else self.model

        def __post_init__(self) -> None:
            if not self.models:
                raise ValueError("model: name at least one model directory")
            if self.precision not in ("fp32", "int8"):
                raise ValueError(f"precision: fp32 or int8, not {self.precision!r}")
            if not self.sum and not self.per_word:
                raise ValueError("sum: false leaves no value: give per_word: true with it")

    needs_source = True

    @staticmethod
    def label(config: Config) -> str:
        """``name``, or the label of the model's kind (read from its config.yaml, without torch)."""
        if config.name:
            return config.name
        return CHANNEL_LABEL if config.channel else default_label(read_model_config(config.models[0]))

    def __init__(self, config: Config):
        from rerank.models.device import torch_device
        from rerank.scoring.pairs import EnsembleScorer, Scorer, ScoringConfig

        try:
            scoring = ScoringConfig(**{key: value for key in ("max_tokens", "window", "precision")
                                       if (value := getattr(config, key)) is not None})
        except ValueError as e:
            raise ConfigError(f"nmt feature ({', '.join(config.models)}): {e}") from None
        self.config = config
        device = torch_device(config.device)
        self.scorers = [Scorer.load(model, device, scoring) for model in config.models]
        first = self.scorers[0]
        for model, scorer in zip(config.models[1:], self.scorers[1:], strict=True):
            if scorer.model.config.reverse_target != first.model.config.reverse_target:
                raise ConfigError(f"nmt feature: {model} and {config.models[0]} read targets in different "
                                  "directions: an ensemble's models must agree")
        self.scorer = first if len(self.scorers) == 1 else EnsembleScorer(self.scorers)
        self.name = self.label(config)
        self.dims = int(config.sum) + int(config.per_word)

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        if self.config.channel:
            pairs = [(hypothesis, source) for source, hypothesis in pairs]
        total = np.fromiter(self.scorer.score(pairs), dtype=np.float64, count=len(pairs))
        if not self.config.per_word:
            return total.reshape(-1, 1)
        tokens = np.fromiter((len(predicted) + 1 for _, predicted in pairs), dtype=np.float64, count=len(pairs))
        return np.stack([total, total / tokens] if self.config.sum else [total / tokens], axis=1)
