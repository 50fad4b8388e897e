"""Length features: Moses' word penalty, and Cho et al.'s count of words outside a shortlist."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import ConfigError
from rerank.formats.files import read_lines
from rerank.formats.tokens import Pair

WORD_START = "\u2581"  # what starts a word's first piece in a sentencepiece vocabulary


class WordPenalty:
    """−(number of target words), exactly Moses' ``WordPenalty``."""

    @dataclass(frozen=True)
    class Config:
        name: str = "WP1"  # the feature's label in the n-best list

    needs_source = False

    @staticmethod
    def label(config: Config) -> str:
        return config.name
    dims = 1

    def __init__(self, config: Config):
        self.name = config.name

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        return -np.array([[len(hypothesis)] for _, hypothesis in pairs], dtype=np.float64).reshape(-1, 1)


class UnknownWordCount:
    """The number of target words outside a vocabulary shortlist (the "WP" of Cho et al. 2014, Sec. 4.1).

    The shortlist is either a vocabulary file (one word per line, first column; a model's
    target vocabulary, say) or the ``shortlist`` most frequent words of a ``corpus``.
    """

    @dataclass(frozen=True)
    class Config:
        name: str = "UNK1"  # the feature's label in the n-best list
        vocab: str | None = None  # the shortlist: a word list (first column), e.g. a model's vocab.trg.txt
        corpus: str | None = None  # or text whose most frequent words are the shortlist
        shortlist: int = 15000  # words of corpus in the shortlist

        def __post_init__(self) -> None:
            if (self.vocab is None) == (self.corpus is None):
                raise ValueError("give exactly one of 'vocab' (a word list) or 'corpus' (text to count words in)")
            if self.shortlist < 1:
                raise ValueError(f"shortlist must be positive, got {self.shortlist}")

    needs_source = False

    @staticmethod
    def label(config: Config) -> str:
        return config.name
    dims = 1

    def __init__(self, config: Config):
        self.name = config.name
        self.words = self._words(config)
        if not self.words:
            raise ConfigError(f"{config.vocab or config.corpus}: empty vocabulary for feature {config.name}")
        if 2 * sum(word.startswith(WORD_START) for word in self.words) > len(self.words):
            raise ConfigError(f"{config.vocab or config.corpus}: feature {config.name}: expected words, got the "
                              f"pieces of a subword model ({WORD_START}...), against which every word is known: give "
                              "corpus: the target training text (its most frequent words are the shortlist)")

    @staticmethod
    def _words(config: Config) -> frozenset[str]:
        if config.vocab is not None:
            return frozenset(line.split()[0] for _, line in read_lines(config.vocab) if line.strip())
        assert config.corpus is not None  # Config has a vocab or a corpus
        counts: collections.Counter[str] = collections.Counter()
        for _, line in read_lines(config.corpus):
            counts.update(line.split())
        return frozenset(word for word, _ in counts.most_common(config.shortlist))

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        known = self.words.__contains__
        return np.array([len(hypothesis) - sum(map(known, hypothesis)) for _, hypothesis in pairs],
                        dtype=np.float64).reshape(-1, 1)
