"""Training data prepared once: one streaming pass over parallel text (or the distinct phrase pairs of a
Moses table) that counts the vocabularies and writes every pair as token ids into binary shards.

A prepared directory holds, beside ``manifest.json`` (the settings, line counts, and the size and
SHA-256 of every file):

- ``vocab.src.txt`` and ``vocab.trg.txt``, the frequency shortlists, as a model directory has them (or a
  trained model's own vocabularies, ``vocabularies``: the ids of a model that is fine-tuned on the data);
- for each shard ``NNNNN``: ``shard-NNNNN.src`` and ``shard-NNNNN.trg``, the ids of every pair's words
  one after the other (no ``</s>``), little-endian ``uint16`` where the vocabulary has at most 65,536
  entries, ``uint32`` otherwise; ``shard-NNNNN.idx``, ``(pairs + 1, 2)`` ``uint64`` offsets into them
  (source, target), so that pair ``i`` is ``src[idx[i, 0]:idx[i + 1, 0]]``.

The pass reads each line once and keeps no Python object per token beyond a chunk: the words of a
chunk get provisional ids (a dictionary of the words seen so far, which grows with the vocabulary,
not with the corpus), written at once as ``uint32`` and counted with ``numpy.bincount``; at the end
the shortlists are ranked (falling frequency, ties alphabetical, as :meth:`Vocabulary.build`) and
each shard is rewritten once through a lookup table into its final ids. Pairs with a side longer
than ``max_length`` words are skipped (and not counted), as training skips them.

Everything is written into a temporary directory beside the output, renamed into place at the end:
a directory with a manifest is complete, anything else (a run killed, a full disk) is never read.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from rerank.errors import FormatError, RerankError
from rerank.formats.files import atomic_output, display_name, output_directory, read_lines, work_file
from rerank.formats.phrase_table import read_phrase_table
from rerank.formats.shards import file_digest
from rerank.models.config import SubwordConfig
from rerank.models.subwords import (
    SAMPLE_SEED,
    SRC_SUBWORDS,
    TRG_SUBWORDS,
    SubwordVocabulary,
    reservoir_sample,
    train_subwords,
)
from rerank.models.vocab import SPECIALS, SRC_VOCAB, TRG_VOCAB, UNK_ID, Vocabulary
from rerank.training.config import DataConfig

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = "rerank prepared corpus"
VERSION = 2  # 2: the manifest's checksum
CHUNK_PAIRS = 20_000
REMAP_TOKENS = 1 << 22  # ids rewritten per step at the end (16 MiB of uint32)
SIDES = ("src", "trg")
SUBWORD_FILES = (SRC_SUBWORDS, TRG_SUBWORDS)


@dataclass(frozen=True)
class PrepareSettings:
    """What the pass does with the text; recorded in the manifest."""

    src_vocab_size: int = 15000
    trg_vocab_size: int = 15000
    max_length: int = 50
    shard_pairs: int = 1_000_000  # pairs of a shard, at most
    subwords: SubwordConfig | None = None  # pieces in place of word shortlists (the vocabulary sizes unused)
    vocabularies: str | None = None  # a model directory whose vocabularies (and subword models) are the data's

    def __post_init__(self) -> None:
        for key in ("src_vocab_size", "trg_vocab_size", "max_length", "shard_pairs"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key}: expected an integer of at least 1, got {getattr(self, key)}")


def input_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What the manifest says of an input file: its absolute path, size and modification time (enough to
    tell that prepared data made from it are out of date)."""
    try:
        stat = os.stat(path)
    except OSError as e:
        raise RerankError(f"{path}: cannot read: {e.strerror}") from None
    return {"path": os.path.abspath(path), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def prepare_parallel(source: str | os.PathLike[str], target: str | os.PathLike[str], output: str | os.PathLike[str],
                     settings: PrepareSettings = PrepareSettings(), replace: bool = False) -> dict[str, Any]:
    """Prepare two line-aligned text files (gzip read too) into the directory ``output``; returns the
    manifest. Files of different lengths are refused at the first line one of them lacks."""
    inputs = {"source": input_record(source), "target": input_record(target)}
    return _prepare(lambda: _parallel_pairs(source, target), "parallel", inputs, output, settings, replace)


def prepare_phrase_table(table: str | os.PathLike[str], output: str | os.PathLike[str],
                         settings: PrepareSettings = PrepareSettings(), replace: bool = False) -> dict[str, Any]:
    """Prepare each distinct (source, target) pair of a Moses phrase table once, in table order, ignoring
    its frequency (Cho et al. 2014, Sec. 4.1)."""
    inputs = {"phrase_table": input_record(table)}
    return _prepare(lambda: _distinct_phrase_pairs(table), "phrase_table", inputs, output, settings, replace)


def _parallel_pairs(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    sources, targets = read_lines(source), read_lines(target)
    done = object()
    for lineno, (src, trg) in enumerate(itertools.zip_longest(sources, targets, fillvalue=done), 1):
        if src is done or trg is done:
            shorter, longer, rest = (source, target, targets) if src is done else (target, source, sources)
            total = lineno + sum(1 for _ in rest)
            raise FormatError(display_name(shorter), lineno, f"as many lines as {display_name(longer)} ({total:,})",
                              got="end of file")
        yield src[1], trg[1]  # type: ignore[index]


class _DistinctDigests:
    """The 128-bit digests seen so far, in sorted levels whose sizes merge like a binary counter: membership
    by binary search, 16 bytes per distinct pair, no Python object per pair."""

    def __init__(self) -> None:
        self.levels: list[np.ndarray] = []

    def __contains__(self, digest: bytes) -> bool:
        key = np.frombuffer(digest, dtype="S16")
        for level in self.levels:
            i = int(np.searchsorted(level, key[0]))
            if i < len(level) and level[i] == key[0]:
                return True
        return False

    def add(self, digests: np.ndarray) -> None:
        level = np.sort(digests)
        while self.levels and len(self.levels[-1]) <= len(level):
            level = np.sort(np.concatenate([self.levels.pop(), level]))
        self.levels.append(level)


def _distinct_phrase_pairs(table: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """The distinct (source, target) pairs of a table, first occurrences in order. Pairs are told apart by
    a 128-bit BLAKE2b digest of their text (two distinct pairs of a 100M-line table share one with a
    probability below 1e-22)."""
    seen = _DistinctDigests()
    fresh: list[bytes] = []
    fresh_set: set[bytes] = set()
    for entry in read_phrase_table(table):
        src, trg = entry.source, entry.target
        digest = hashlib.blake2b(f"{src}\t{trg}".encode(), digest_size=16).digest()
        if digest in fresh_set or digest in seen:
            continue
        fresh.append(digest)
        fresh_set.add(digest)
        if len(fresh) == CHUNK_PAIRS:
            seen.add(np.array(fresh, dtype="S16"))
            fresh, fresh_set = [], set()
        yield src, trg


class _Side(Protocol):
    """How one language's lines become ids: words (a shortlist counted in the pass) or subword pieces."""

    @property
    def tokens(self) -> int: ...

    def split(self, lines: list[str]) -> list[list[Any]]: ...

    def encode(self, units: list[Any]) -> np.ndarray: ...

    def shortlist(self, size: int) -> tuple[Vocabulary, np.ndarray]: ...


class _Words:
    """Provisional ids of one language's words (first seen, first numbered) and their counts."""

    def __init__(self, fixed: Vocabulary | None = None) -> None:
        self.ids: dict[str, int] = {}
        self.counts = np.zeros(0, dtype=np.int64)
        self.fixed = fixed  # the vocabulary the final ids are of, in place of the shortlist

    def split(self, lines: list[str]) -> list[list[str]]:
        return [line.split() for line in lines]

    def encode(self, tokens: list[str]) -> np.ndarray:
        """Ids of a chunk's words (the pairs kept), counted."""
        ids = self.ids
        for word in sorted(set(tokens).difference(ids)):  # sorted: the same ids in every run
            ids[word] = len(ids)
        encoded = np.fromiter(map(ids.__getitem__, tokens), dtype=np.uint32, count=len(tokens))
        counts = np.bincount(encoded, minlength=len(ids))
        counts[: len(self.counts)] += self.counts
        self.counts = counts
        return encoded

    def shortlist(self, size: int) -> tuple[Vocabulary, np.ndarray]:
        """The ``size`` most frequent words (ties alphabetical) and the lookup table from provisional to
        final ids (``<unk>`` for the others; a special token written in the text is that token); with a fixed
        vocabulary, that vocabulary and the ids of the words in it."""
        words = [""] * len(self.ids)
        for word, i in self.ids.items():
            words[i] = word
        if self.fixed is not None:
            ids = self.fixed.ids
            return self.fixed, np.fromiter((ids.get(word, UNK_ID) for word in words), dtype=np.uint32,
                                           count=len(words))
        counts = self.counts
        ranked = sorted((i for i, w in enumerate(words) if w not in SPECIALS), key=lambda i: (-counts[i], words[i]))
        kept = ranked[:size]
        table = np.full(len(words), UNK_ID, dtype=np.uint32)
        table[kept] = np.arange(len(SPECIALS), len(SPECIALS) + len(kept), dtype=np.uint32)
        for special_id, special in enumerate(SPECIALS):
            if special in self.ids:
                table[self.ids[special]] = special_id
        return Vocabulary([*SPECIALS, *(words[i] for i in kept)]), table

    @property
    def tokens(self) -> int:
        return int(self.counts.sum())


class _Pieces:
    """The piece ids of one language's lines under its subword model (the model's ids are the final ones)."""

    def __init__(self, vocab: SubwordVocabulary):
        self.vocab = vocab
        self.pieces = 0

    @property
    def tokens(self) -> int:
        return self.pieces

    def split(self, lines: list[str]) -> list[list[int]]:
        return self.vocab.encode_lines(lines)

    def encode(self, pieces: list[int]) -> np.ndarray:
        self.pieces += len(pieces)
        return np.array(pieces, dtype=np.uint32)

    def shortlist(self, size: int) -> tuple[Vocabulary, np.ndarray]:
        return self.vocab, np.arange(len(self.vocab), dtype=np.uint32)


def id_dtype(vocab_size: int) -> np.dtype[Any]:
    """The smallest unsigned integer type of the ids of a vocabulary: uint16 up to 65,536 entries."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


class _ShardWriter:
    """Provisional ``uint32`` ids and lengths of the pairs, shard by shard, in directory ``work``."""

    def __init__(self, work: Path, shard_pairs: int):
        self.work, self.shard_pairs = work, shard_pairs
        self.shards: list[int] = []  # pairs of each closed shard
        self.lengths: list[list[np.ndarray]] = [[], []]
        self.files: list[BinaryIO] = []
        self.pairs = 0

    def add(self, ids: tuple[np.ndarray, np.ndarray], lengths: tuple[np.ndarray, np.ndarray]) -> None:
        if not self.files:
            self.files = [work_file(self._provisional(len(self.shards), side)) for side in SIDES]
        for f, side_ids in zip(self.files, ids, strict=True):
            side_ids.tofile(f)
        for kept, side_lengths in zip(self.lengths, lengths, strict=True):
            kept.append(side_lengths)
        self.pairs += len(lengths[0])
        if self.pairs >= self.shard_pairs:
            self.close_shard()

    def close_shard(self) -> None:
        if not self.files:
            return
        for f in self.files:
            f.close()
        lengths = [np.concatenate(side) for side in self.lengths]
        offsets = np.zeros((self.pairs + 1, 2), dtype="<u8")
        for column, side_lengths in enumerate(lengths):
            np.cumsum(side_lengths, out=offsets[1:, column])
        with work_file(self.work / f"{shard_name(len(self.shards))}.idx") as f:
            np.save(f, offsets, allow_pickle=False)
        self.shards.append(self.pairs)
        self.files, self.lengths, self.pairs = [], [[], []], 0

    def _provisional(self, shard: int, side: str) -> Path:
        return self.work / f"{shard_name(shard)}.{side}.provisional"

    def finish(self, tables: tuple[np.ndarray, np.ndarray], dtypes: tuple[np.dtype[Any], np.dtype[Any]]) -> None:
        """Rewrite every shard's provisional ids through ``tables`` into their final files."""
        self.close_shard()
        for shard in range(len(self.shards)):
            for side, table, dtype in zip(SIDES, tables, dtypes, strict=True):
                provisional = self._provisional(shard, side)
                ids = np.memmap(provisional, dtype=np.uint32, mode="r") if provisional.stat().st_size else \
                    np.zeros(0, dtype=np.uint32)
                with work_file(self.work / f"{shard_name(shard)}.{side}") as out:
                    for start in range(0, len(ids), REMAP_TOKENS):
                        table[ids[start: start + REMAP_TOKENS]].astype(dtype).tofile(out)
                del ids
                provisional.unlink()


def same_vocabularies(manifest: dict[str, Any], model: Path) -> bool:
    """Whether prepared data (their ``manifest``) have the vocabularies of the model in directory ``model``."""
    return all(manifest["vocabularies"][side]["sha256"] == file_digest(model / name)[1]
               for side, name in zip(SIDES, (SRC_VOCAB, TRG_VOCAB), strict=True))


def shard_name(shard: int) -> str:
    return f"shard-{shard:05d}"


def manifest_checksum(manifest: dict[str, Any]) -> str:
    """The SHA-256 of a manifest's content (its ``checksum`` left out): an edited setting, line count or file
    record no longer matches it."""
    content = {key: value for key, value in manifest.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def file_record(path: Path) -> dict[str, Any]:
    size, digest = file_digest(path)
    return {"file": path.name, "bytes": size, "sha256": digest}


def _learn_subwords(pairs: Iterator[tuple[str, str]], config: SubwordConfig, work: Path,
                    inputs: dict[str, Any]) -> tuple[_Pieces, _Pieces]:
    """One pass that samples the pairs (seeded), then a sentencepiece model per language learnt from the sample
    (or one of both languages, ``joint``); an error names the input files (``inputs``), never ``work``."""
    sample = reservoir_sample(pairs, config.sample_sentences, np.random.default_rng(SAMPLE_SEED))
    texts = _side_texts(inputs)
    if config.joint:  # one model of both languages' text, written for each side
        train_subwords([line for pair in sample for line in pair], config, work / SUBWORD_FILES[0],
                       " and ".join(dict.fromkeys(texts)))
        with work_file(work / SUBWORD_FILES[1]) as copy:
            copy.write((work / SUBWORD_FILES[0]).read_bytes())
        joint = _Pieces(SubwordVocabulary.from_file(work / SUBWORD_FILES[0]))
        return joint, joint
    models = []
    for column, name in enumerate(SUBWORD_FILES):
        train_subwords([pair[column] for pair in sample], config, work / name, texts[column])
        models.append(_Pieces(SubwordVocabulary.from_file(work / name)))
    return models[0], models[1]


def _model_sides(model: Path, subwords: bool, work: Path) -> tuple[_Side, _Side]:
    """Each language's ids as the model in directory ``model`` has them: its shortlists, or its subword models
    (copied into ``work``)."""
    if not subwords:
        return _Words(Vocabulary.load(model / SRC_VOCAB)), _Words(Vocabulary.load(model / TRG_VOCAB))
    sides = []
    for vocab_name, name in zip((SRC_VOCAB, TRG_VOCAB), SUBWORD_FILES, strict=True):
        vocab = SubwordVocabulary.load_matching(model / vocab_name, model / name)
        with work_file(work / name) as copy:
            copy.write((model / name).read_bytes())
        sides.append(_Pieces(vocab))
    return sides[0], sides[1]


def _side_texts(inputs: dict[str, Any]) -> tuple[str, str]:
    """The text each side's pieces are learnt from, as the user named it: the source and target files, or a
    phrase table's source and target phrases."""
    if "phrase_table" in inputs:
        table = display_name(inputs["phrase_table"]["path"])
        return f"{table} (its source phrases)", f"{table} (its target phrases)"
    return display_name(inputs["source"]["path"]), display_name(inputs["target"]["path"])


Pairs = Callable[[], Iterator[tuple[str, str]]]  # a new stream of the pairs at each call


def _prepare(pairs: Pairs, kind: str, inputs: dict[str, Any], output: str | os.PathLike[str],
             settings: PrepareSettings, replace: bool) -> dict[str, Any]:
    out = Path(output)
    if out.exists() and not replace:
        raise RerankError(f"{out}: already exists; delete it or choose another directory")
    if not out.parent.is_dir():
        raise RerankError(f"{out}: cannot write: directory {str(out.parent)!r} does not exist")
    with output_directory(out, "the prepared data", replaceable=lambda directory: replace) as work:
        manifest = _write(pairs, kind, inputs, work, settings)
    return manifest


def _write(pairs: Pairs, kind: str, inputs: dict[str, Any], work: Path,
           settings: PrepareSettings) -> dict[str, Any]:
    started = time.monotonic()
    sides: tuple[_Side, _Side] = (_Words(), _Words())
    records: dict[str, dict[str, Any]] = {}
    if settings.vocabularies is not None:
        sides = _model_sides(Path(settings.vocabularies), settings.subwords is not None, work)
    elif settings.subwords is not None:
        sides = _learn_subwords(pairs(), settings.subwords, work, inputs)
    if settings.subwords is not None:
        records["subwords"] = {side: file_record(work / name) for side, name in zip(SIDES, SUBWORD_FILES, strict=True)}
    writer = _ShardWriter(work, settings.shard_pairs)
    lines = skipped = 0
    stream = pairs()
    while chunk := list(itertools.islice(stream, min(CHUNK_PAIRS, settings.shard_pairs - writer.pairs))):
        lines += len(chunk)
        units = (sides[0].split([s for s, _ in chunk]), sides[1].split([t for _, t in chunk]))
        lengths = tuple(np.fromiter(map(len, side), dtype=np.int64, count=len(chunk)) for side in units)
        keep = (lengths[0] <= settings.max_length) & (lengths[1] <= settings.max_length)
        if not keep.all():
            skipped += int((~keep).sum())
            units = tuple(list(itertools.compress(side, keep)) for side in units)  # type: ignore[assignment]
            lengths = tuple(side[keep] for side in lengths)
        if not len(lengths[0]):
            continue
        ids = tuple(side.encode(list(itertools.chain.from_iterable(part))) for side, part in zip(sides, units,
                                                                                                strict=True))
        writer.add(ids, lengths)  # type: ignore[arg-type]
    pairs_kept = lines - skipped
    if not pairs_kept:
        unit = "words" if settings.subwords is None else "pieces"
        what = "no lines" if not lines else f"no pair of at most {settings.max_length} {unit} on both sides"
        raise RerankError(f"{', '.join(display_name(i['path']) for i in inputs.values())}: {what}: nothing to "
                          "train on")
    (src_vocab, src_table), (trg_vocab, trg_table) = (sides[0].shortlist(settings.src_vocab_size),
                                                      sides[1].shortlist(settings.trg_vocab_size))
    dtypes = (id_dtype(len(src_vocab)), id_dtype(len(trg_vocab)))
    writer.finish((src_table, trg_table), dtypes)
    src_vocab.save(work / SRC_VOCAB)
    trg_vocab.save(work / TRG_VOCAB)
    manifest = {
        "format": FORMAT, "version": VERSION, "kind": kind, "inputs": inputs, "settings": asdict(settings),
        "lines": lines, "pairs": pairs_kept, "skipped_longer": skipped,
        "tokens": {name: side.tokens for name, side in zip(SIDES, sides, strict=True)},
        "dtypes": {side: dtype.str for side, dtype in zip(SIDES, dtypes, strict=True)},
        "vocabularies": {side: file_record(work / name) for side, name in zip(SIDES, (SRC_VOCAB, TRG_VOCAB),
                                                                              strict=True)},
        **records,
        "shards": [{"pairs": n, **{part: file_record(work / f"{shard_name(k)}.{part}") for part in (*SIDES, "idx")}}
                   for k, n in enumerate(writer.shards)],
    }
    manifest["checksum"] = manifest_checksum(manifest)
    with atomic_output(work / MANIFEST) as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    seconds = time.monotonic() - started
    logger.info("prepared %s pairs (%s longer than %d words skipped) in %d shards: %.0f pairs/s; vocabularies %d "
                "source, %d target", f"{pairs_kept:,}", f"{skipped:,}", settings.max_length, len(writer.shards),
                lines / max(seconds, 1e-9), len(src_vocab), len(trg_vocab))
    return manifest


PREPARED_DIR = "data"  # where `rerank train` prepares the text of its config, in the model directory


def prepared_data(data: DataConfig, subwords: SubwordConfig | None, model_dir: Path,
                  vocabularies: str | None = None) -> tuple[Path, bool]:
    """The prepared directory of a data config: ``data.prepared``, or the model directory's ``data/``, prepared
    from the config's text now (with ``vocabularies``, a model directory's) unless it was from the same files
    (size and time) with the same settings and vocabularies; and whether it was prepared now (its files'
    checksums were just taken: no need to check them again)."""
    if data.prepared is not None:
        return Path(data.prepared), False
    settings = PrepareSettings(data.src_vocab_size, data.trg_vocab_size, data.max_length, subwords=subwords,
                               vocabularies=vocabularies)
    if data.train is not None:
        kind = "parallel"
        inputs = {"source": input_record(data.train.source), "target": input_record(data.train.target)}
    else:
        assert data.phrase_table is not None  # DataConfig has one of the three
        kind, inputs = "phrase_table", {"phrase_table": input_record(data.phrase_table)}
    out = model_dir / PREPARED_DIR
    try:
        with open(out / MANIFEST, encoding="utf-8") as f:
            manifest = json.load(f)
        current = (manifest.get("version"), manifest.get("kind"), manifest.get("inputs"), manifest.get("settings")) \
            == (VERSION, kind, inputs, asdict(settings))
        if current and vocabularies is not None:  # the model's vocabularies as they are now
            current = same_vocabularies(manifest, Path(vocabularies))
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        current = False
    if current:
        logger.info("%s: prepared from the same files with the same settings, read as it is", out)
        return out, False
    logger.info("preparing the training data into %s", out)
    if data.train is not None:
        prepare_parallel(data.train.source, data.train.target, out, settings, replace=True)
    else:
        assert data.phrase_table is not None
        prepare_phrase_table(data.phrase_table, out, settings, replace=True)
    return out, True
