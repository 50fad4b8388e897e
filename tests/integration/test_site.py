"""The documentation site as a reader and a contributor meet it: a plain ``mkdocs build`` prints no banner of the
theme's, and the reference tables keep a command's or an option's name on one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NO_WRAP = re.compile(r"([^{}]*)\{[^}]*white-space:\s*nowrap[^}]*\}")


def test_a_plain_mkdocs_build_prints_no_banner_of_the_themes() -> None:
    """Material from 9.7.2 prints a banner about MkDocs 2.0 and its own end of life when MkDocs imports its theme
    and its plugins, unless NO_MKDOCS_2_WARNING is set; the docs extra keeps a version that does not."""
    pytest.importorskip("material", reason="the docs extra is not installed: pip install -e '.[docs]'")
    env = {key: value for key, value in os.environ.items() if not key.endswith("MKDOCS_2_WARNING")}
    imports = "import sys; sys.argv = ['mkdocs', 'build']; import material.templates, material.plugins.search.plugin"
    done = subprocess.run([sys.executable, "-c", imports], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""


def test_names_in_the_first_column_of_a_table_do_not_wrap() -> None:
    """The command reference's first columns: ``[`score-nbest`](#score-nbest)``, ``--moses-ini-out OUT``."""
    css = (REPO / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    selectors = {s.strip() for rule in NO_WRAP.findall(css) for s in rule.split(",")}
    assert {".md-typeset td:first-child > code", ".md-typeset td:first-child > a > code"} <= selectors
    assert "stylesheets/extra.css" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    sys.path.insert(0, str(REPO / "docs" / "hooks"))
    try:
        pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
        import generated  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    rows = [line for line in generated.commands_page().splitlines() if line.startswith("| ") and "---" not in line]
    first_cells = [row.split(" | ")[0].removeprefix("| ") for row in rows if not row.startswith("| command |")
                   and not row.startswith("| argument |")]
    assert "[`score-nbest`](#score-nbest)" in first_cells and "`--moses-ini-out OUT`" in first_cells
    assert all(re.fullmatch(r"(\[`[^`]+`\]\(#[\w-]+\)|`[^`]+`(, `[^`]+`)*)", cell) for cell in first_cells), \
        [cell for cell in first_cells if not re.fullmatch(r"(\[`[^`]+`\]\(#[\w-]+\)|`[^`]+`(, `[^`]+`)*)", cell)]
