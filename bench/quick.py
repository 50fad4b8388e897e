"""Every benchmark's quick mode: ``--quick`` runs it at tiny sizes, to check that it still runs (its figures
are not to quote). The test suite runs each benchmark so (tests/integration/test_benchmarks.py), so that a
change of the code it calls breaks a test rather than a run on another machine months later."""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def parse_args(parser: argparse.ArgumentParser, quick: dict[str, Any],
               argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``parser``'s arguments, with a ``--quick`` option whose defaults are ``quick`` (options given on the
    command line still win)."""
    sizes = ", ".join(f"--{name.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                      for name, v in quick.items())
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny sizes ({sizes or 'as it is'}): to check that it runs, not to quote")
    args = list(sys.argv[1:] if argv is None else argv)
    if "--quick" in args:
        parser.set_defaults(**quick)
    return parser.parse_args(args)


def first_sentences(nbest: Path, sentences: int, out: Path) -> Path:
    """The lines of ``nbest``'s first ``sentences`` sentences (ids 0 .. sentences - 1), gzipped to ``out``."""
    with gzip.open(nbest, "rb") as source, gzip.open(out, "wb") as target:
        for line in source:
            if int(line.split(b"|||", 1)[0]) >= sentences:
                break
            target.write(line)
    return out
