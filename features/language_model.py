"""An n-gram language model feature through KenLM, scored as Moses' KENLM feature scores it."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from features import register_feature
from features.base import Pair
from rerank.errors import RerankError

LN_10 = math.log(10.0)


@register_feature("kenlm")
class LanguageModel:
    """ln p(hypothesis) under an ARPA or KenLM binary model, ``</s>`` included.

    KenLM returns log10; Moses multiplies by ln 10, and so do we, so the value equals Moses'
    ``LM0`` on the same model. With ``oov: true`` a second value counts the words the model
    does not know, as Moses' ``KENLM ... oov-feature=1`` does.
    """

    @dataclass(frozen=True)
    class Config:
        path: str
        name: str = "LM1"
        oov: bool = False

    needs_source = False

    def __init__(self, config: Config):
        import kenlm

        self.config = config
        self.name = config.name
        self.dims = 2 if config.oov else 1
        if not os.path.isfile(config.path):
            raise RerankError(f"{config.path}: language model not found (feature {config.name})")
        try:
            self.model = kenlm.Model(config.path)
        except (OSError, RuntimeError) as e:
            message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise RerankError(f"{config.path}: cannot read the language model (feature {config.name}): "
                              f"{message}") from None

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        model = self.model
        values = np.empty((len(pairs), self.dims))
        for i, (_, hypothesis) in enumerate(pairs):
            values[i, 0] = model.score(" ".join(hypothesis), bos=True, eos=True) * LN_10
            if self.config.oov:
                values[i, 1] = sum(word not in model for word in hypothesis)
        return values
