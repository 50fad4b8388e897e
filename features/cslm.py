"""A continuous-space language model feature (CSLM; Cho et al. 2014, Sec. 4.1.2): ln p(hypothesis) under a
feed-forward n-gram network over a shortlist, completed by a back-off n-gram model (see rerank.models.cslm).

::

    - {kind: cslm, model: runs/cslm, lm: ../shared/data/moses-multi30k/lm/train.fr.4.arpa}   # CSLM0

``lm`` is the back-off model's ARPA file (.gz allowed; KenLM gives its probabilities, and its structure
makes the shortlist's mass cheap): every word outside the shortlist gets its probability, a word it does
not know either its ``<unk>`` probability. The value is in natural log, ``</s>`` included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import FormatError, RerankError
from rerank.features.language_model import LanguageModel
from rerank.formats.arpa import read_arpa_structure
from rerank.formats.tokens import Pair


class ContinuousSpaceLM:
    """ln p(hypothesis) under a CSLM and its back-off model, all n-grams of a call scored together."""

    @dataclass(frozen=True)
    class Config:
        model: str  # a CSLM directory written by rerank train
        lm: str  # the back-off model: an ARPA file
        name: str = "CSLM0"  # the feature's label in the n-best list
        device: str = "cpu"  # where the model runs: cpu, cuda or cuda:N

    needs_source = False
    dims = 1

    @staticmethod
    def label(config: Config) -> str:
        return config.name

    def __init__(self, config: Config):
        from rerank.models.cslm import CSLM, BackoffLM, load_cslm_net  # torch, when the feature is built
        from rerank.models.device import torch_device

        self.name = config.name
        kenlm_model = LanguageModel(LanguageModel.Config(path=config.lm, name=config.name)).model
        net, vocab = load_cslm_net(config.model, torch_device(config.device))
        try:
            structure = read_arpa_structure(config.lm, keep=vocab.ids.__contains__)
        except FormatError as e:
            raise FormatError(e.path, e.lineno, f"{e.expected}: the {config.name} feature reads the back-off "
                              "structure of an ARPA text file (a KenLM binary file does not do)", got=e.got) from None
        if structure.order != kenlm_model.order:  # a binary file beside an ARPA of another model, say
            raise RerankError(f"{config.lm}: KenLM reads a {kenlm_model.order}-gram model, the ARPA text a "
                              f"{structure.order}-gram (feature {config.name})")
        self.model = CSLM(net, vocab, BackoffLM(kenlm_model, structure, vocab.tokens))

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        return self.model.score([hypothesis for _, hypothesis in pairs]).reshape(-1, 1)
