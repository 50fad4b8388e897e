"""Copy the table that the main job wrote into the documentation, with the fingerprint of its inputs.

``bash scripts/example.sh`` (``rerank experiment configs/experiments/sample.yaml``) writes
``runs/sample/results.md``; this script puts its table into ``docs/results/sample.md``, between the
page's markers, and records in the first marker the SHA-256 of every file the experiment's config
names (the config itself, the sample's lists, sources, references, moses.ini, LM and phrase table,
and every file of the two model directories). ``tests/integration/test_docs.py`` checks that
fingerprint against the files as they are, so a change of the models or the data fails until the
page is made anew, and (a slow test) runs the experiment afresh and compares the tables cell by cell.

Run from the repository root, after the main job::

    python examples/sample_table.py
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG = Path("configs/experiments/sample.yaml")
PAGE = REPO / "docs" / "results" / "sample.md"
START = re.compile(r"<!-- sample table: written by rerank experiment (\S+?)(?:; inputs sha256 ([0-9a-f]{64}))? -->\n")
END = "<!-- end of the sample table -->"


def named_files(value: object) -> Iterator[Path]:
    """The files named by the strings of a config (relative to the repository root), directories walked; not
    the outputs (``output_dir``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "output_dir":
                yield from named_files(item)
    elif isinstance(value, list):
        for item in value:
            yield from named_files(item)
    elif isinstance(value, str) and (REPO / value).exists():
        path = REPO / value
        yield from sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def fingerprint(config: Path = CONFIG) -> str:
    """SHA-256 over the config and every file it names: their paths and their bytes."""
    digest = hashlib.sha256()
    files = [REPO / config, *named_files(yaml.safe_load((REPO / config).read_text(encoding="utf-8")))]
    for path in sorted(set(files)):
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def table(markdown: str) -> str:
    """The first markdown table of a text: its lines, the header and separator included."""
    lines = markdown.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "".join(lines[first:end])


def markers(page: str) -> tuple[re.Match[str], int]:
    """The page's first marker and where its last one starts."""
    start = START.search(page)
    if start is None or END not in page:
        raise ValueError(f"{PAGE}: expected the markers '<!-- sample table: written by ... -->' and '{END}'")
    return start, page.index(END)


def documented(page: str) -> tuple[str, str, str | None]:
    """The page's table, the config named in its first marker and the fingerprint recorded there."""
    start, end = markers(page)
    return page[start.end():end], start.group(1), start.group(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=REPO / "runs" / "sample" / "results.md",
                        help="the results the main job wrote (default runs/sample/results.md)")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    start, end = markers(page)
    marker = f"<!-- sample table: written by rerank experiment {CONFIG.as_posix()}; inputs sha256 {fingerprint()} -->\n"
    written = table(args.results.read_text(encoding="utf-8"))
    PAGE.write_text(page[:start.start()] + marker + written + page[end:], encoding="utf-8")
    print(f"{PAGE}: the table of {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
