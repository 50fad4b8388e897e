"""Copy the table that the main job wrote into the documentation, with the fingerprint of its inputs.

``bash scripts/example.sh`` (``rerank experiment configs/experiments/sample.yaml``) writes
``runs/sample/results.md``; this script puts its table into ``docs/results/sample.md``, between the
page's markers, and records in the first marker the SHA-256 of every file the experiment's config
names (the config itself, the sample's lists, sources, references, moses.ini, LM and phrase table,
and every file of the two model directories); it puts the run's times (``timings.json``, beside
``results.md``) between the page's time markers too. ``tests/integration/test_docs.py`` checks that
fingerprint against the files as they are, so a change of the models or the data fails until the
page is made anew, and (a slow test) runs the experiment afresh and compares the tables cell by cell.

Run from the repository root, after the main job::

    python examples/sample_table.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG = Path("configs/experiments/sample.yaml")
PAGE = REPO / "docs" / "results" / "sample.md"
START = re.compile(r"<!-- sample table: written by rerank experiment (\S+?)(?:; inputs sha256 ([0-9a-f]{64}))? -->\n")
END = "<!-- end of the sample table -->"
TIME_START, TIME_END = "<!-- sample time: written from the run's timings.json -->\n", "<!-- end of the sample time -->"


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


def time_text(timings: dict[str, Any]) -> str:
    """The run's CPU and wall time and load, then each kind of step's (the first word of its name), as markdown."""
    total = timings["total"]
    kinds: dict[str, tuple[int, float, float]] = {}  # runs, wall and CPU seconds by the first word of a step's name
    for name, step in timings["steps"].items():
        runs, wall, cpu = kinds.get(name.split()[0], (0, 0.0, 0.0))
        kinds[name.split()[0]] = (runs + 1, wall + step["wall_s"], cpu + step["cpu_s"])
    minutes, seconds = divmod(round(total["wall_s"]), 60)
    lines = [f"`rerank experiment {CONFIG.as_posix()}` took {total['cpu_s']:.0f} s of CPU (user and system) and "
             f"{minutes} min {seconds} s by the wall clock on a {total['cores']}-core machine under a load average "
             f"of {total['load']:.1f} (over its steps, weighted by their time), by kind of step:", "",
             "| steps | runs | wall (s) | CPU (s) |", "|---|---|---|---|"]
    lines += [f"| {kind} | {runs} | {wall:.0f} | {cpu:.0f} |" for kind, (runs, wall, cpu) in kinds.items()]
    return "\n".join(lines) + "\n"


def with_times(page: str, timings: Path) -> str:
    """``page`` with the run's times between its time markers (as it is without the markers or the file)."""
    if TIME_START not in page or TIME_END not in page or not timings.exists():
        return page
    start, end = page.index(TIME_START) + len(TIME_START), page.index(TIME_END)
    return page[:start] + time_text(json.loads(timings.read_text(encoding="utf-8"))) + page[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=REPO / "runs" / "sample" / "results.md",
                        help="the results the main job wrote (default runs/sample/results.md)")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    start, end = markers(page)
    marker = f"<!-- sample table: written by rerank experiment {CONFIG.as_posix()}; inputs sha256 {fingerprint()} -->\n"
    written = table(args.results.read_text(encoding="utf-8"))
    page = with_times(page[:start.start()] + marker + written + page[end:], args.results.with_name("timings.json"))
    PAGE.write_text(page, encoding="utf-8")
    print(f"{PAGE}: the table and times of {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
