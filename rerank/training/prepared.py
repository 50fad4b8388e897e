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

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rerank.errors import RerankError
from rerank.models.subwords import SubwordVocabulary
from rerank.models.vocab import EOS_ID, PAD_ID, Vocabulary
from rerank.training.data import Batch, bucketed_order
from rerank.training.prepare import FORMAT, MANIFEST, SIDES, VERSION, id_dtype, sha256, shard_name


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
        self.ids: list[tuple[np.ndarray, np.ndarray]] = []
        self.index: list[np.ndarray] = []
        for k, shard in enumerate(m["shards"]):
            sides = []
            for side, vocab in zip(SIDES, (self.src_vocab, self.trg_vocab), strict=True):
                path = self._checked(shard[side], verify)
                dtype = np.dtype(m["dtypes"][side])
                if dtype != id_dtype(len(vocab)) or path.stat().st_size % dtype.itemsize:
                    raise self._error(path, f"ids of type {id_dtype(len(vocab))} for its vocabulary")
                sides.append(np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype))
            path = self._checked(shard["idx"], verify)
            try:
                index = np.load(path, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError) as e:
                raise self._error(path, f"an index array ({e})") from None
            pairs = shard["pairs"]
            if index.shape != (pairs + 1, 2) or index.dtype != np.dtype("<u8") or index[0].tolist() != [0, 0] or \
                    index[-1].tolist() != [len(sides[0]), len(sides[1])]:
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
        if verify and sha256(path) != record["sha256"]:
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
        src, trg = np.empty(len(indices), np.int64), np.empty(len(indices), np.int64)
        shards = self._locate(indices)
        for k in np.unique(shards):
            mask = shards == k
            local = indices[mask] - self.starts[k]
            index = self.index[k]
            spans = index[local + 1].astype(np.int64) - index[local].astype(np.int64)
            src[mask], trg[mask] = spans[:, 0], spans[:, 1]
        return src, trg

    def batch(self, indices: np.ndarray, reverse_target: bool = False) -> Batch:
        """The pairs ``indices`` as a padded batch, each side followed by ``</s>`` (the target read right to left
        first when ``reverse_target``)."""
        src_len, trg_len = self.lengths(indices)
        src = np.full((len(indices), int(src_len.max()) + 1), PAD_ID, dtype=np.int64)
        trg = np.full((len(indices), int(trg_len.max()) + 1), PAD_ID, dtype=np.int64)
        for row, (i, k) in enumerate(zip(indices.tolist(), self._locate(indices).tolist(), strict=True)):
            local = i - int(self.starts[k])
            (s0, t0), (s1, t1) = self.index[k][local].tolist(), self.index[k][local + 1].tolist()
            src[row, : s1 - s0] = self.ids[k][0][s0:s1]
            target = self.ids[k][1][t0:t1]
            trg[row, : t1 - t0] = target[::-1] if reverse_target else target
        src[np.arange(len(indices)), src_len] = EOS_ID
        trg[np.arange(len(indices)), trg_len] = EOS_ID
        return Batch(torch.from_numpy(src), torch.from_numpy(src_len + 1), torch.from_numpy(trg),
                     torch.from_numpy(trg_len + 1))


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
    try:
        for side in SIDES:
            _ = manifest["vocabularies"][side]["file"], manifest["dtypes"][side], manifest["settings"]
            if "subwords" in manifest:
                _ = manifest["subwords"][side]["file"]
        for shard in manifest["shards"]:
            _ = [shard[part]["file"] for part in (*SIDES, "idx")], int(shard["pairs"])
        int(manifest["pairs"])
    except (KeyError, TypeError, ValueError) as e:
        raise RerankError(f"{path}: refused: a manifest without its {e} entry") from None
    return manifest


class EpochPlan:
    """The batches of one epoch (see the module's docstring), each an array of pair indices; ``plan[b]``
    rebuilds only the pool batch ``b`` is in."""

    def __init__(self, corpus: PreparedCorpus, batch_size: int, window: int, pool_pairs: int, seed: int, epoch: int):
        self.corpus, self.batch_size, self.window = corpus, batch_size, window
        self.seed, self.epoch = seed, epoch
        n = len(corpus)
        self.block = batch_size * window
        blocks = math.ceil(n / self.block)
        per_pool = max(1, pool_pairs // self.block)
        if blocks <= per_pool:
            self.pools = [np.arange(blocks)]
        else:
            order = np.random.default_rng([seed, epoch]).permutation(blocks)
            self.pools = [order[i: i + per_pool] for i in range(0, blocks, per_pool)]
        sizes = [sum(min(self.block, n - b * self.block) for b in pool.tolist()) for pool in self.pools]
        self.first = np.cumsum([0, *(math.ceil(s / batch_size) for s in sizes)])
        self._pool = -1
        self._batches: list[np.ndarray] = []

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
        src, trg = self.corpus.lengths(members)
        keys = (src + 1) + (trg + 1) / 1000  # with </s>: sort by source, then target length
        return [members[batch] for batch in bucketed_order(keys, self.batch_size, self.window, rng)]
