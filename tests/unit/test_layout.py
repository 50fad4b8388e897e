"""The layout holds: each room imports only the rooms below it, the import graph has no cycle, and the
rooms that must stay light (formats, tune, rescore, the configs, the commands at import) never load torch.

Every import statement counts, at the top of a module or inside a function (a lazy import is still
an edge), and modules are not loaded by name through importlib anywhere.

The unit tests mirror the package: ``tests/unit/<package>/test_<module>.py`` tests ``rerank/<package>/<module>.py``
(``tests/unit/test_<module>.py`` a module of ``rerank/`` itself), but for the few files of ``CROSS_CUTTING``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rerank"
UNIT_TESTS = Path(__file__).resolve().parent

# The unit test files that check a property across modules rather than one module, and why.
CROSS_CUTTING: dict[str, str] = {
    "test_layout.py": "the rules of the layout: imports between packages, and these test files' names",
    "test_one_way_to_write.py": "reads the whole source: every write and child process goes through its one module",
    "test_safe_inputs.py": "hostile inputs through the command line, into every command that reads YAML or numbers",
    "test_fuzz_structured_inputs.py": "property-based tests of the structured readers of several packages",
    "test_shipped_configs.py": "every config in configs/, each with the loader of its command",
    "test_config_reference.py": "the site's config reference (docs/hooks/generated.py) against every config class",
    "test_slices.py": "the slices of the real data in tests/data (tests/slices.py)",
    "formats/test_fuzz_readers.py": "property-based tests of every reader, and of a command's whole-or-no output",
    "models/test_fast_paths_against_reference.py": "each fast path (layers, decoders, scorer, search) against the "
                                                   "path it replaces",
    "models/test_int8_against_fp32.py": "int8 inference against fp32 through the model, the scorer, search and "
                                        "rerank translate",
    "models/test_recipe_options.py": "the options of one training recipe, each where it acts (layers, training, "
                                     "checkpoints, averaging)",
    "models/test_directions_and_ensembles.py": "right-to-left and channel models and ensembles, in training, "
                                               "scoring and search",
}

# room -> the rooms it may import (besides itself); "base" is rerank/*.py but the entry points.
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "formats": {"base"},
    "models": {"base", "formats"},
    "training": {"base", "formats", "models"},
    "search": {"base", "formats", "models"},
    "scoring": {"base", "formats", "models"},
    "rescore": {"base", "formats"},
    "tune": {"base", "formats"},
    "evaluation": {"base", "formats", "tune"},
    "features": {"base", "formats", "models", "scoring", "rescore"},
    "study": {"base", "formats", "models", "training", "search", "scoring", "rescore", "tune", "evaluation",
              "features"},
    "commands": {"base", "formats", "models", "training", "search", "scoring", "rescore", "tune", "evaluation",
                 "features", "study"},
    "cli": {"base", "formats", "commands"},
}
ENTRY_POINTS = {"rerank.cli", "rerank.__main__"}
TORCH_FREE = ["rerank.formats", "rerank.tune", "rerank.rescore", "rerank.models.config", "rerank.training.config",
              "rerank.commands", "rerank.cli"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def room(module: str) -> str:
    if module in ENTRY_POINTS:
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else "base"


def imports(path: Path, name: str) -> set[str]:
    """The rerank modules that ``path`` imports anywhere in its body (``from a import b`` counts a.b when
    that is a module)."""
    known = modules()
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return {module for module in found if module in known and module != name}


def graph() -> dict[str, set[str]]:
    return {name: imports(path, name) for name, path in modules().items()}


def test_every_module_is_in_a_room() -> None:
    assert {room(name) for name in modules()} <= set(ALLOWED)
    assert (PACKAGE / "features" / "registry.py").is_file(), "rerank/features links to the top-level features/"


def test_rooms_import_only_the_rooms_below_them() -> None:
    wrong = sorted(f"{name} ({room(name)}) imports {target} ({room(target)})"
                   for name, targets in graph().items() for target in targets
                   if room(target) != room(name) and room(target) not in ALLOWED[room(name)])
    assert not wrong, "\n".join(wrong)


def test_the_import_graph_has_no_cycle() -> None:
    edges = graph()
    # Importing a module imports its packages' __init__ first: those edges count too.
    for name in list(edges):
        parts = name.split(".")
        edges[name] |= {".".join(parts[:i]) for i in range(1, len(parts))} - {name}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycle.extend(path[path.index(target):] + [node, target] if target in path else [node, target])
                return True
            if target not in state and visit(target, path + [node]):
                return True
        state[node] = 2
        return False

    for node in sorted(edges):
        if node not in state and visit(node, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_no_module_is_imported_by_name_at_run_time() -> None:
    users = [name for name, path in modules().items() if "import_module" in path.read_text(encoding="utf-8")]
    assert not users


@pytest.mark.parametrize("module", TORCH_FREE)
def test_light_rooms_do_not_load_torch(module: str) -> None:
    names = [name for name in modules() if name == module or name.startswith(module + ".")]
    code = f"import sys\nfor name in {names!r}:\n    __import__(name)\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", f"importing {module} loads torch"


def module_of(test: Path) -> Path:
    """The module ``tests/unit/<package>/test_<module>.py`` tests: ``rerank/<package>/<module>.py``."""
    relative = test.relative_to(UNIT_TESTS)
    return PACKAGE.joinpath(*relative.parts[:-1], relative.name.removeprefix("test_"))


def misnamed(tests: Iterable[Path]) -> list[str]:
    """The test files (relative to tests/unit) neither named after a module nor listed in ``CROSS_CUTTING``."""
    return [test.relative_to(UNIT_TESTS).as_posix() for test in tests
            if test.relative_to(UNIT_TESTS).as_posix() not in CROSS_CUTTING and not module_of(test).is_file()]


def test_each_unit_test_file_is_named_after_the_module_it_tests() -> None:
    wrong = misnamed(sorted(UNIT_TESTS.rglob("test_*.py")))
    assert not wrong, ("name a unit test file after the module it tests (tests/unit/<package>/test_<module>.py for "
                       "rerank/<package>/<module>.py), or add it to CROSS_CUTTING with the reason:\n"
                       + "\n".join(wrong))
    stale = [name for name in CROSS_CUTTING
             if not (UNIT_TESTS / name).is_file() or module_of(UNIT_TESTS / name).is_file()]
    assert not stale, f"CROSS_CUTTING lists files that are gone or named after a module: {stale}"


def test_a_test_file_without_its_module_is_found() -> None:
    files = [UNIT_TESTS / "tune" / "test_mert.py", UNIT_TESTS / "tune" / "test_foo.py", UNIT_TESTS / "test_config.py",
             UNIT_TESTS / "test_slices.py", UNIT_TESTS / "test_foo.py", UNIT_TESTS / "nowhere" / "test_config.py"]
    assert misnamed(files) == ["tune/test_foo.py", "test_foo.py", "nowhere/test_config.py"]
