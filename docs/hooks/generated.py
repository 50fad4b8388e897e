"""MkDocs hook: the pages written from the code at build time, so that they cannot drift from it.

* ``reference/commands.md``: every ``rerank`` command and option, from the argparse parsers of
  :mod:`rerank.cli`;
* ``reference/configs.md``: every key of every config file, from the config dataclasses (the
  comment beside a field in its source is its description);
* ``design.md``'s code map: every package with what its docstring says it holds (a line ````module``: what it
  holds`` for each of its modules: the build fails if a module is missing or one is listed that is not there),
  and the packages each one imports (read from the import statements);
* ``changelog.md``: the repository's ``CHANGELOG.md``;

and puts the version (``rerank.__version__``) and the repository (the clone's ``origin`` remote, where it
has one) in the site's header.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import subprocess
import typing
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rerank"

# (heading, what reads it, the dataclass as "module:Class")
CONFIGS = [
    ("Training config", "`rerank train --config`", "rerank.training.config:TrainConfig"),
    ("CSLM training config", "`rerank train --config` with `model.architecture: cslm`",
     "rerank.training.config:CSLMTrainConfig"),
    ("Rescoring config", "`rerank score-nbest --config`; each feature is one of the kinds below",
     "rerank.rescore.append:RescoreConfig"),
    ("Tuning config", "`rerank tune --config`", "rerank.tune.config:TuneConfig"),
    ("Experiment config", "`rerank experiment CONFIG`", "rerank.study.config:ExperimentConfig"),
]


def on_config(config: Any) -> Any:
    from rerank import __version__

    config["site_name"] = f"rerank {__version__}"
    url = repository_url()
    if url and not config.get("repo_url"):
        config["repo_url"] = url
        config["repo_name"] = "/".join(url.split("/")[-2:])  # owner/name
    return config


def repository_url() -> str | None:
    """The web address of the clone's ``origin`` (``git@host:owner/name.git`` as ``https://host/owner/name``)."""
    from rerank.processes import process_group

    try:
        with process_group(["git", "-C", str(ROOT), "remote", "get-url", "origin"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL) as git:
            out, _ = git.communicate()
    except OSError:  # no git
        return None
    if git.returncode != 0:
        return None
    url = re.sub(r"^git@([^:]+):", r"https://\1/", out.decode().strip()).removesuffix(".git")
    return url if url.startswith("https://") else None


def on_files(files: Files, config: Any) -> Files:
    pages = {"reference/commands.md": commands_page(), "reference/configs.md": configs_page(),
             "changelog.md": (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")}
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return markdown.replace("<!-- code map -->", code_map())


# ---- commands


def commands_page() -> str:
    from rerank.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = ["# Commands", "",
             "Written from the commands' argument parsers when this site is built; `rerank COMMAND --help` "
             "prints the same.", "", "| command | what it does |", "|---|---|"]
    summaries = {choice.dest: choice.help for choice in subparsers._choices_actions}
    lines += [f"| [`{name}`](#{name}) | {_cell(summaries.get(name) or '')} |" for name in subparsers.choices]
    lines += ["", "Options of every command: `-q`/`--quiet` before the command (only warnings and errors on stderr), "
              "`--version`.", ""]
    for name, sub in subparsers.choices.items():
        lines += [f"## {name}", "", f"```\n{sub.format_usage().strip()}\n```", "",
                  _docstring_markdown(sub.description or ""), ""]
        formatter = sub._get_formatter()
        for group in sub._action_groups:
            actions = [a for a in group._group_actions if a.help is not argparse.SUPPRESS
                       and not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            title = {"positional arguments": "Arguments", "options": "Options"}.get(group.title or "", group.title)
            lines += [f"**{title}**", "", "| argument | description | default |", "|---|---|---|"]
            for action in actions:
                lines.append(f"| {_cell(_invocation(action))} | {_cell(formatter._expand_help(action))} "
                             f"| {_cell(_default(action))} |")
            lines.append("")
        if sub.epilog:
            lines += ["```", sub.epilog.rstrip(), "```", ""]
    return "\n".join(lines) + "\n"


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = ""
    if action.nargs != 0:
        metavar = " " + (action.metavar if isinstance(action.metavar, str) else
                         "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper())
    return ", ".join(f"`{option}{metavar}`" for option in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def _docstring_markdown(text: str) -> str:
    """A module docstring as markdown: its indented examples as code blocks."""
    out, block = [], []
    for line in inspect.cleandoc(text).splitlines() + [""]:
        if line.startswith("  ") and line.strip():
            block.append(line[2:])
            continue
        if block:
            out += ["```", *block, "```"]
            block = []
        out.append(line)
    return "\n".join(out).strip()


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# ---- configs


def configs_page() -> str:
    from rerank.config import INPUT_KEYS
    from rerank.features.registry import FEATURES

    lines = ["# Config files", "",
             "Every key of every config file, written from the config dataclasses when this site is built. "
             "Nested keys are dotted (`training.learning_rate` is `learning_rate:` under `training:`); a key "
             "left out takes its default; an unknown key, a value of the wrong type or out of range is an "
             "error naming the file and the key.", "",
             "A relative path a config reads (the keys "
             f"{', '.join(f'`{key}`' for key in sorted(INPUT_KEYS))}) is read from the working directory where it "
             "is there, and otherwise from the config's own directory or the nearest directory above it that has "
             "it, so that a shipped config (its paths relative to the repository's root) runs from anywhere; a "
             "path a config writes (`output_dir`) is relative to the working directory.", ""]
    for heading, reader, target in CONFIGS:
        lines += [f"## {heading}", "", f"Read by {reader}.", "", *_key_table(_load(target))]
    lines += ["## Feature kinds", "",
              "An entry of a rescoring config's `features` (and of an experiment's extra features): `kind` and "
              "that kind's keys.", ""]
    for kind, cls in FEATURES.items():
        doc = inspect.getdoc(cls) or ""
        lines += [f"### kind: {kind}", "", doc.split("\n\n")[0], "", *_key_table(cls.Config)]
    return "\n".join(lines) + "\n"


def _load(target: str) -> type[Any]:
    module, _, name = target.partition(":")
    return typing.cast(type[Any], getattr(importlib.import_module(module), name))


def _key_table(cls: type[Any]) -> list[str]:
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    rows += [f"| `{key}` | {_cell(kind)} | {_cell(default)} | {_cell(note)} |" for key, kind, default, note
             in _keys(cls)]
    return [*rows, ""]


def _keys(cls: type[Any]) -> list[tuple[str, str, str, str]]:
    from rerank.config import config_keys
    notes: dict[type[Any], dict[str, str]] = {}
    keys = []
    for key in config_keys(cls):
        note = notes.setdefault(key.owner, _field_comments(key.owner)).get(key.name, "")
        default = "required" if key.default is None else "none" if key.default == "none" else f"`{key.default}`"
        keys.append((key.path, _type_name(key.hint), default, note))
    return keys


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return " | ".join(f"`{a}`" for a in typing.get_args(hint))
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    return text or str(hint).replace("typing.", "").replace("NoneType", "None")


def _field_comments(cls: type[Any]) -> dict[str, str]:
    """The comment beside each field in the class's source (``name: type = default  # what it is``), or, for a
    field without one, the comment lines right above it."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    notes: dict[str, str] = {}
    above: list[str] = []
    for line in source.splitlines():
        if line.strip().startswith("#"):
            above.append(line.strip().lstrip("#").strip())
            continue
        match = re.match(r"\s+(\w+)\s*:([^#]*)(?:#\s*(.+))?$", line)
        if match and (match.group(3) or above):
            notes.setdefault(match.group(1), (match.group(3) or " ".join(above)).strip())
        above = []
    return notes


# ---- the code map


def code_map() -> str:
    """Every package of rerank with what it holds and what it imports, as a table."""
    lines = ["| package | imports from rerank | modules |", "|---|---|---|"]
    packages = sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    for package, name in [(PACKAGE, "`rerank` (top level)"), *((p, f"`rerank.{p.name}`") for p in packages)]:
        modules = sorted(p for p in package.glob("*.py") if p.name != "__init__.py")
        summary, held = package_contents(package / "__init__.py", [p.stem for p in modules])
        own = "base" if package == PACKAGE else package.name
        imports = ", ".join(sorted(_imports(modules, own))) or "—"
        lines.append(f"| {name}<br>{_markdown(summary)} | {_cell(imports)} | "
                     f"{'<br>'.join(f'`{module}`: {_markdown(what)}' for module, what in held.items())} |")
    return "\n".join(lines)


def _markdown(text: str) -> str:
    """A docstring's line as a table cell: ````code```` and ``:role:`~a.b``` as Markdown code."""
    text = re.sub(r":\w+:`(~?)([^`]*)`", lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)
    return _cell(text.replace("``", "`"))


MODULE_LINE = re.compile(r"``(\w+)``: (.*)")


def package_contents(init: Path, modules: list[str]) -> tuple[str, dict[str, str]]:
    """The first paragraph of a package's docstring, and what it says each module holds (its lines
    ````module``: what it holds``); an error unless it names every module of the package, and no other."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    held: dict[str, str] = {}
    for line in doc.splitlines():
        if match := MODULE_LINE.fullmatch(line):
            held[match.group(1)] = match.group(2)
        elif held and line.startswith("  "):  # a module's line continued
            last = next(reversed(held))
            held[last] += " " + line.strip()
    missing, extra = sorted(set(modules) - set(held)), sorted(set(held) - set(modules))
    if missing or extra:
        raise ValueError(f"{init.relative_to(ROOT)}: its docstring must list every module of the package as "
                         f"``module``: what it holds; missing: {', '.join(missing) or 'none'}; "
                         f"not in the package: {', '.join(extra) or 'none'}")
    return doc.split("\n\n")[0].replace("\n", " "), dict(sorted(held.items()))


def _imports(modules: list[Path], own: str) -> set[str]:
    """The rerank packages (``base`` for the top-level modules) that these modules import, lazily or not."""
    found = set()
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                parts = name.split(".")
                if parts[0] != "rerank" or len(parts) < 2:
                    continue
                room = parts[1] if (PACKAGE / parts[1]).is_dir() else "base"
                if room != own:
                    found.add(room)
    return found
