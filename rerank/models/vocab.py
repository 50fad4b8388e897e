"""Word-level vocabularies with a frequency shortlist and ``<unk>``, as Cho et al. and Bahdanau et al. use."""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Sequence

import numpy as np

from rerank.errors import FormatError
from rerank.formats.files import atomic_output, read_lines

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(4)
SRC_VOCAB, TRG_VOCAB = "vocab.src.txt", "vocab.trg.txt"  # the vocabularies' files in a model directory


class Vocabulary:
    """Tokens and their ids; ids 0-3 are ``<pad> <unk> <s> </s>``, then words by falling frequency."""

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {' '.join(SPECIALS)}")
        self.tokens = list(tokens)
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        if len(self.ids) != len(self.tokens):
            raise ValueError("a vocabulary lists every token once")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], size: int, min_count: int = 1) -> Vocabulary:
        """The ``size`` most frequent words seen at least ``min_count`` times (ties: alphabetical)."""
        counts: collections.Counter[str] = collections.Counter()
        for tokens in sentences:
            counts.update(tokens)
        for special in SPECIALS:
            counts.pop(special, None)
        ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls([*SPECIALS, *ranked[:size]])

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.ids

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of ``tokens`` (``<unk>`` for words outside the shortlist), without ``<s>`` or ``</s>``."""
        ids = self.ids
        return [ids.get(token, UNK_ID) for token in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``, stopping at ``</s>`` and skipping ``<pad>``."""
        words = []
        for i in ids:
            if i == EOS_ID:
                break
            if i != PAD_ID:
                words.append(self.tokens[i])
        return words

    def words(self, ids: Iterable[int]) -> list[str]:
        """The Moses tokens that ``ids`` spell (here one a token; a subword vocabulary joins pieces)."""
        return self.decode(ids)

    def word_of_piece(self, ids: Sequence[int]) -> np.ndarray:
        """For each of ``ids``, the position of the Moses token it belongs to (here: its own)."""
        return np.arange(len(ids))

    def save(self, path: str | os.PathLike[str]) -> None:
        with atomic_output(path) as out:
            for token in self.tokens:
                out.write(token + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Vocabulary:
        tokens = [line for _, line in read_lines(path)]
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise FormatError(str(path), 1, f"a vocabulary starting with {' '.join(SPECIALS)}, one token per line",
                              got=" ".join(tokens[: len(SPECIALS)]))
        for lineno, token in enumerate(tokens, 1):
            if not token or token.split() != [token]:
                raise FormatError(str(path), lineno, "one token (no spaces) per line", got=token)
        if len(set(tokens)) != len(tokens):
            raise FormatError(str(path), None, "every token once", got="duplicate tokens")
        return cls(tokens)
