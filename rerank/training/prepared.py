"""Reading prepared training data (:mod:`rerank.training.prepare`): the shards memory-mapped, checked
against their manifest, and the batches of an epoch drawn pool by pool.

Training holds no per-pair state of the whole corpus: the corpus is cut into blocks of
``batch_size × bucket_window`` consecutive pairs; each epoch visits the blocks in a random order,
``pool_pairs`` pairs' worth of blocks at a time (a pool); inside a pool the pairs are shuffled,
sorted by length within windows of ``bucket_window`` batches, cut into batches, and the batches
shuffled. Every draw is seeded by (seed, epoch, pool), so batch ``b`` of epoch ``e`` is found again
after a restart by rebuilding one pool, and the memory is that of one pool's index. A corpus that
fits in one pool is shuffled as a whole (the order :func:`bucketed_order` gives, as before).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rerank.config import from_dict
from rerank.errors import RerankError, brief
from rerank.formats.shards import file_digest
from rerank.models.subwords import SubwordVocabulary
from rerank.models.vocab import EOS_ID, PAD_ID, Vocabulary
from rerank.training.config import DataConfig
from rerank.training.data import Batch, bucketed_order, token_bucketed_order
from rerank.training.prepare import (
    FORMAT,
    MANIFEST,
    SIDES,
    VERSION,
    PrepareSettings,
    id_dtype,
    manifest_checksum,
    shard_name,
)


class PreparedCorpus:
    """The pairs of a prepared directory; ``verify`` checks every file's SHA-256 against the manifest (sizes
    and the index's shape are always checked)."""

    def __init__(self, directory: str | os.PathLike[str], verify: bool = True):
        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory)
        m = self.manifest
        vocab_files = [self._checked(m["vocabularies"][side], verify) for side in SIDES]
        if "subwords" in m:  # the pieces of each language's subword model
            model_files = [self._checked(m["subwords"][side], verify) for side in SIDES]
            self.src_vocab: Vocabulary = SubwordVocabulary.load_matching(vocab_files[0], model_files[0])
            self.trg_vocab: Vocabulary = SubwordVocabulary.load_matching(vocab_files[1], model_files[1])
        else:
            self.src_vocab, self.trg_vocab = Vocabulary.load(vocab_files[0]), Vocabulary.load(vocab_files[1])
        self.ids: list[tuple[_ArrayFile, _ArrayFile]] = []
        self.index: list[_ArrayFile] = []
        for k, shard in enumerate(m["shards"]):
            sides = []
            for side, vocab in zip(SIDES, (self.src_vocab, self.trg_vocab), strict=True):
                path = self._checked(shard[side], verify)
                dtype = np.dtype(m["dtypes"][side])
                if dtype != id_dtype(len(vocab)) or path.stat().st_size % dtype.itemsize:
                    raise self._error(path, f"ids of type {id_dtype(len(vocab))} for its vocabulary")
                sides.append(_ArrayFile(path, dtype))
            path = self._checked(shard["idx"], verify)
            pairs = shard["pairs"]
            index = _npy_file(path, (pairs + 1, 2), np.dtype("<u8"), self._error)
            if index.read(0, 2).tolist() != [0, 0] or index.read(2 * pairs, 2 * pairs + 2).tolist() != \
                    [sides[0].items, sides[1].items]:
                raise self._error(path, f"offsets of {pairs:,} pairs into {shard_name(k)}'s ids")
            self.ids.append((sides[0], sides[1]))
            self.index.append(index)
        self.starts = np.cumsum([0, *(s["pairs"] for s in m["shards"])])
        if self.starts[-1] != m["pairs"] or not m["pairs"]:
            raise self._error(self.directory / MANIFEST, f"{m['pairs']:,} pairs in its shards")

    def _checked(self, record: dict[str, Any], verify: bool) -> Path:
        path = self.directory / record["file"]
        try:
            size = path.stat().st_size
        except OSError as e:
            raise self._error(path, f"a file of the prepared data ({e.strerror})") from None
        if size != record["bytes"]:
            raise self._error(path, f"{record['bytes']:,} bytes as {MANIFEST} says, got {size:,} (truncated or "
                                    "replaced)")
        if verify and file_digest(path)[1] != record["sha256"]:
            raise self._error(path, f"the SHA-256 {MANIFEST} gives (the file is corrupted or was changed)")
        return path

    @staticmethod
    def _error(path: Path, expected: str) -> RerankError:
        return RerankError(f"{path}: refused: expected {expected}; prepare the data again")

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _locate(self, indices: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, indices, side="right") - 1

    def lengths(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Source and target lengths (in words, without ``</s>``) of the pairs ``indices``."""
        offsets = self._offsets(indices)
        return offsets[:, 0, 1] - offsets[:, 0, 0], offsets[:, 1, 1] - offsets[:, 1, 0]

    def range_lengths(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The lengths of the pairs ``start`` to ``stop`` - 1, read at once where they are in one shard."""
        k = int(self._locate(np.array([start]))[0])
        if stop > self.starts[k + 1]:
            return self.lengths(np.arange(start, stop))
        local = start - int(self.starts[k])
        rows = self.index[k].read(2 * local, 2 * (local + stop - start + 1)).reshape(-1, 2).astype(np.int64)
        spans = np.diff(rows, axis=0)
        return spans[:, 0], spans[:, 1]

    def _offsets(self, indices: np.ndarray) -> np.ndarray:
        """(N, 2, 2): each pair's (start, end) of its (source, target) ids in its shard."""
        offsets = np.empty((len(indices), 2, 2), dtype=np.int64)
        for row, (i, k) in enumerate(zip(indices.tolist(), self._locate(indices).tolist(), strict=True)):
            local = i - int(self.starts[k])
            offsets[row] = self.index[k].read(2 * local, 2 * local + 4).reshape(2, 2).T
        return offsets

    def batch(self, indices: np.ndarray, reverse_target: bool = False) -> Batch:
        """The pairs ``indices`` as a padded batch, each side followed by ``</s>`` (the target read right to left
        first when ``reverse_target``)."""
        offsets = self._offsets(indices)
        src_len, trg_len = offsets[:, 0, 1] - offsets[:, 0, 0], offsets[:, 1, 1] - offsets[:, 1, 0]
        src = np.full((len(indices), int(src_len.max()) + 1), PAD_ID, dtype=np.int64)
        trg = np.full((len(indices), int(trg_len.max()) + 1), PAD_ID, dtype=np.int64)
        for row, k in enumerate(self._locate(indices).tolist()):
            (s0, s1), (t0, t1) = offsets[row].tolist()
            src[row, : s1 - s0] = self.ids[k][0].read(s0, s1)
            target = self.ids[k][1].read(t0, t1)
            trg[row, : t1 - t0] = target[::-1] if reverse_target else target
        src[np.arange(len(indices)), src_len] = EOS_ID
        trg[np.arange(len(indices)), trg_len] = EOS_ID
        return Batch(torch.from_numpy(src), torch.from_numpy(src_len + 1), torch.from_numpy(trg),
                     torch.from_numpy(trg_len + 1))


class _ArrayFile:
    """A flat little-endian array in a file, read by position (``os.pread``): nothing is mapped into memory, so
    what training has read does not stay in its resident memory, and threads may read at once."""

    def __init__(self, path: Path, dtype: np.dtype[Any], offset: int = 0):
        self.path, self.dtype, self.offset = path, dtype, offset
        self.fd = os.open(path, os.O_RDONLY)
        self.items = (os.fstat(self.fd).st_size - offset) // dtype.itemsize

    def read(self, start: int, stop: int) -> np.ndarray:
        size = (stop - start) * self.dtype.itemsize
        data = os.pread(self.fd, size, self.offset + start * self.dtype.itemsize)
        if len(data) != size:
            raise RerankError(f"{self.path}: refused: it ends before item {stop:,} (truncated while training?); "
                              "prepare the data again")
        return np.frombuffer(data, dtype=self.dtype)

    def __del__(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.close(self.fd)


def _npy_file(path: Path, shape: tuple[int, ...], dtype: np.dtype[Any],
              error: Callable[[Path, str], RerankError]) -> _ArrayFile:
    """The array of a ``.npy`` file of the given shape and type, read by position."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            header = np.lib.format.read_array_header_1_0(f) if version == (1, 0) else \
                np.lib.format.read_array_header_2_0(f)
            offset = f.tell()
    except (ValueError, OSError) as e:
        raise error(path, f"an index array ({e})") from None
    if header != (shape, False, dtype) or os.path.getsize(path) - offset != math.prod(shape) * dtype.itemsize:
        raise error(path, f"offsets of {shape[0] - 1:,} pairs")
    return _ArrayFile(path, dtype, offset)


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of a prepared directory, checked for its format and version."""
    path = directory / MANIFEST
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except OSError as e:
        raise RerankError(f"{path}: cannot read: {e.strerror} (is {directory} prepared data, made by `rerank "
                          "prepare`?)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise RerankError(f"{path}: refused: expected the JSON manifest of prepared data ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RerankError(f"{path}: refused: expected the manifest of prepared data (format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise RerankError(f"{path}: refused: prepared data of version {manifest.get('version')!r}, this rerank reads "
                          f"version {VERSION}; prepare the data again")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise RerankError(f"{path}: refused: its content does not match its checksum (the manifest was edited); "
                          "prepare the data again")
    check_manifest(manifest, path)
    return manifest


ID_DTYPES = ("<u2", "<u4")  # what prepare writes ids as (rerank.training.prepare.id_dtype)


def check_manifest(manifest: dict[str, Any], path: Path) -> None:
    """Each entry of a prepared directory's manifest of the type the reader uses, or one
    ``manifest.json: key: expected ...`` error."""
    def expect(ok: bool, key: str, expected: str, value: object) -> None:
        if not ok:
            raise RerankError(f"{path}: {key}: expected {expected}, got {brief(value)}; prepare the data again")

    def count(value: object, key: str) -> None:
        expect(isinstance(value, int) and not isinstance(value, bool) and value >= 0, key,
               "a count (an integer of at least 0)", value)

    def record(value: object, key: str) -> None:
        expect(isinstance(value, dict), key, "a file record {file, bytes, sha256}", value)
        assert isinstance(value, dict)
        name = value.get("file")
        expect(isinstance(name, str) and bool(name) and name == Path(name).name and name not in (".", ".."),
               f"{key}.file", "the name of a file in the prepared directory", name)
        count(value.get("bytes"), f"{key}.bytes")
        digest = value.get("sha256")
        expect(isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest),
               f"{key}.sha256", "a SHA-256 in hexadecimal", digest)

    for key in ("vocabularies", "dtypes", "settings"):
        expect(isinstance(manifest.get(key), dict), key, "a mapping", manifest.get(key))
    for side in SIDES:
        record(manifest["vocabularies"].get(side), f"vocabularies.{side}")
        expect(manifest["dtypes"].get(side) in ID_DTYPES, f"dtypes.{side}", f"one of {', '.join(ID_DTYPES)}",
               manifest["dtypes"].get(side))
        if "subwords" in manifest:
            expect(isinstance(manifest["subwords"], dict), "subwords", "a mapping", manifest["subwords"])
            record(manifest["subwords"].get(side), f"subwords.{side}")
    try:
        from_dict(PrepareSettings, manifest["settings"], str(path), "settings")
    except RerankError as e:
        raise RerankError(f"{e}; prepare the data again") from None
    for key in ("pairs", "lines", "skipped_longer"):
        count(manifest.get(key), key)
    shards = manifest.get("shards")
    expect(isinstance(shards, list), "shards", "a list", shards)
    assert isinstance(shards, list)
    for k, shard in enumerate(shards):
        expect(isinstance(shard, dict), f"shards[{k}]", "a mapping", shard)
        count(shard.get("pairs"), f"shards[{k}].pairs")
        for part in (*SIDES, "idx"):
            record(shard.get(part), f"shards[{k}].{part}")


def check_prepared_settings(manifest: dict[str, Any], data: DataConfig, directory: Path) -> None:
    """The settings of a training config's ``data`` that prepared data fix (vocabulary sizes, max_length) must be
    those the data were prepared with: a config that says otherwise would be ignored, and recorded as if it had
    not been."""
    settings = manifest["settings"]
    keys = ["max_length"] + (["src_vocab_size", "trg_vocab_size"] if settings.get("subwords") is None else [])
    for key in keys:
        if getattr(data, key) != settings.get(key):
            raise RerankError(f"data.{key}: expected {settings.get(key)}, the value {directory} was prepared with "
                              f"({directory / MANIFEST}), got {getattr(data, key)}: give data.{key}: "
                              f"{settings.get(key)}, or prepare the data with {key} {getattr(data, key)}")


class EpochPlan:
    """The batches of one epoch (see the module's docstring), each an array of pair indices; ``plan[b]``
    rebuilds only the pool batch ``b`` is in.

    With ``batch_tokens``, a batch is not ``batch_size`` pairs but as many as fit in ``batch_tokens`` padded
    tokens (pairs × the longest of their sources and targets, ``</s>`` included; fairseq's ``max_tokens``),
    sorted by that length within windows of ``batch_size × window`` pairs; the blocks and pools are the same.
    How many batches a pool makes is then known only by making them: the plan makes every pool once when
    it is built (one pool in memory at a time)."""

    def __init__(self, corpus: PreparedCorpus, batch_size: int, window: int, pool_pairs: int, seed: int, epoch: int,
                 batch_tokens: int | None = None):
        self.corpus, self.batch_size, self.window = corpus, batch_size, window
        self.seed, self.epoch, self.batch_tokens = seed, epoch, batch_tokens
        n = len(corpus)
        self.block = batch_size * window
        blocks = math.ceil(n / self.block)
        per_pool = max(1, pool_pairs // self.block)
        if blocks <= per_pool:
            self.pools = [np.arange(blocks)]
        else:
            order = np.random.default_rng([seed, epoch]).permutation(blocks)
            self.pools = [order[i: i + per_pool] for i in range(0, blocks, per_pool)]
        self._pool = -1
        self._batches: list[np.ndarray] = []
        if batch_tokens is None:
            sizes = [sum(min(self.block, n - b * self.block) for b in pool.tolist()) for pool in self.pools]
            counts = [math.ceil(s / batch_size) for s in sizes]
        else:
            counts = []
            for k in range(len(self.pools)):
                self._pool, self._batches = k, self._pool_batches(k)
                counts.append(len(self._batches))
        self.first = np.cumsum([0, *counts])

    def __len__(self) -> int:
        return int(self.first[-1])

    def __getitem__(self, b: int) -> np.ndarray:
        if not 0 <= b < len(self):
            raise IndexError(b)
        k = int(np.searchsorted(self.first, b, side="right")) - 1
        if k != self._pool:
            self._pool, self._batches = k, self._pool_batches(k)
        return self._batches[b - int(self.first[k])]

    def _pool_batches(self, k: int) -> list[np.ndarray]:
        n = len(self.corpus)
        if len(self.pools) == 1:
            members = np.arange(n)
            rng = np.random.default_rng([self.seed, self.epoch])
        else:
            members = np.concatenate([np.arange(b * self.block, min(n, (b + 1) * self.block))
                                      for b in self.pools[k].tolist()])
            rng = np.random.default_rng([self.seed, self.epoch, k])
        src, trg = (np.concatenate(side) for side in zip(*(
            self.corpus.range_lengths(b * self.block, min(n, (b + 1) * self.block)) for b in self.pools[k].tolist()),
            strict=True))
        if self.batch_tokens is not None:  # sort by the longer side, then the source, then the target
            sizes = np.maximum(src, trg) + 1
            rank = np.empty(len(sizes), dtype=np.int64)
            rank[np.lexsort((trg, src, sizes))] = np.arange(len(sizes))
            return [members[batch] for batch in token_bucketed_order(rank, sizes, self.batch_tokens,
                                                                      self.block, rng)]
        keys = (src + 1) + (trg + 1) / 1000  # with </s>: sort by source, then target length
        return [members[batch] for batch in bucketed_order(keys, self.batch_size, self.window, rng)]
