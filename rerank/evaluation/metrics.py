"""Corpus BLEU and chrF with sacrebleu, and BLEU by source-sentence length, for one or more systems.

BLEU by length follows Bahdanau et al. (2014), Fig. 2: the test sentences are put in buckets by
the number of source words (fixed-width buckets, or quantiles so that each bucket holds about the
same number of sentences), and corpus BLEU is computed within each bucket.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rerank.errors import FormatError, RerankError
from rerank.formats.files import atomic_output, display_name, read_text
from rerank.formats.relatedness import warn_unrelated
from rerank.formats.tokenization import looks_tokenized, warn_style_mismatch

if TYPE_CHECKING:
    from rerank.tune.oracle import ListOracle

logger = logging.getLogger(__name__)

QUANTILES = {"quartiles": 4, "quintiles": 5, "deciles": 10}


@dataclass(frozen=True)
class Bucket:
    """Sentences whose source length (in words) is within ``low..high``."""

    low: int
    high: int
    indices: tuple[int, ...]

    @property
    def label(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


@dataclass(frozen=True)
class SystemScores:
    """One system's corpus scores, sacrebleu's one-line summaries, and its BLEU in each length bucket."""

    name: str
    path: str
    bleu: float
    chrf: float
    bleu_summary: str
    chrf_summary: str
    bucket_bleu: tuple[float, ...]


@dataclass(frozen=True)
class Evaluation:
    systems: tuple[SystemScores, ...]
    references: tuple[str, ...]
    num_sentences: int
    bleu_signature: str
    chrf_signature: str
    source: str | None = None
    buckets: tuple[Bucket, ...] = ()


def check_bucket_scheme(text: str) -> str:
    """``text`` if it names a bucket scheme (a width in words, or quartiles/quintiles/deciles)."""
    if text in QUANTILES or (text.isdigit() and int(text) > 0):
        return text
    raise ValueError(f"expected a bucket width in words (e.g. 10) or one of {', '.join(QUANTILES)}, got {text!r}")


def length_buckets(lengths: Sequence[int], scheme: str) -> list[Bucket]:
    """Sentence indices grouped by length: buckets ``1-N, N+1-2N, ...`` of width ``N``, or quantiles.

    Quantile edges are actual lengths, so sentences of the same length always share a bucket, and
    there may be fewer buckets than asked for when many sentences have the same length. Empty
    buckets are left out.
    """
    check_bucket_scheme(scheme)
    values = np.asarray(lengths, dtype=np.int64)
    if values.size == 0:
        return []
    if scheme in QUANTILES:
        parts = QUANTILES[scheme]
        highs = np.unique(np.quantile(values, np.arange(1, parts + 1) / parts, method="inverted_cdf")).astype(int)
        keys = np.searchsorted(highs, values)  # first edge >= length
        lows = [int(values.min())] + [int(h) + 1 for h in highs[:-1]]
        bounds = list(zip(lows, (int(h) for h in highs), strict=True))
    else:
        width = int(scheme)
        keys = np.maximum(values - 1, 0) // width  # 1..width -> 0, width+1..2*width -> 1; an empty line -> 0
        lows = [min(int(values.min()), 1)] + [k * width + 1 for k in range(1, int(keys.max()) + 1)]
        bounds = [(low, k * width + width) for k, low in enumerate(lows)]
    buckets = []
    for key, (low, high) in enumerate(bounds):
        indices = tuple(int(i) for i in np.flatnonzero(keys == key))
        if indices:
            buckets.append(Bucket(low, high, indices))
    return buckets


def read_aligned(path: str | os.PathLike[str], anchor: str, expected: int) -> list[str]:
    """The lines of ``path``, which must be ``expected`` lines long, one for each line of ``anchor``."""
    lines = read_text(path)
    name = display_name(path)
    if len(lines) < expected:
        raise FormatError(name, len(lines) + 1, f"{expected} lines, one for each line of {anchor}, "
                          f"but the file ends after {len(lines)}")
    if len(lines) > expected:
        raise FormatError(name, expected + 1, f"the end of the file after {expected} lines, as {anchor} has",
                          got=lines[expected])
    return lines


def evaluate(systems: Sequence[tuple[str, str]], references: Sequence[str], *, source: str | None = None,
             buckets: str = "10", tokenize: str | None = None, lowercase: bool = False) -> Evaluation:
    """Score every ``(name, path)`` system against the references, and by source length with a ``source``.

    ``tokenize`` is sacreBLEU's tokenizer; unset, it is ``13a`` (sacreBLEU's default, for detokenized text),
    with a warning where the first system's text looks tokenized already, as sacreBLEU warns."""
    from sacrebleu.metrics.bleu import BLEU
    from sacrebleu.metrics.chrf import CHRF

    from rerank.tune.stats import check_tokenizer

    chosen, tokenize = tokenize is not None, tokenize or "13a"
    try:
        check_tokenizer(tokenize)
    except ValueError as e:
        raise RerankError(f"--tokenize: {e}") from None
    if not systems or not references:
        raise RerankError("expected at least one hypothesis file and one reference file")
    anchor = display_name(systems[0][1])
    hypotheses = [read_text(systems[0][1])]
    if not hypotheses[0]:
        raise FormatError(anchor, 1, "at least one line of translation", got="an empty file")
    count = len(hypotheses[0])
    if not chosen and looks_tokenized(hypotheses[0]):
        logger.warning("%s looks tokenized (most lines end in a separated punctuation mark), and BLEU's default "
                       "tokenizer 13a, for detokenized text, splits its tokens again, which inflates BLEU: give "
                       "--tokenize none to count its tokens as they are (as `rerank tune` does), or --tokenize 13a "
                       "to keep the default without this warning", anchor)
    hypotheses += [read_aligned(path, anchor, count) for _, path in systems[1:]]
    refs = [read_aligned(path, anchor, count) for path in references]
    for (_, path), hyps in zip(systems, hypotheses, strict=True):
        warn_style_mismatch(hyps, refs[0], display_name(path), display_name(references[0]), logger, lowercase)
        warn_unrelated(hyps, refs[0], display_name(path), display_name(references[0]), logger)
    groups = length_buckets([len(line.split()) for line in read_aligned(source, anchor, count)], buckets) \
        if source is not None else []
    # tokenize "none" says the text is tokenized already: sacreBLEU's warning about that is noise
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase, force=tokenize == "none")
    chrf = CHRF(lowercase=lowercase)
    scores = []
    for (name, path), hyps in zip(systems, hypotheses, strict=True):
        corpus_bleu = bleu.corpus_score(hyps, refs)
        corpus_chrf = chrf.corpus_score(hyps, refs)
        by_length = tuple(_subset_bleu(bleu, hyps, refs, group.indices) for group in groups)
        scores.append(SystemScores(name, display_name(path), corpus_bleu.score, corpus_chrf.score,
                                   str(corpus_bleu), str(corpus_chrf), by_length))
    return Evaluation(tuple(scores), tuple(display_name(r) for r in references), count,
                      str(bleu.get_signature()), str(chrf.get_signature()),
                      display_name(source) if source is not None else None, tuple(groups))


def _subset_bleu(bleu: Any, hypotheses: list[str], references: list[list[str]], indices: tuple[int, ...]) -> float:
    return bleu.corpus_score([hypotheses[i] for i in indices],
                             [[ref[i] for i in indices] for ref in references]).score


def format_evaluation(evaluation: Evaluation) -> str:
    """A plain-text report: a score table, sacrebleu's summaries and signatures, and BLEU by length."""
    names = [s.name for s in evaluation.systems]
    width = max(len("system"), *(len(n) for n in names))
    lines = [f"{evaluation.num_sentences} sentences, references: {', '.join(evaluation.references)}",
             f"{'system':<{width}}  {'BLEU':>6}  {'chrF':>6}"]
    lines += [f"{s.name:<{width}}  {s.bleu:6.2f}  {s.chrf:6.2f}" for s in evaluation.systems]
    lines.append("")
    lines += [f"{s.name}: {s.bleu_summary}" for s in evaluation.systems]
    lines += [f"{s.name}: {s.chrf_summary}" for s in evaluation.systems]
    lines += [f"BLEU signature: {evaluation.bleu_signature}", f"chrF signature: {evaluation.chrf_signature}"]
    if evaluation.buckets:
        columns = [max(len(n), 6) for n in names]
        lines += ["", f"BLEU by source length (words of {evaluation.source})",
                  f"{'length':>7}  {'sentences':>9}  "
                  + "  ".join(f"{n:>{w}}" for n, w in zip(names, columns, strict=True))]
        for i, bucket in enumerate(evaluation.buckets):
            values = "  ".join(f"{s.bucket_bleu[i]:>{w}.2f}" for s, w in zip(evaluation.systems, columns, strict=True))
            lines.append(f"{bucket.label:>7}  {len(bucket.indices):>9}  {values}")
    return "\n".join(lines) + "\n"


def evaluation_json(evaluation: Evaluation) -> dict[str, Any]:
    """The report as JSON-ready data, for scripts."""
    data = asdict(evaluation)
    data["buckets"] = [{"low": b.low, "high": b.high, "label": b.label, "sentences": len(b.indices)}
                       for b in evaluation.buckets]
    for system in data["systems"]:
        system["bucket_bleu"] = list(system["bucket_bleu"])
    data["references"] = list(data["references"])
    return data


def write_json(evaluation: Evaluation, path: str | os.PathLike[str]) -> None:
    with atomic_output(path) as out:
        json.dump(evaluation_json(evaluation), out, indent=2, ensure_ascii=False)
        out.write("\n")


def list_oracles(nbests: Sequence[str], references: Sequence[str], tokenize: str = "none"
                 ) -> tuple[dict[str, ListOracle], str]:
    """``rerank oracle``: each n-best list's BLEU with its first hypotheses and with the oracle's, by the
    list's name as given, and the BLEU signature."""
    from rerank.tune.oracle import list_oracle
    from rerank.tune.stats import BleuStatistics

    texts = [read_text(path) for path in references]
    for path, lines in zip(references, texts, strict=True):
        if len(lines) != len(texts[0]):
            raise FormatError(display_name(path), None, f"{len(texts[0])} lines, as {display_name(references[0])} "
                              "has", got=f"{len(lines)} lines")
    try:
        bleu = BleuStatistics(texts, tokenize=tokenize)
    except ValueError as e:
        raise RerankError(f"--tokenize: {e}") from None
    results = {str(path): list_oracle(path, bleu, reference_name=display_name(references[0]), references=texts[0])
               for path in nbests}
    return results, bleu.signature()


def write_oracle_json(results: dict[str, ListOracle], path: str | os.PathLike[str]) -> None:
    """``rerank oracle --json``: first, oracle and hypotheses_per_sentence of each list, by its name."""
    data = {name: {"first": r.first, "oracle": r.oracle, "hypotheses_per_sentence": r.hypotheses_per_sentence}
            for name, r in results.items()}
    with atomic_output(path) as out:
        out.write(json.dumps(data, indent=2) + "\n")
