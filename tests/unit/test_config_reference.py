"""The site's config reference (docs/hooks/generated.py) describes every key of every config file."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("mkdocs", reason="the docs' tools are not installed: pip install -e .[docs]")

REPO = Path(__file__).resolve().parents[2]


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generated", REPO / "docs" / "hooks" / "generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = load_hook()


def documented_keys() -> list[tuple[str, str, str]]:
    """(section, key, description) of every key the reference lists."""
    from rerank.features.registry import FEATURES

    sections = [(heading, hook._load(target)) for heading, _, target in hook.CONFIGS]
    sections += [(f"kind: {kind}", cls.Config) for kind, cls in FEATURES.items()]
    return [(heading, key, note) for heading, cls in sections for key, _, _, note in hook._keys(cls)]


def test_every_config_key_has_a_description() -> None:
    keys = documented_keys()
    missing = [f"{heading}: {key}" for heading, key, note in keys if not note]
    assert len(keys) > 150
    assert not missing, ("keys without a description (a comment beside the field, or right above it): "
                         + ", ".join(missing))


def test_a_comment_beside_a_field_or_above_it_is_its_description() -> None:
    from dataclasses import dataclass

    @dataclass
    class Example:
        beside: int = 1  # the one beside
        # the lines right above
        # a field without one beside
        above: int = 2
        none: int = 3

    notes = hook._field_comments(Example)
    assert notes == {"beside": "the one beside", "above": "the lines right above a field without one beside"}


def test_the_header_has_the_version() -> None:
    from rerank import __version__

    config = hook.on_config({"site_name": "rerank"})
    assert config["site_name"] == f"rerank {__version__}"
