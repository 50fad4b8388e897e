"""Subword units inside a model (``model.subwords``): a sentencepiece model per language whose pieces are
the model's vocabulary, while every input and output stays Moses-tokenized text.

The sentencepiece models are trained with the project's special tokens at ids 0-3 (``<pad> <unk> <s>
</s>``), identity normalisation and byte fallback, so that a piece id is the model's id, any text
encodes (unseen characters as bytes), and decoding the pieces of a tokenized sentence gives back its
tokens exactly. A sentence is its Moses tokens joined by single spaces; a piece that starts with
``▁`` starts a token, which is how scores and attention are summed back onto Moses tokens.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rerank.errors import RerankError, counted
from rerank.formats.files import atomic_binary_output
from rerank.models.config import SubwordConfig
from rerank.models.vocab import EOS_ID, PAD_ID, SPECIALS, Vocabulary

SRC_SUBWORDS, TRG_SUBWORDS = "subwords.src.model", "subwords.trg.model"  # beside vocab.src.txt, vocab.trg.txt
WORD_START = "\u2581"  # ▁
SAMPLE_SEED = 1  # of the sample of a long text that the pieces are learnt from
_SAMPLING = threading.Lock()  # sentencepiece's seed is global to the process: set and used under this lock
T = TypeVar("T")


def train_subwords(sample: list[str], config: SubwordConfig, path: str | os.PathLike[str], text: str) -> None:
    """Learn the pieces of the sentences ``sample`` (at most ``config.sample_sentences``, see
    :func:`reservoir_sample`) and write the sentencepiece model to ``path``. Errors name ``text``, the files the
    sample was drawn from (``path`` may be in a directory that is removed on the way out)."""
    import sentencepiece as spm  # only where subwords are used

    if not any(sample):
        raise RerankError(f"{text}: no text to learn subword units from")
    model = io.BytesIO()
    pad, unk, bos, eos = SPECIALS
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sample), model_writer=model, model_type=config.type, vocab_size=config.vocab_size,
            character_coverage=1.0, byte_fallback=True, normalization_rule_name="identity",
            pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece=pad, unk_piece=unk, bos_piece=bos, eos_piece=eos,
            input_sentence_size=0, shuffle_input_sentence=False, hard_vocab_limit=False, max_sentence_length=1 << 16,
            num_threads=os.cpu_count() or 1, minloglevel=2)
    except RuntimeError as e:
        raise RerankError(f"{text}: sentencepiece could not learn {config.vocab_size:,} {config.type} subword units "
                          f"from a sample of {counted(len(sample), 'line')}: {_sentencepiece_reason(e)}") from None
    with atomic_binary_output(path) as out:
        out.write(model.getvalue())


def _sentencepiece_reason(error: RuntimeError) -> str:
    """sentencepiece's message without its status and C++ source location (``INTERNAL: src/x.cc(638) [cond]``),
    or the condition that failed where it says nothing more."""
    text = " ".join(str(error).split())
    found = re.fullmatch(r"(?:\w+: )?\S+\(\d+\) \[(.*?)\]\s*(.*)", text)
    if found is None:
        return text
    condition, message = found.groups()
    if condition == "!sentences_.empty()":
        return f"no line of at most {1 << 16:,} bytes"
    return message or f"its check {condition} failed"


def reservoir_sample(items: Iterable[T], size: int, rng: np.random.Generator) -> list[T]:
    """``size`` of ``items`` drawn uniformly in one pass (all of them, in order, when there are fewer)."""
    sample: list[T] = []
    for seen, sentence in enumerate(items):
        if seen < size:
            sample.append(sentence)
        else:
            slot = int(rng.integers(seen + 1))
            if slot < size:
                sample[slot] = sentence
    return sample


class SubwordVocabulary(Vocabulary):
    """The pieces of a sentencepiece model as a vocabulary: :meth:`encode` takes Moses tokens, :meth:`words`
    gives them back."""

    def __init__(self, processor: Any, model_bytes: bytes):
        """``processor``: a ``sentencepiece.SentencePieceProcessor`` loaded from ``model_bytes``."""
        super().__init__([processor.id_to_piece(i) for i in range(processor.get_piece_size())])
        self.processor = processor
        self.digest = hashlib.sha256(model_bytes).hexdigest()
        self.starts = np.array([t.startswith(WORD_START) for t in self.tokens])

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SubwordVocabulary:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise RerankError(f"{path}: cannot read: {e.strerror}") from None
        import sentencepiece as spm

        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(data)
        except RuntimeError:
            raise RerankError(f"{path}: refused: expected a sentencepiece model (written by rerank prepare), "
                              "not a cut or other file") from None
        if tuple(processor.id_to_piece(i) for i in range(min(4, processor.get_piece_size()))) != SPECIALS:
            raise RerankError(f"{path}: refused: a sentencepiece model whose first pieces are {' '.join(SPECIALS)} "
                              "(made by rerank prepare)")
        return cls(processor, data)

    @classmethod
    def load_matching(cls, vocab_path: str | os.PathLike[str], model_path: str | os.PathLike[str]) -> SubwordVocabulary:
        """The subword model at ``model_path``, checked against the vocabulary file beside it (the one the
        weights were trained with)."""
        vocab = cls.from_file(model_path)
        listed = Vocabulary.load(vocab_path)
        if listed.tokens != vocab.tokens:
            raise RerankError(f"{model_path}: refused: its pieces are not those of {vocab_path}, the vocabulary the "
                              "weights were trained with")
        return vocab

    def save_model(self, path: str | os.PathLike[str]) -> None:
        with atomic_binary_output(path) as out:
            out.write(self.processor.serialized_model_proto())

    def __contains__(self, token: str) -> bool:
        return True  # every token is spelt by pieces (bytes at worst)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return list(self.processor.encode(" ".join(tokens)))

    def encode_lines(self, lines: list[str]) -> list[list[int]]:
        """The piece ids of many lines of tokens (in C++, several threads)."""
        return [list(ids) for ids in self.processor.encode(lines, num_threads=os.cpu_count() or 1)]

    def resample(self, rows: list[list[int]], alpha: float, seed: int) -> list[list[int]]:
        """Each of ``rows`` (piece ids, without ``</s>``) segmented anew by sampling: its pieces decoded to its
        text and encoded with sentencepiece's sampling (BPE-dropout with merge dropout ``alpha`` for a BPE
        model, subword sampling with smoothing ``alpha`` for a unigram model). The same ``seed`` gives the same
        pieces: one call starts sentencepiece's generator afresh from the process-global seed, and with one
        encoding thread the rows draw from it in order (with several, which thread takes a row varies)."""
        import sentencepiece as spm

        if not rows:
            return []
        texts = self.processor.decode(rows)
        with _SAMPLING:
            spm.set_random_generator_seed(seed)
            sampled = self.processor.encode(texts, enable_sampling=True, alpha=alpha, nbest_size=-1, num_threads=1)
        return [list(ids) for ids in sampled]

    def words(self, ids: Iterable[int]) -> list[str]:
        kept = list(_until_eos(ids))
        return str(self.processor.decode(kept)).split() if kept else []

    def word_of_piece(self, ids: Sequence[int]) -> np.ndarray:
        starts = self.starts[np.asarray(ids, dtype=np.int64)] if len(ids) else np.zeros(0, dtype=bool)
        if len(starts):
            starts[0] = True
        return np.cumsum(starts) - 1


def _until_eos(ids: Iterable[int]) -> Iterator[int]:
    for i in ids:
        if i == EOS_ID:
            return
        if i != PAD_ID:
            yield i
