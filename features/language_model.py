"""An n-gram language model feature through KenLM, scored as Moses' KENLM feature scores it."""

from __future__ import annotations

import gzip
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import FormatError, RerankError
from rerank.formats.tokens import Pair

LN_10 = math.log(10.0)


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
        if not os.path.exists(config.path):
            raise RerankError(f"{config.path}: language model not found (feature {config.name})")
        options = kenlm.Config()
        options.show_progress = False
        try:
            self.model = kenlm.Model(config.path, options)
        except (OSError, RuntimeError) as e:
            reason, offset = _kenlm_reason(e)
            lineno = _line_at(config.path, offset) if offset is not None else None
            raise FormatError(config.path, lineno, f"an ARPA or KenLM binary language model (feature {config.name})",
                              got=reason) from None

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        model = self.model
        values = np.empty((len(pairs), self.dims))
        for i, (_, hypothesis) in enumerate(pairs):
            values[i, 0] = model.score(" ".join(hypothesis), bos=True, eos=True) * LN_10
            if self.config.oov:
                values[i, 1] = sum(word not in model for word in hypothesis)
        return values


def _kenlm_reason(error: Exception) -> tuple[str, int | None]:
    """KenLM's message without its wrapper and C++ source location, and the byte offset it names."""
    text = " ".join(str(error).split()) or type(error).__name__
    inner = re.fullmatch(r"Cannot read model '.*?' \((.*)\)", text)
    reason = inner.group(1) if inner else text
    reason = re.sub(r"^\S+:\d+ in .*? threw \w+( because `[^']*')?\.\s*", "", reason)
    offset = re.search(r"\s*Byte: (\d+)$", reason)
    if offset is None:
        return reason, None
    return reason[:offset.start()], int(offset.group(1))


def _line_at(path: str, offset: int) -> int | None:
    """The 1-based line of a text (or gzipped text) file that holds byte ``offset``."""
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            return f.read(max(offset - 1, 0)).count(b"\n") + 1
    except (OSError, EOFError):
        return None
