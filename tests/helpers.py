"""Plain helpers for the tests: reading a file whatever its compression, finding what an atomic write
left behind, and truncating a language model."""

from __future__ import annotations

import gzip
from pathlib import Path


def content(path: Path) -> bytes:
    """A file's bytes, gunzipped when it ends in .gz."""
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def leftovers(directory: Path) -> list[str]:
    """Temporary files an atomic write would leave behind in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def cut_in_unigrams(arpa: bytes) -> bytes:
    """An ARPA file cut off after a line halfway through its 1-grams, as a failed copy leaves it."""
    start, end = arpa.index(b"\\1-grams:"), arpa.index(b"\\2-grams:")
    return arpa[:arpa.index(b"\n", (start + end) // 2) + 1]
