"""The record of a scored n-best list, ``OUT.features.yaml`` beside it: what each feature's values were computed
from, for ``rerank score-nbest --reuse`` to check (the list itself stays as Moses' tools read it).

::

    # what rerank score-nbest computed each feature of dev.moses.scored.gz from (read by --reuse)
    nbest: {sha256: 5e0c...}          # the list's text, as written
    features:
      LM1: {kind: kenlm, oov: false, path: {file: /data/lm/train.fr.4.arpa, sha256: 9a41...}}
      RNN0: {kind: nmt, channel: false, per_word: false, sum: true, precision: fp32,
             model: [{file: /runs/encdec, sha256: 77b2...}], source: {file: /data/dev.en, sha256: 03fd...}}

A feature's entry holds its kind, the options that change its values, and for every file it reads (a language
model, a model directory's weights, a word list; the source for a feature that reads it) the file's name and the
SHA-256 of its content (of a gzipped file, of its text). Two entries describe the same values when they agree but
for the files' names: a copied model is the same model. ``nbest`` is the digest of the list's text, so that a
record left beside a list that another program replaced since describes nothing.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rerank.config import load_yaml
from rerank.errors import FormatError, RerankError, brief
from rerank.formats.files import STDIO, atomic_output, check_output, display_name, open_binary

RECORD_SUFFIX = ".features.yaml"
CHUNK = 1 << 20

Identity = Mapping[str, Any]  # one feature's entry: kind, options, files (see the module docstring)

_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}  # a file's digest, by its name, inode, size and time


def record_path(nbest: str | os.PathLike[str]) -> Path:
    """Where the record of the scored list ``nbest`` goes: beside it, ``NBEST.features.yaml``."""
    return Path(f"{nbest}{RECORD_SUFFIX}")


def has_record(output: str | os.PathLike[str]) -> bool:
    """Whether a list written to ``output`` gets a record: a file does; stdout, a device or a FIFO do not."""
    if str(output) == STDIO:
        return False
    checked = check_output(output)
    return not checked.stream and checked.descriptor is None


def content_digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of the content of the file ``path`` (of a gzipped file's text), of a directory's files (a
    pretrained model's: their names and contents, in order), or None where it is neither (stdin, a pipe), whose
    content cannot be read twice. Kept for the process, by the file's name, inode, size and modification time."""
    if str(path) == STDIO:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return _directory_digest(path)
    if not stat.S_ISREG(info.st_mode):
        return None
    key = (os.path.abspath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open_binary(path) as stream:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _directory_digest(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        if not name.startswith(".") and (content := content_digest(os.path.join(path, name))) is not None:
            digest.update(f"{name}\0{content}\0".encode())
    return digest.hexdigest()


def file_entry(path: str | os.PathLike[str], content: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A file's entry in a record: its name (absolute) and the digest of ``content`` (by default, of ``path``
    itself; a model directory's weights file for the directory)."""
    shown = path if str(path) == STDIO else os.path.abspath(path)
    return {"file": display_name(shown), "sha256": content_digest(path if content is None else content)}


@dataclass(frozen=True)
class ScoredRecord:
    """A scored list's record, as read: the digest of the list's text and each feature's entry by label."""

    path: Path
    nbest: str
    features: dict[str, dict[str, Any]]


def write_record(nbest: str | os.PathLike[str], text_sha256: str, features: Mapping[str, Identity]) -> None:
    """The record of the list ``nbest`` (atomically: inside :func:`~rerank.formats.files.committed_together`, with
    the list)."""
    header = f"# what rerank score-nbest computed each feature of {display_name(nbest)} from (read by --reuse)\n"
    with atomic_output(record_path(nbest)) as out:
        out.write(header)
        yaml.safe_dump({"nbest": {"sha256": text_sha256}, "features": {k: dict(v) for k, v in features.items()}},
                       out, sort_keys=False, allow_unicode=True)


def read_record(nbest: str | os.PathLike[str]) -> ScoredRecord | None:
    """The record beside the list ``nbest``, or None where it has none; a record that is not one is an error."""
    path = record_path(nbest)
    if str(nbest) == STDIO or not path.exists():
        return None
    data = load_yaml(path)
    nbest_digest = data.get("nbest", {}).get("sha256") if isinstance(data, dict) and isinstance(
        data.get("nbest"), dict) else None
    features = data.get("features") if isinstance(data, dict) else None
    if not isinstance(nbest_digest, str) or not isinstance(features, dict) or not all(
            isinstance(label, str) and isinstance(entry, dict) for label, entry in features.items()):
        raise FormatError(str(path), None, "a record of a scored n-best list written by rerank score-nbest (nbest: "
                          "{sha256: ...}, features: {LABEL: {kind: ...}})", got=brief(data))
    return ScoredRecord(path, nbest_digest, features)


def describing_record(nbest: str | os.PathLike[str]) -> ScoredRecord | None:
    """The record beside the list ``nbest`` where it describes the list's text as it is, else None."""
    record = read_record(nbest)
    return record if record is not None and content_digest(nbest) == record.nbest else None


def difference(recorded: Identity, current: Identity) -> str | None:
    """What differs between two entries of a feature (the first key that does), or None where they describe
    the same values: ``source /data/other.en (sha256 1f2e3d4c5b6a), not /data/dev.en (sha256 9a8b7c6d5e4f)``."""
    for key in [*current, *(key for key in recorded if key not in current)]:
        was, now = recorded.get(key), current.get(key)
        if _essence(was) != _essence(now) or _unknown(was) or _unknown(now):
            return f"{key} {_shown(was)}, not {_shown(now)}"
    return None


def _essence(value: object) -> object:
    """A value with each file's entry replaced by its digest: what the values depend on."""
    if isinstance(value, dict) and "sha256" in value:
        return value["sha256"]
    if isinstance(value, (list, tuple)):
        return [_essence(item) for item in value]
    return value


def _unknown(value: object) -> bool:
    """Whether ``value`` holds a file whose content is not known (read from a pipe)."""
    if isinstance(value, dict) and "sha256" in value:
        return value["sha256"] is None
    return isinstance(value, (list, tuple)) and any(_unknown(item) for item in value)


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) and "sha256" in value:
        digest = value["sha256"]
        return f"{value.get('file')} ({'sha256 ' + str(digest)[:12] if digest else 'content unknown: not a file'})"
    if isinstance(value, (list, tuple)):
        return " + ".join(_shown(item) for item in value) if value else "none"
    return brief(value)


def carry_record(scored: str | os.PathLike[str], output: str | os.PathLike[str]) -> bool:
    """Give the list ``output``, just written from the lines of the scored list ``scored`` with their features
    unchanged (cut, re-sorted), the features of ``scored``'s record, where one describes ``scored``: False (and
    nothing written) where none does, or ``output`` is not a file."""
    record = describing_record(scored)
    digest = content_digest(output) if record is not None and has_record(output) else None
    if record is None or digest is None:
        return False
    write_record(output, digest, record.features)
    return True


def write_joined_record(parts: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]) -> bool:
    """The record of the list ``output`` joined from the scored lists ``parts``, in order (``merge-shards``),
    where each part has a record that describes it: False (and nothing written) where one has none. Parts whose
    features were computed from different files or options (a language model replaced between two shards' runs)
    are an error: the joined list would mix them."""
    records = [describing_record(part) for part in parts]
    if any(record is None for record in records) or not has_record(output):
        return False
    first = records[0]
    assert first is not None
    for part, record in zip(parts[1:], records[1:], strict=True):
        assert record is not None
        for label in [*first.features, *(label for label in record.features if label not in first.features)]:
            differs = difference(first.features.get(label, {}), record.features.get(label, {}))
            if differs is not None:
                raise RerankError(f"{display_name(part)}: {label} was not scored as in {display_name(parts[0])} "
                                  f"({differs}): score every shard with the same files and options")
    digest = hashlib.sha256()
    for part in parts:
        with open_binary(part) as stream:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
    write_record(output, digest.hexdigest(), first.features)
    return True
