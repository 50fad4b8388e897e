"""An n-gram language model feature through KenLM, scored as Moses' KENLM feature scores it."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import FormatError, RerankError, log_once
from rerank.formats.arpa import LN_10
from rerank.formats.files import open_binary
from rerank.formats.tokens import Pair

BINARY_ADVICE = "Loading the LM will be faster if you build a binary file."
logger = logging.getLogger(__name__)


class LanguageModel:
    """ln p(hypothesis) under an ARPA or KenLM binary model, ``</s>`` included.

    KenLM returns log10; Moses multiplies by ln 10, and so do we, so the value equals Moses'
    ``LM0`` on the same model. With ``oov: true`` a second value counts the words the model
    does not know, as Moses' ``KENLM ... oov-feature=1`` does.
    """

    @dataclass(frozen=True)
    class Config:
        path: str  # the language model: ARPA (plain or gzipped) or KenLM binary
        name: str = "LM1"  # the feature's label in the n-best list
        oov: bool = False  # a second value: the count of words the model does not know

    needs_source = False

    @staticmethod
    def label(config: Config) -> str:
        return config.name

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
            with stderr_lines() as printed:  # KenLM's C++ advice about ARPA files, said once, as ours
                self.model = kenlm.Model(config.path, options)
        except (OSError, RuntimeError) as e:
            reason, offset = _kenlm_reason(e)
            lineno = _line_at(config.path, offset, reason) if offset is not None else None
            raise FormatError(config.path, lineno, f"an ARPA or KenLM binary language model (feature {config.name})",
                              got=reason) from None

        for line in printed:
            if BINARY_ADVICE in line:
                log_once(logger, logging.INFO, "%s: an ARPA file loads faster once converted with KenLM's "
                         "build_binary", config.path)
            elif line.strip():
                log_once(logger, logging.WARNING, "%s: KenLM: %s", config.path, line.strip())

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
    reason = re.sub(r"^\S+:\d+ in .*? threw \w+( because `.*?')?\.\s*", "", reason)  # the condition may hold a '
    offset = re.search(r"\s*Byte: (\d+)$", reason)
    if offset is None:
        return reason, None
    return reason[:offset.start()], int(offset.group(1))


def _line_at(path: str, offset: int, reason: str) -> int | None:
    """The 1-based line of a text (or gzipped text) file that KenLM's byte ``offset`` names: the first byte of a
    token it could not parse, or else just past what it read (the next line's start, after a whole line)."""
    try:
        with open_binary(path) as f:
            return f.read(offset if reason.startswith("Could not parse ") else max(offset - 1, 0)).count(b"\n") + 1
    except (OSError, EOFError, RerankError):
        return None


@contextlib.contextmanager
def stderr_lines() -> Iterator[list[str]]:
    """Collect what C++ code writes to file descriptor 2 during the block (the list is filled at its end)."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines += capture.read().decode("utf-8", "replace").splitlines()
