"""What a tokenised sentence is to every room of rerank: a sequence of words, split on whitespace."""

from __future__ import annotations

from collections.abc import Sequence

Tokens = Sequence[str]
Pair = tuple[Tokens, Tokens]  # (source tokens, target or hypothesis tokens)
