"""Configuration as frozen dataclasses, loaded from YAML with every key checked.

Defaults live in the dataclasses and nowhere else. :func:`from_dict` walks the fields, so an
unknown key, a missing required key or a value of the wrong type is reported with its dotted
path (``model.attention.kind``) and the file it came from. A dataclass checks the ranges of its
values in ``__post_init__`` with :func:`at_least` and :func:`below` (an :class:`InvalidValue` names
the key), so a bad value is ``file: training.learning_rate: expected a number above 0, got -1``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import inspect
import io
import math
import os
import types
import typing
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar, cast

import yaml

from rerank.errors import ConfigError, FormatError, brief, did_you_mean

T = TypeVar("T")

GZIP_MAGIC = b"\x1f\x8b"
MAX_CONFIG_BYTES = 64 << 20  # a config or weights file, once decompressed


class InvalidValue(ValueError):
    """A configuration value out of its range; :func:`from_dict` adds the file and the key's path."""

    def __init__(self, key: str, expected: str, value: object):
        super().__init__(f"{key}: expected {expected}, got {brief(value)}")
        self.key, self.expected, self.value = key, expected, value


def at_least(config: object, minimum: float, *keys: str, strictly: bool = False) -> None:
    """Check that each of ``keys`` of ``config`` is ``>= minimum`` (``> minimum`` when ``strictly``); a
    ``None`` (an unset optional value) passes."""
    for key in keys:
        value = getattr(config, key)
        if value is not None and not (value > minimum if strictly else value >= minimum):
            kind = "an integer" if isinstance(value, int) else "a number"
            raise InvalidValue(key, f"{kind} {'above' if strictly else 'of at least'} {minimum:g}", value)


def below(config: object, maximum: float, *keys: str, or_equal: bool = False) -> None:
    """Check that each of ``keys`` of ``config`` is ``< maximum`` (``<= maximum`` when ``or_equal``)."""
    for key in keys:
        value = getattr(config, key)
        if value is not None and not (value <= maximum if or_equal else value < maximum):
            raise InvalidValue(key, f"a number {'at most' if or_equal else 'below'} {maximum:g}", value)


ALIAS_BUDGET = 10_000  # values that the aliases of one YAML file may repeat, all aliases together
ALIAS_BYTES = 1 << 20  # and the bytes of the scalars they repeat


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader with aliases bounded and duplicate keys refused.

    An alias (``*name``, ``<<: *name``) repeats the value of its anchor: a few bytes of nested aliases
    can stand for billions of values, which grow without bound once a reader walks them. Aliases are
    accepted (``yaml.safe_dump`` writes them for shared values) as long as all of a file's aliases
    together repeat at most :data:`ALIAS_BUDGET` values and :data:`ALIAS_BYTES` bytes of scalars (one long
    string aliased many times is as large as many values); a recursive alias is refused. A key given
    twice is an error, not the last value silently kept."""

    name = "<yaml>"

    def __init__(self, stream: str):
        super().__init__(stream)
        self.repeated = 0
        self.repeated_bytes = 0
        self.sizes: dict[int, tuple[int, int]] = {}  # values and scalar bytes under each anchored node, by id
        self.open: set[str] = set()  # anchors whose values are being read

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            node = self.anchors.get(event.anchor)
            if event.anchor in self.open:
                raise ConfigError(f"{self.name}:{event.start_mark.line + 1}: the YAML alias *{event.anchor} is "
                                  "inside its own anchor's value")
            if node is not None:
                values, size = self._size(node)
                self.repeated += values
                self.repeated_bytes += size
                if self.repeated > ALIAS_BUDGET or self.repeated_bytes > ALIAS_BYTES:
                    raise ConfigError(f"{self.name}:{event.start_mark.line + 1}: the YAML aliases (*{event.anchor}) "
                                      f"repeat more than {ALIAS_BUDGET:,} values or {ALIAS_BYTES:,} bytes: write the "
                                      "values out")
        return super().compose_node(parent, index)

    def compose_sequence_node(self, anchor: Any) -> Any:
        with self._opened(anchor):
            return super().compose_sequence_node(anchor)

    def compose_mapping_node(self, anchor: Any) -> Any:
        with self._opened(anchor):
            return super().compose_mapping_node(anchor)

    @contextlib.contextmanager
    def _opened(self, anchor: str | None) -> Iterator[None]:
        if anchor is not None:
            self.open.add(anchor)
        try:
            yield
        finally:
            self.open.discard(anchor or "")

    def _size(self, node: yaml.Node) -> tuple[int, int]:
        """The number of values under ``node`` once its aliases are expanded, and the bytes of their scalars."""
        known = self.sizes.get(id(node))
        if known is not None:
            return known
        values, size = 1, 0
        if isinstance(node, yaml.ScalarNode):
            size = len(node.value)
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) else []
        for child in children:
            more_values, more_bytes = self._size(child)
            values, size = values + more_values, size + more_bytes
        self.sizes[id(node)] = (values, size)
        return values, size

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # <<: *base, whose keys the node's own may override
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the constructor says so below
                continue
            if first != key_node.start_mark.line + 1:
                raise ConfigError(f"{self.name}:{key_node.start_mark.line + 1}: duplicate key {brief(key)} (first at "
                                  f"line {first}): give each key once")
        return super().construct_mapping(node, deep)


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """The parsed content of a YAML file: the one YAML reader of rerank (configs, weights, experiment configs,
    shard manifests). Safe tags only, aliases within a budget, no duplicate keys; every error names the file and
    the line."""
    return parse_yaml(read_config_bytes(path), str(path))


def read_config_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a config or weights file (gunzipped where they are gzip), read once: a pipe (``<(...)``) or a
    FIFO reads as a file does. At most :data:`MAX_CONFIG_BYTES`."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
        if data[:2] == GZIP_MAGIC:  # gzip is recognised by its magic bytes, as every text input is
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: expected a config of at most {MAX_CONFIG_BYTES:,} bytes (uncompressed)")
    except gzip.BadGzipFile:
        raise ConfigError(f"{path}: cannot read: its first bytes are gzip's but the rest is not gzip") from None
    except OSError as e:  # a directory, no permission
        raise ConfigError(f"{path}: cannot read: {e.strerror or 'a damaged gzip stream'}") from None
    except zlib.error:
        raise ConfigError(f"{path}: cannot read: a damaged gzip stream") from None
    except EOFError:
        raise ConfigError(f"{path}: cannot read: the gzip stream ends early") from None
    return data


def parse_yaml(data: bytes, path: str) -> Any:
    """The YAML of ``data``, the bytes of the file ``path`` (:func:`read_config_bytes`), as :func:`load_yaml`
    reads it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(path, data[:e.start].count(b"\n") + 1, "UTF-8 text",
                          got=f"byte 0x{data[e.start]:02x}") from None
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # which reads the text's first characters
        loader.name = path
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise ConfigError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise ConfigError(f"{path}: invalid YAML: {e}") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_config(cls: type[T], path: str | os.PathLike[str]) -> T:
    """Load a YAML file into the dataclass ``cls``."""
    data = load_config_data(path)
    return from_dict(cls, {} if data is None else data, source=str(path))


# The keys, in any section, whose values name files or directories a config reads (never those it writes).
INPUT_KEYS = frozenset({
    "path", "vocab", "corpus", "model", "lm", "prepared", "source", "target", "reference", "nbest", "ini",
    "language_model", "phrase_table", "decoder", "filter_script", "mert_moses", "encdec", "rnnsearch",
    "right_to_left", "channel", "phrases", "cslm", "tokenizer"})


def load_config_data(path: str | os.PathLike[str]) -> Any:
    """A config file's YAML with the files it reads found (:func:`resolved_input`)."""
    return resolved_inputs(load_yaml(path), os.path.dirname(os.fspath(path)))


def resolved_inputs(data: Any, directory: str, key: str | None = None) -> Any:
    """``data`` (a config's YAML) with each relative path under one of :data:`INPUT_KEYS` found
    (:func:`resolved_input`) from ``directory``, the config's own."""
    if isinstance(data, Mapping):
        return {k: resolved_inputs(v, directory, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [resolved_inputs(v, directory, key) for v in data]
    if isinstance(data, str) and key in INPUT_KEYS:
        return resolved_input(data, directory)
    return data


def resolved_input(path: str, directory: str) -> str:
    """A relative path of a config is read from the working directory where it is there, and otherwise from the
    config's own directory or the nearest directory above it that has it (so the shipped configs, whose paths are
    relative to the repository's root, run from anywhere); else it stays as written, for its error to name."""
    if not path or os.path.isabs(path) or os.path.exists(path):
        return path
    here = os.path.abspath(directory or os.curdir)
    while not os.path.exists(found := os.path.join(here, path)):
        if os.path.dirname(here) == here:
            return path
        here = os.path.dirname(here)
    shown = os.path.relpath(found)  # as the working directory reaches it, where that is below it
    return found if shown.startswith(os.pardir) else shown


def from_dict(cls: type[T], data: Any, source: str = "config", prefix: str = "") -> T:
    """Build the dataclass ``cls`` from a mapping, recursing into nested dataclasses."""
    where = prefix or "top level"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cast(Any, cls)) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = str(unknown[0])
        suggestion = did_you_mean(key, fields, f"{prefix}." if prefix else "")
        raise ConfigError(f"{source}: unknown key {brief(_dotted(prefix, key))}{suggestion}; "
                          f"known keys here: {', '.join(sorted(fields))}")
    values = {}
    for name, f in fields.items():
        path = _dotted(prefix, name)
        if name in data:
            values[name] = _convert(hints[name], data[name], source, path)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{source}: missing required key {brief(path)}")
    try:
        return cls(**values)
    except InvalidValue as e:
        shown = f"{e.value:g}" if isinstance(e.value, float) else brief(e.value)
        raise ConfigError(f"{source}: {_dotted(prefix, e.key)}: expected {e.expected}, got {shown}") from None
    except (ValueError, TypeError) as e:  # other __post_init__ checks
        raise ConfigError(f"{source}: {where}: {e}") from None


def with_overrides(config: T, overrides: Mapping[str, Any], source: str = "the command line", *,
                   within: str = "") -> T:
    """``config`` with the values of ``overrides`` (dotted keys, ``"mert.restarts"``) put in place, the one way a
    command's flags override its config file; a ``None`` value (a flag not given) leaves the key as it is.
    Ranges are checked again, and a value out of range names ``source`` and the key (its whole dotted path, under
    ``within``: where ``config`` stands in the config it is part of)."""
    result: Any = config
    for key, value in overrides.items():
        if value is None:
            continue
        head, *rest = key.split(".")
        if not hasattr(result, head):
            raise TypeError(f"{type(result).__name__} has no key {head!r}")
        name = within + key
        try:
            if rest:
                value = with_overrides(getattr(result, head), {".".join(rest): value}, source,
                                       within=f"{within}{head}.")
            result = dataclasses.replace(result, **{head: value})
        except InvalidValue as e:  # a key below the one set (cv.choose.pro.l2 for cv.choose) is named whole
            named = within + e.key if (within + e.key).startswith(f"{name}.") else name
            raise ConfigError(f"{source}: {named}: expected {e.expected}, got {brief(e.value)}") from None
        except ValueError as e:  # other __post_init__ checks, whose message may name the key already
            raise ConfigError(f"{source}: {e}" if name in str(e) else f"{source}: {name}: {e}") from None
    return cast(T, result)


def to_dict(obj: Any) -> Any:
    """A dataclass as plain YAML-friendly data (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def dump_config(obj: Any) -> str:
    """``obj`` (a config dataclass, or a dict of them) as the YAML text that :func:`load_yaml` reads back."""
    return yaml.safe_dump(to_dict(obj), sort_keys=False, allow_unicode=True)


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """One key a YAML file for a config dataclass may hold (see :func:`config_keys`)."""

    path: str  # dotted, e.g. ``model.subwords.vocab_size``
    hint: Any  # its type
    default: str | None  # the default's repr, "none", or None where the key is required
    owner: type[Any]  # the dataclass that declares it
    name: str  # its field's name in ``owner``
    under_optional: bool  # inside a nested section that may be left out


def config_keys(cls: type[Any], prefix: str = "", under_optional: bool = False) -> Iterator[ConfigKey]:
    """Every key of the dataclass ``cls``, nested dataclasses expanded: the one walk over a config's keys
    that ``--help`` and the docs' reference both read."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        path = _dotted(prefix, f.name)
        hint = hints[f.name]
        nested = [a for a in (typing.get_args(hint) or (hint,)) if dataclasses.is_dataclass(a)]
        if nested:
            yield from config_keys(cast(type[Any], nested[0]), path, under_optional or f.default is None)
            continue
        if f.default is not dataclasses.MISSING:
            default: str | None = "none" if f.default is None else repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = None
        owner = next(c for c in cls.__mro__ if f.name in inspect.get_annotations(c))  # a base may declare it
        yield ConfigKey(path, hint, default, owner, f.name, under_optional)


def describe_keys(cls: type[Any]) -> list[str]:
    """Every key of the dataclass ``cls`` as ``dotted.key  type  (default)`` lines: what a YAML file for it
    may hold (for ``--help``)."""
    lines = []
    for key in config_keys(cls):
        if key.default is not None:
            default = f"(default: {key.default})"
        else:
            default = "(required with it)" if key.under_optional else "(required)"
        lines.append(f"{key.path}  {_describe(key.hint)}  {default}")
    return lines


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _convert(hint: Any, value: Any, source: str, path: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(option, value, source, path)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else
                          f"{source}: {brief(path)}: expected {_describe(hint)}, got {brief(value)}")
    if origin is typing.Literal:
        if value not in args:
            suggestion = did_you_mean(value, map(str, args)) if isinstance(value, str) else ""
            raise ConfigError(f"{source}: {brief(path)}: expected one of {', '.join(map(repr, args))}, "
                              f"got {brief(value)}{suggestion}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{source}: {brief(path)}: expected a list, got {brief(value)}")
        item = args[0] if args else Any
        converted = [_convert(item, v, source, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(converted) if origin is tuple else converted
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: {brief(path)}: expected a mapping, got {brief(value)}")
        return {str(k): _convert(args[1] if args else Any, v, source, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return from_dict(cast(type[Any], hint), value, source, path)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {brief(path)}: expected a number, got {brief(value)}")
        if not math.isfinite(value):
            raise ConfigError(f"{source}: {brief(path)}: expected a finite number, got {brief(value)}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {brief(path)}: expected an integer, got {brief(value)}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {brief(path)}: expected true or false, got {brief(value)}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {brief(path)}: expected a string, got {brief(value)}")
        return value
    raise TypeError(f"unsupported config type {hint!r} at {path}")


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return " | ".join(map(str, typing.get_args(hint)))
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
