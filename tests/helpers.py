"""Plain helpers for the tests: copying the head of a file, reading a file whatever its compression, and
finding what an atomic write left behind."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path


def head(path: Path, lines: int, out: Path) -> Path:
    """Copy the first ``lines`` lines of ``path`` to ``out``."""
    with open(path, "rb") as f:
        out.write_bytes(b"".join(itertools.islice(f, lines)))
    return out


def content(path: Path) -> bytes:
    """A file's bytes, gunzipped when it ends in .gz."""
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def leftovers(directory: Path) -> list[str]:
    """Temporary files an atomic write would leave behind in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))
