"""One way to write and one way to run: every file rerank writes goes through rerank/formats/files.py and every
child process through rerank/processes.py. This test reads the source of rerank/ and features/ and fails on a
call that writes a file, renames one or starts a process anywhere else."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rerank", "features")
HOMES = {Path("rerank/formats/files.py"), Path("rerank/processes.py")}

# module.function calls that write, move or run (the module as the source imports it)
FORBIDDEN_CALLS = {
    ("torch", "save"), ("os", "replace"), ("os", "rename"), ("os", "renames"), ("os", "system"), ("os", "popen"),
    ("os", "link"), ("os", "symlink"), ("os", "mkfifo"), ("os", "truncate"), ("os", "spawnv"), ("os", "execv"),
    ("shutil", "move"), ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("shutil", "copytree"),
}
FORBIDDEN_METHODS = {"write_text", "write_bytes"}
STREAM_WRITERS = {"savefig", "tofile", "save", "savez"}  # fine into a stream (a name), not given a path
OPENERS = {"open", "fdopen"}  # open(), Path.open(), gzip.open(), os.fdopen()
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def sources() -> list[Path]:
    return sorted(path.relative_to(ROOT) for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _mode(call: ast.Call) -> ast.expr | None:
    """The mode argument of an open() call, if given."""
    for keyword in call.keywords:
        if keyword.arg == "mode":
            return keyword.value
    name = _name(call.func)
    position = 0 if isinstance(call.func, ast.Attribute) and name == "open" and not _is_module_call(call) else 1
    return call.args[position] if len(call.args) > position else None


def _is_module_call(call: ast.Call) -> bool:
    """``gzip.open(path, mode)``, ``os.fdopen(fd, mode)``, ``io.open``: a module's opener, path first."""
    return isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and \
        call.func.value.id in {"gzip", "io", "os", "bz2", "lzma", "codecs", "builtins"}


def offences(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, what)`` of every call in ``tree`` that writes a file, renames one or starts a process."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "subprocess":
            yield node.lineno, "from subprocess import ..."
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "subprocess":
                yield node.lineno, f"subprocess.{func.attr}()"
            if (func.value.id, func.attr) in FORBIDDEN_CALLS:
                yield node.lineno, f"{func.value.id}.{func.attr}()"
            if (func.value.id, func.attr) == ("os", "open") and len(node.args) > 1 and \
                    WRITE_FLAGS & {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}:
                yield node.lineno, "os.open() for writing"
        if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_METHODS:
            yield node.lineno, f".{func.attr}()"
        if isinstance(func, ast.Attribute) and func.attr in STREAM_WRITERS and (func.attr in ("savefig", "tofile") or (
                isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy"))):
            target = node.args[0] if node.args else None
            if target is not None and not isinstance(target, ast.Name):
                yield node.lineno, f".{func.attr}() into a path"
        if _name(func) in OPENERS and not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                           and (func.value.id, func.attr) == ("os", "open")):
            mode = _mode(node)
            if mode is None:
                continue
            if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
                yield node.lineno, f"{_name(func)}() with a mode that is not a constant"
            elif set(mode.value) & set("wax+"):
                yield node.lineno, f"{_name(func)}(..., {mode.value!r})"


@pytest.mark.parametrize("path", sources(), ids=str)
def test_files_are_written_and_processes_run_only_through_their_homes(path: Path) -> None:
    if path in HOMES:
        return
    found = [f"{path}:{line}: {what}" for line, what in offences(ast.parse((ROOT / path).read_text(), str(path)))]
    assert not found, ("write files through rerank/formats/files.py and run processes through "
                       "rerank/processes.py:\n" + "\n".join(found))


@pytest.mark.parametrize("code", [
    "open(p, 'w')", "open(p, mode='a')", "Path(p).open('wb')", "gzip.open(p, 'wt')", "torch.save(x, p)",
    "os.replace(a, b)", "subprocess.run(['ls'])", "os.system('ls')", "p.write_text('x')", "shutil.move(a, b)",
    "os.open(p, os.O_WRONLY | os.O_CREAT)", "open(p, mode)", "from subprocess import run",
    "figure.savefig('plot.png')", "np.save(directory / 'x.npy', a)"])
def test_the_walk_finds_each_kind_of_write(code: str) -> None:
    assert list(offences(ast.parse(code)))


@pytest.mark.parametrize("code", ["open(p)", "open(p, 'rb')", "Path(p).open()", "gzip.open(p, 'rt')",
                                  "os.open(p, os.O_RDONLY)", "subprocess_like.run()", "x = subprocess.DEVNULL",
                                  "figure.savefig(out, format='png')", "np.save(f, a)", "ids.tofile(f)"])
def test_the_walk_lets_reads_be(code: str) -> None:
    assert not list(offences(ast.parse(code)))
