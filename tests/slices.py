"""The slices of the real data in ``tests/data``: each file, the file under ``shared/data`` it is cut
from, and how it is cut (``tests/data/README.md`` lists them too).

Every slice keeps the original's lines byte for byte: the whole file, its first lines, a range of
its lines, the hypotheses of an n-best list's first sentences, or (for a language model) the
n-grams made of a few words, with the ``\\data\\`` counts fixed. A slice ending in ``.gz`` is
gzipped (without a time stamp, so that cutting again gives the same bytes).

Run from the repository root to cut them again from the real data beside the repository::

    python tests/slices.py                # shared/data beside the repository
    python tests/slices.py --data DIR

Where the real data is present, ``tests/unit/test_slices.py`` checks every slice against it.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers import content

TEST_DATA = Path(__file__).resolve().parent / "data"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

REGRESSION = "moses-regression-tests"
MERT_DATA = f"{REGRESSION}/tests/mert.extractor-txt/data"
BINARIZE = f"{REGRESSION}/tests/misc.binarize-compress-pt"
REORDERING = f"{REGRESSION}/models/lexicalized-reordering"
SENTENCES = 20  # of Multi30k val and test_2016_flickr
# the sentences tests/unit/features/test_language_model.py scores with the regression language models, whose slices
# keep the n-grams of these words
LM_SENTENCES = ["the european parliament", "resumption of the session", "mr president , this is a zzzunknown word",
                "", "&quot; quoted &quot;"]
LM_WORDS = frozenset(word for sentence in LM_SENTENCES for word in sentence.split()) | {"<s>", "</s>", "<unk>"}


@dataclass(frozen=True)
class Slice:
    """``path`` (under tests/data) is cut from ``origin`` (under shared/data) by ``how``:
    ``whole``, ``head`` (the first ``n`` lines), ``lines`` (lines ``n`` to ``last``, counted from 1),
    ``sentences`` (the n-best lines of sentences below ``n``) or ``arpa`` (the n-grams of ``LM_WORDS``)."""

    path: str
    origin: str
    how: str
    n: int = 0
    last: int = 0


SLICES = [
    *[Slice(f"{MERT_DATA}/nbest.{i}.gz", f"{MERT_DATA}/nbest.{i}.gz", "whole") for i in (1, 2)],
    *[Slice(f"{MERT_DATA}/nbest.{i}.gz", f"{MERT_DATA}/nbest.{i}.gz", "head", 100) for i in (3, 4, 5)],
    Slice(f"{MERT_DATA}/reference", f"{MERT_DATA}/reference", "whole"),
    *[Slice(f"{REGRESSION}/tests/mert.basic/data/{name}", f"{REGRESSION}/tests/mert.basic/data/{name}", "whole")
      for name in ("INIT", "SCORESTAT.txt")],
    *[Slice(f"{REGRESSION}/tests/{test}/moses.ini", f"{REGRESSION}/tests/{test}/moses.ini", "whole")
      for test in ("misc.binarize-compress-pt", "phrase.basic-surface-only", "phrase.lexicalized-reordering",
                   "phrase.nbest-with-alignment", "phrase.sparse-features")],
    *[Slice(f"{REGRESSION}/tests/{test}/truth/results.txt", f"{REGRESSION}/tests/{test}/truth/results.txt", "whole")
      for test in ("misc.binarize-compress-pt", "phrase.nbest-with-alignment")],
    Slice(f"{BINARIZE}/phrase-table.0-0.1.1.gz", f"{BINARIZE}/phrase-table.0-0.1.1.gz", "head", 200),
    Slice(f"{BINARIZE}/reordering-table.0-0.wbe-msd-bidirectional-fe.gz",
          f"{BINARIZE}/reordering-table.0-0.wbe-msd-bidirectional-fe.gz", "head", 200),
    Slice(f"{BINARIZE}/lm.en.arpa", f"{BINARIZE}/lm.en.arpa", "arpa"),
    Slice(f"{REGRESSION}/models/ptable-with-alignment/phrase-table",
          f"{REGRESSION}/models/ptable-with-alignment/phrase-table", "head", 100),
    Slice(f"{REORDERING}/phrase-table.0-0.gz", f"{REORDERING}/phrase-table.0-0.gz", "head", 200),
    Slice(f"{REORDERING}/reordering-table.msd-bidirectional-fe.0.5.0-0.gz",
          f"{REORDERING}/reordering-table.msd-bidirectional-fe.0.5.0-0.gz", "head", 200),
    Slice(f"{REORDERING}/europarl.lm", f"{REORDERING}/europarl.lm", "arpa"),
    Slice(f"{REGRESSION}/models/basic-surface-only/phrase-table.gz",
          f"{REGRESSION}/models/basic-surface-only/phrase-table.gz", "lines", 2001, 2100),
    *[Slice(f"multi30k/{short}.100best.gz", f"moses-multi30k/nbest/{split}.100best.gz", "sentences", SENTENCES)
      for short, split in (("test", "test_2016_flickr"), ("val", "val"))],
    *[Slice(f"multi30k/{short}.{lang}", f"multi30k/tok/{split}.lc.norm.tok.{lang}", "head", SENTENCES)
      for short, split in (("test", "test_2016_flickr"), ("val", "val")) for lang in ("en", "fr")],
    Slice("multi30k/test.1best", "moses-multi30k/nbest/test_2016_flickr.1best", "head", SENTENCES),
    Slice("multi30k/moses.ini", "moses-multi30k/model/moses.ini", "whole"),
    Slice("multi30k/phrase-table.gz", "moses-multi30k/model/phrase-table.gz", "head", 300),
]


def cut(piece: Slice, data: Path) -> bytes:
    """The text of ``piece`` (uncompressed) as cut from the real data in ``data``."""
    origin = data / piece.origin
    if piece.how == "arpa":
        return filter_arpa(content(origin), LM_WORDS)
    lines = content(origin).splitlines(keepends=True)
    if piece.how == "whole":
        return b"".join(lines)
    if piece.how == "head":
        return b"".join(lines[:piece.n])
    if piece.how == "lines":
        return b"".join(lines[piece.n - 1:piece.last])
    if piece.how == "sentences":
        return b"".join(itertools.takewhile(lambda line: int(line.split(b"|||")[0]) < piece.n, lines))
    raise ValueError(f"unknown cut {piece.how!r}")


def filter_arpa(arpa: bytes, words: frozenset[str]) -> bytes:
    """The ARPA file with only the n-grams whose words are all in ``words``, the counts of the
    ``\\data\\`` section fixed to match (in the original's layout); every other line is kept. For a
    sentence of those words every n-gram and context KenLM looks up is kept, so it scores the same."""
    lines = arpa.decode("utf-8").splitlines(keepends=True)
    kept: list[str] = []
    counts: dict[int, int] = {}
    order = 0
    for line in lines:
        header = re.fullmatch(r"\\(\d+)-grams:\n", line)
        if header:
            order = int(header.group(1))
            counts[order] = 0
        elif line.startswith("\\end\\"):
            order = 0
        elif order and line.strip():
            if not set(line.rstrip("\n").split("\t")[1].split(" ")) <= words:
                continue
            counts[order] += 1
        kept.append(line)

    def fixed(line: str) -> str:  # a count padded to a fixed width (SRILM's layout) keeps that width
        match = re.fullmatch(r"(ngram\s*(\d+)=)(\s*\d+)\n", line)
        if not match:
            return line
        count = str(counts[int(match.group(2))])
        return match.group(1) + (count.rjust(len(match.group(3))) if match.group(3)[0] == " " else count) + "\n"

    return "".join(fixed(line) for line in kept).encode("utf-8")


def write(piece: Slice, data: Path, out: Path = TEST_DATA) -> Path:
    """Cut ``piece`` into ``out``; a whole file is copied as it is, gzip and all."""
    path = out / piece.path
    path.parent.mkdir(parents=True, exist_ok=True)
    if piece.how == "whole":
        path.write_bytes((data / piece.origin).read_bytes())
    elif path.suffix == ".gz":
        with open(path, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed:
            packed.write(cut(piece, data))
    else:
        path.write_bytes(cut(piece, data))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="the real data (default: %(default)s)")
    args = parser.parse_args(argv)
    for piece in SLICES:
        path = write(piece, args.data)
        print(f"{path.relative_to(TEST_DATA)}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
