"""The README's and the docs' shell blocks run as they are written.

Before every fenced ``bash`` block stands a marker, an HTML comment that the site does not show:

* ``<!-- runs -->``: the block runs verbatim from the root of a clone, on the shipped data, after the
  blocks of the same page above it;
* ``<!-- runs: needs ../shared -->``: the same where ``../shared`` (Multi30k, Moses) lies beside the
  clone; skipped elsewhere (a block that reads what such a block writes needs ../shared too);
* ``<!-- runs: after PAGE -->``: the runnable blocks of PAGE (a path from the repository root) run first, in
  the same copy: a guide that starts from another guide's outputs;
* ``<!-- runs: reduced: ACTION; ACTION -->`` (after ``needs ../shared`` too: ``runs: needs ../shared;
  reduced: ...``): the block runs once the ACTIONs have made the copy's data smaller:
  ``sample of N sentences`` keeps the first N sentences of the sample's ``val`` and ``test`` (sources,
  references, 1-best and n-best lists), ``FILE: first N lines`` the first N lines of a file (gzip or not),
  ``FILE: KEY=VALUE`` sets a (dotted) key of a YAML file (the VALUE in YAML: ``seeds=[1]``);
* ``<!-- not run: WHY -->``: a block with the reader's own files, or a job too long for a test.

Each page's blocks run in order in a fresh copy of the repository's files, with this environment's
``rerank`` on the PATH and ``../shared`` beside the copy where the clone has it.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
# The pages that guide a use: each starts with a block that runs (docs/index.md promises it). The guide
# folder's pages on Moses tuning and training data describe runs on ../shared or the reader's own corpus.
GUIDES = sorted(page for page in (REPO / "docs" / "guide").glob("*.md")
                if page.name not in {"moses-tuning.md", "training-data.md"})

FENCE = re.compile(r"^```(\w*)")
MARKER = re.compile(r"^<!--\s*(runs(?::\s*(?P<how>.*?))?|not run:\s*(?P<why>.+?))\s*-->\s*$")
SAMPLE_CUT = re.compile(r"sample of (\d+) sentences")
FIRST_LINES = re.compile(r"(\S+): first (\d+) lines")
YAML_KEY = re.compile(r"(\S+): ([\w.]+)=(.+)")
AFTER = re.compile(r"after (\S+\.md)")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    marker: str | None  # the marker comment's text, None if there is none
    runs: bool = False
    needs_shared: bool = False
    actions: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def shell_blocks(page: Path) -> list[Block]:
    """The page's fenced ``bash`` blocks with the marker each has on the line before it (blank lines between)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        if fence.group(1) == "bash":
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            block = Block(page, i + 1, "\n".join(lines[i + 1:end]) + "\n",
                          before.strip() if before.lstrip().startswith("<!--") else None)
            read_marker(block)
            blocks.append(block)
        i = end + 1
    return blocks


def read_marker(block: Block) -> None:
    match = MARKER.match(block.marker or "")
    if match is None or match.group(1).startswith("not run"):
        return
    block.runs = True
    for part in filter(None, (p.strip() for p in (match.group("how") or "").split(";"))):
        if part == "needs ../shared":
            block.needs_shared = True
        elif part.startswith("reduced:"):
            block.actions.append(part.removeprefix("reduced:").strip())
        else:
            block.actions.append(part)  # a further action of the same "reduced:"


def bad_marker(block: Block) -> str | None:
    """What is wrong with the block's marker, or None."""
    match = MARKER.match(block.marker or "")
    if match is None:
        return "no marker before the block (<!-- runs -->, <!-- runs: ... -->, <!-- not run: why -->)"
    for action in block.actions:
        after = AFTER.fullmatch(action)
        if after and not (REPO / after.group(1)).is_file():
            return f"{action!r}: no such page"
        if not (after or SAMPLE_CUT.fullmatch(action) or FIRST_LINES.fullmatch(action) or YAML_KEY.fullmatch(action)):
            return f"unknown action {action!r}"
    return None


def reduce(copy: Path, action: str) -> None:
    """Make the copy's data smaller, as ``action`` (a marker's ``reduced:`` part) says."""
    if cut := SAMPLE_CUT.fullmatch(action):
        sentences = int(cut.group(1))
        for split in ("val", "test"):
            for suffix in ("en", "fr", "1best"):
                keep_lines(copy / "examples" / "data" / f"{split}.{suffix}", lambda i, _: i < sentences)
            keep_lines(copy / "examples" / "data" / f"{split}.100best.gz",
                       lambda _, line: int(line.split(" ||| ", 1)[0]) < sentences)
    elif first := FIRST_LINES.fullmatch(action):
        count = int(first.group(2))
        keep_lines(copy / first.group(1), lambda i, _: i < count)
    elif setting := YAML_KEY.fullmatch(action):
        path = copy / setting.group(1)
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        *parents, key = setting.group(2).split(".")
        section = config
        for name in parents:
            section = section.setdefault(name, {})
        section[key] = yaml.safe_load(setting.group(3))
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def keep_lines(path: Path, keep: Callable[[int, str], bool]) -> None:
    """Keep the lines of ``path`` (gzip or not) for which ``keep(index, line)`` holds."""
    data = path.read_bytes()
    zipped = data[:2] == b"\x1f\x8b"
    lines = (gzip.decompress(data) if zipped else data).decode("utf-8").splitlines(keepends=True)
    kept = "".join(line for i, line in enumerate(lines) if keep(i, line)).encode("utf-8")
    path.write_bytes(gzip.compress(kept) if zipped else kept)


def copy_of_the_repository(into: Path) -> Path:
    """The repository's files (git's tracked files, as they are in the work tree) under ``into/repo``, with
    ``into/shared`` linking to ``../shared`` where it exists."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    copy = into / "repo"
    for name in filter(None, files.decode().split("\0")):
        source, target = REPO / name, copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # rerank/features -> ../features
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    if SHARED.is_dir():
        (into / "shared").symlink_to(SHARED)
    return copy


ALL_BLOCKS = [block for page in PAGES for block in shell_blocks(page)]
RUN_PAGES = sorted({block.page for block in ALL_BLOCKS if block.runs})


def test_every_shell_block_says_whether_it_runs() -> None:
    problems = [f"{block.where}: {problem}" for block in ALL_BLOCKS if (problem := bad_marker(block))]
    assert not problems, "\n".join(problems)


PIP_INSTALL = re.compile(r"\bpip3? install\b([^`\n]*)")
BY_NAME = re.compile(r"rerank[-_]moses(\[[\w,]+\])?([<>=!~].*)?")  # the distribution's name, not a path or a wheel


def installs_from_the_public_index(text: str) -> list[str]:
    """The ``pip install`` commands in ``text`` that install rerank-moses by name from the public package index,
    which does not have it: without a private ``--index-url`` (a path to its wheel, or ``.`` in a clone, is fine)."""
    found = []
    for match in PIP_INSTALL.finditer(text.replace("\\\n", " ")):
        words = match.group(1).replace("'", " ").replace('"', " ").split()
        private = any(word.startswith("--index-url") or word == "-i" for word in words)
        if not private and any(BY_NAME.fullmatch(word) for word in words):
            found.append(match.group(0).strip())
    return found


def test_installs_from_the_public_index_are_found() -> None:
    assert installs_from_the_public_index("on every node: pip install 'rerank-moses[ray]' (Ray's version)") == \
        ["pip install 'rerank-moses[ray]' (Ray's version)"]
    assert installs_from_the_public_index("`pip install rerank-moses==0.1.0`, then") == \
        ["pip install rerank-moses==0.1.0"]
    assert installs_from_the_public_index("pip install --upgrade \\\n    rerank_moses") != []
    assert installs_from_the_public_index("pip install '/shared/wheels/rerank_moses-0.1.0-py3-none-any.whl[ray]'\n"
                                          "pip install --index-url https://pypi.internal/simple 'rerank-moses[ray]'\n"
                                          "pip install '.[ray]' and pip install sacremoses") == []


def test_no_page_installs_rerank_moses_by_name_from_the_public_index() -> None:
    """rerank-moses is not on the public package index: a page that tells users to install it by name from there
    sends them to nothing, or to whatever someone uploads under that name."""
    problems = [f"{page.relative_to(REPO)}: {command}" for page in PAGES
                for command in installs_from_the_public_index(page.read_text(encoding="utf-8"))]
    assert not problems, "install from a clone, a path to the wheel or a private --index-url:\n" + "\n".join(problems)


def test_the_markers_are_read() -> None:
    block = Block(REPO / "README.md", 1, "true\n",
                  "<!-- runs: needs ../shared; reduced: sample of 20 sentences; x.yaml: training.max_updates=5 -->")
    read_marker(block)
    assert block.runs and block.needs_shared
    assert block.actions == ["sample of 20 sentences", "x.yaml: training.max_updates=5"]
    assert bad_marker(block) is None
    skipped = Block(REPO / "README.md", 1, "true\n", "<!-- not run: your own files -->")
    read_marker(skipped)
    assert not skipped.runs and bad_marker(skipped) is None
    assert bad_marker(Block(REPO / "README.md", 1, "true\n", None)) is not None


def test_every_guide_starts_with_a_block_that_runs() -> None:
    """A guide's first block runs on the shipped data; one that needs ../shared says so above it."""
    problems = []
    for page in GUIDES:
        blocks = shell_blocks(page)
        if not blocks or not blocks[0].runs:
            problems.append(f"{page.relative_to(REPO)}: its first shell block is not one that runs")
        elif blocks[0].needs_shared:
            above = "\n".join(page.read_text(encoding="utf-8").splitlines()[:blocks[0].line])
            if "../shared" not in above.replace(blocks[0].marker or "", ""):
                problems.append(f"{blocks[0].where}: needs ../shared and the page does not say so above it")
    assert not problems, "\n".join(problems)


def test_the_sample_is_cut_consistently(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    (copy / "examples" / "data").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "data", copy / "examples" / "data", dirs_exist_ok=True)
    reduce(copy, "sample of 3 sentences")
    data = copy / "examples" / "data"
    assert len((data / "val.en").read_text(encoding="utf-8").splitlines()) == 3
    with gzip.open(data / "test.100best.gz", "rt", encoding="utf-8") as lines:
        assert {line.split(" ||| ")[0] for line in lines} == {"0", "1", "2"}


def run_page(page: Path, copy: Path) -> None:
    """Run the page's blocks that run here, in order, in ``copy``."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for block in shell_blocks(page):
        if not block.runs or (block.needs_shared and not SHARED.is_dir()):
            continue
        for action in block.actions:
            if after := AFTER.fullmatch(action):
                run_page(REPO / after.group(1), copy)
            else:
                reduce(copy, action)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=copy, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{block.where} exits {done.returncode}:\n{block.code}\n" \
                                     f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_page_runs(page: Path, tmp_path: Path) -> None:
    if not SHARED.is_dir() and all(block.needs_shared for block in shell_blocks(page) if block.runs):
        pytest.skip("its blocks need ../shared")
    run_page(page, copy_of_the_repository(tmp_path))


OUTPUT_OPTION = re.compile(r"(?:^|\s)(?:-o|--output[\w-]*|--work-dir|--json|--plot|--alignments|--attention)[ =]"
                           r"['\"]?([^\s'\"]+)")
MODEL_DIRECTORY = re.compile(r"--output-dir[ =]['\"]?([^\s'\"]+)")
CONFIG_FILE = re.compile(r"(?:^|\s)(configs/\S+\.ya?ml)")


def written_directories() -> dict[str, str]:
    """The directories of a clone's root that the documented commands write into, each with a block that does: the
    outputs of the blocks that run (their options and their configs' ``output_dir``), the model directories of
    every block (``--output-dir``, as the training guide's ``models/...``), and ``dist/`` of ``python -m build``."""
    found: dict[str, str] = {}
    for page in PAGES:
        if "python -m build" in page.read_text(encoding="utf-8"):
            found.setdefault("dist", f"{page.relative_to(REPO)} (python -m build)")
        for block in shell_blocks(page):
            paths = MODEL_DIRECTORY.findall(block.code)
            if block.runs:
                paths += [p for p in OUTPUT_OPTION.findall(block.code) if "/" in p]
                for config in CONFIG_FILE.findall(block.code):
                    data = yaml.safe_load((REPO / config).read_text(encoding="utf-8")) \
                        if (REPO / config).is_file() else None
                    if isinstance(data, dict) and isinstance(data.get("output_dir"), str):
                        paths.append(data["output_dir"])
            for path in paths:
                top = path.split("/")[0]
                if re.fullmatch(r"[\w.-]+", top) and not top.isupper() and top not in (".", ".."):  # not DIR, $W
                    found.setdefault(top, block.where)
    return found


def test_what_the_guides_write_is_ignored_by_git() -> None:
    """A user who follows the guides in a clone finds `git status` clean: every directory they write is ignored."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git clone")
    directories = written_directories()
    assert {"runs", "models", "dist"} <= set(directories)
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *(f"{d}/" for d in directories)], cwd=REPO,
                             capture_output=True, text=True).stdout.split()
    missing = [f"{d}/ (written by {where})" for d, where in directories.items() if f"{d}/" not in ignored]
    assert not missing, "not in .gitignore: " + ", ".join(missing)
