"""What the features of pretrained translation models (``hf``, ``ctranslate2``) share: their config keys, Moses'
text made the model's text, the model's tokens and batches, and the forms of the value (sum, per word, channel).

Moses' side of a pair is tokenized and escaped (``un groupe d&apos; hommes``), often lowercased; a pretrained
model's tokenizer reads plain text. Each side is unescaped and detokenized with sacremoses' Moses detokenizer
for its language (``source_language``, ``target_language``) before the model's tokenizer sees it
(``un groupe d'hommes``); case is left as it is. A multilingual model is told the languages by their codes in
that model (``source_code``, ``target_code``: NLLB's ``eng_Latn``, M2M-100's ``en``, mBART's ``en_XX``).

ln p(hypothesis | source) sums the log-probabilities of the hypothesis' subwords and of the end of sentence,
under teacher forcing, as the model's own loss counts them; a token the model is made to start with (the
target language's code of NLLB, M2M-100 or mBART, forced in generation) is not counted. The per-word form
divides by Moses' tokens plus one, as ``nmt`` does, whatever the model's subwords, so that the two stay
comparable.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import RerankError, install_extra, shorten
from rerank.formats.tokens import Pair, Tokens


def install_hint(package: str, extra: str) -> str:
    """The line that says an optional package is missing and how to install it."""
    return f"needs the {package} package, which is not installed: {install_extra(extra)}"


def check_installed(packages: Sequence[str], extra: str) -> None:
    """A ValueError (a config error once read) unless every one of ``packages`` can be imported."""
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise ValueError(install_hint(package, extra))


@dataclass(frozen=True)
class PretrainedConfig:
    """The keys of every pretrained model's feature; each kind's ``Config`` adds its own."""

    model: str  # the model's directory: Hugging Face's save_pretrained (or a download), or a CTranslate2 conversion
    source_language: str  # the language of Moses' source side (en), for its detokenizer
    target_language: str  # the language of Moses' target side (fr)
    name: str | None = None  # the label; none: the kind's (HF0, CT0; HFChan0, CTChan0 for a channel model)
    channel: bool = False  # ln p(source | hypothesis) under a target-to-source model
    per_word: bool = False  # also ln p per Moses token (the sum divided by the predicted side's tokens plus one)
    sum: bool = True  # the summed ln p; false (with per_word): the per-word value alone
    source_code: str | None = None  # the source language's code in a multilingual model (eng_Latn, en, en_XX)
    target_code: str | None = None  # the target language's code in it (fra_Latn, fr, fr_XX)
    detokenize: bool = True  # false: Moses' tokens joined by spaces (unescaped) are the model's text
    max_tokens: int = 4096  # padded subwords per batch (of the source or the target, the longer)
    device: str = "cpu"  # where the model runs: cpu, cuda or cuda:N

    def __post_init__(self) -> None:
        if not self.sum and not self.per_word:
            raise ValueError("sum: false leaves no value: give per_word: true with it")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: expected at least 1, got {self.max_tokens}")
        kind, _, index = self.device.partition(":")
        if kind not in ("cpu", "cuda") or (index and (kind == "cpu" or not index.isdigit())):
            raise ValueError(f"device: expected cpu, cuda or cuda:N, got {self.device!r}")


class MosesText:
    """Moses' tokens of one language as the plain text a pretrained model's tokenizer reads."""

    def __init__(self, language: str, detokenize: bool = True):
        from sacremoses import MosesDetokenizer

        self.detokenizer = MosesDetokenizer(language)
        self.detokenize = detokenize

    def __call__(self, tokens: Tokens) -> str:
        if self.detokenize:
            return str(self.detokenizer.detokenize(list(tokens), unescape=True))
        return str(self.detokenizer.unescape_xml(" ".join(tokens)))


@dataclass(frozen=True)
class Encoded:
    """Pairs as the model's ids: the sources', the targets' (the labels, as the tokenizer writes them), and
    which of each target's tokens count in ln p."""

    sources: list[list[int]]
    targets: list[list[int]]
    counted: list[list[bool]]


class PretrainedModel:
    """A pretrained translation model's ln p(hypothesis | source) (see the module docstring); each kind (``hf``,
    ``ctranslate2``) loads its model and scores batches of ids (:meth:`batch_log_probs`)."""

    KIND = ""  # the kind's name in YAML
    LABEL = ""  # its default label, and a channel model's
    CHANNEL_LABEL = ""
    needs_source = True

    @classmethod
    def label(cls, config: PretrainedConfig) -> str:
        if config.name:
            return config.name
        return cls.CHANNEL_LABEL if config.channel else cls.LABEL

    def __init__(self, config: PretrainedConfig, tokenizer_directory: str):
        self.config = config
        self.name = self.label(config)
        self.dims = int(config.sum) + int(config.per_word)
        self.where = f"{self.KIND} feature ({config.model})"
        languages = (config.source_language, config.target_language)
        codes = (config.source_code, config.target_code)
        if config.channel:  # the model reads the hypothesis and predicts the source
            languages, codes = languages[::-1], codes[::-1]
        self.read_text = MosesText(languages[0], config.detokenize)
        self.predicted_text = MosesText(languages[1], config.detokenize)
        self.tokenizer = load_tokenizer(tokenizer_directory, *codes, where=self.where)
        self.max_positions = max_positions(tokenizer_directory)
        # what the tokenizer puts around every target but its end of sentence: a language code the model is made
        # to start with (NLLB, M2M-100, mBART), not counted
        self.forced = set(self._ids([""], target=True)[0]) - {self.tokenizer.eos_token_id}

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        if self.config.channel:
            pairs = [(hypothesis, source) for source, hypothesis in pairs]
        total = self.log_probs(pairs)
        if not self.config.per_word:
            return total.reshape(-1, 1)
        tokens = np.fromiter((len(predicted) + 1 for _, predicted in pairs), dtype=np.float64, count=len(pairs))
        return np.stack([total, total / tokens] if self.config.sum else [total / tokens], axis=1)

    def log_probs(self, pairs: Sequence[Pair]) -> np.ndarray:
        """ln p(predicted | read) of each pair (the model reads the first side and predicts the second)."""
        if not pairs:
            return np.zeros(0)
        encoded = self.encode(pairs)
        lengths = np.fromiter((max(len(s), len(t)) for s, t in zip(encoded.sources, encoded.targets, strict=True)),
                              dtype=np.int64, count=len(pairs))
        from rerank.models.batching import longest_first, token_batches

        total = np.zeros(len(pairs))
        for batch in token_batches(longest_first(lengths), lengths, self.config.max_tokens):
            rows = batch.tolist()
            total[batch] = self.batch_log_probs([encoded.sources[i] for i in rows],
                                                [encoded.targets[i] for i in rows],
                                                [encoded.counted[i] for i in rows])
        return total

    def encode(self, pairs: Sequence[Pair]) -> Encoded:
        """The pairs' ids, each distinct read side detokenized and encoded once."""
        distinct: dict[tuple[str, ...], int] = {}
        source_of = [distinct.setdefault(tuple(read), len(distinct)) for read, _ in pairs]
        sources = self._ids([self.read_text(read) for read in distinct], target=False)
        targets = self._ids([self.predicted_text(predicted) for _, predicted in pairs], target=True)
        return Encoded([sources[i] for i in source_of], targets,
                       [[token not in self.forced for token in target] for target in targets])

    def _ids(self, texts: list[str], target: bool) -> list[list[int]]:
        try:
            ids = self.tokenizer(text_target=texts)["input_ids"] if target else self.tokenizer(texts)["input_ids"]
        except Exception as e:  # a tokenizer's own error: its message says what it could not read
            raise RerankError(f"{self.where}: its tokenizer cannot encode one of {len(texts)} sentences "
                              f"(the first: {shorten(texts[0], 60)!r}): {type(e).__name__}: "
                              f"{shorten(str(e), 120)}") from None
        for text, sentence in zip(texts, ids, strict=True):
            if self.max_positions is not None and len(sentence) > self.max_positions:
                raise RerankError(f"{self.where}: expected sentences of at most {self.max_positions} subwords "
                                  f"(the model's positions), got {len(sentence)} for {shorten(text, 60)!r}")
            if not sentence:
                raise RerankError(f"{self.where}: its tokenizer encodes {shorten(text, 60)!r} as no token")
        return [list(sentence) for sentence in ids]

    def batch_log_probs(self, sources: list[list[int]], targets: list[list[int]],
                        counted: list[list[bool]]) -> np.ndarray:
        """The summed log-probabilities of the counted target tokens of each pair of one batch."""
        raise NotImplementedError


def load_tokenizer(directory: str, read_code: str | None, predicted_code: str | None, where: str) -> Any:
    """The Hugging Face tokenizer saved in ``directory``, told the languages' codes where they are given."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as transformers_logging

    quiet: Any = transformers_logging  # no progress bars, no warnings: errors are ours to report
    quiet.set_verbosity_error()
    quiet.disable_progress_bar()
    codes = {key: code for key, code in (("src_lang", read_code), ("tgt_lang", predicted_code)) if code}
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True, **codes)
    except Exception as e:  # transformers raises OSError, ValueError, KeyError, ... for a directory it cannot read
        raise RerankError(f"{where}: {directory} holds no Hugging Face tokenizer that loads "
                          f"({type(e).__name__}: {shorten(str(e), 120)})") from None
    for key, code in codes.items():  # a code is a token of its own (NLLB's, mBART's), or M2M-100's __code__
        if all(tokenizer.convert_tokens_to_ids(token) in (None, tokenizer.unk_token_id)
               for token in (code, f"__{code}__")):
            raise RerankError(f"{where}: the tokenizer of {directory} has no language code {code!r} "
                              f"({'source' if key == 'src_lang' else 'target'}_code)")
    return tokenizer


def max_positions(directory: str) -> int | None:
    """The most tokens a sentence may have in the model of ``directory`` (its ``config.json``'s
    ``max_position_embeddings``), or None where it sets no such bound."""
    try:
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            value = json.load(f).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None



def padded(sequences: Sequence[Sequence[Any]], value: Any, dtype: type[Any] = np.int64) -> np.ndarray:
    """A (B, L) array of ``sequences`` padded at the end with ``value``."""
    width = max(map(len, sequences))
    out = np.full((len(sequences), width), value, dtype=dtype)
    for row, sequence in enumerate(sequences):
        out[row, :len(sequence)] = sequence
    return out


def model_directory(directory: str, expected: str, what: str, where: str) -> None:
    """A RerankError unless ``directory`` holds the file ``expected`` that every ``what`` has."""
    if not os.path.isfile(os.path.join(directory, expected)):
        raise RerankError(f"{where}: {directory} is not {what} (it has no {expected})")
