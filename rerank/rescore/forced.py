"""Moses' own feature values for given hypotheses, by constrained (forced) decoding.

Moses' ``ConstrainedDecoding`` feature keeps only the partial hypotheses whose output occurs in a
reference and, at the end, those whose output equals it (a score of -inf prunes the others). With
one reference per input line, the best derivation Moses finds under its usual search and weights is
that hypothesis' derivation, and the n-best list prints its features as for any other translation.
The constraint's own score is not printed: the feature is not tuneable.

One Moses process decodes all pairs (the tables are loaded once): input line ``k`` is the source of
pair ``k`` and the reference file holds ``k<TAB>hypothesis``. Two details of this build
(mosesdecoder 34452895) matter:

* an unknown source word copied to the output never equals the same word of a reference (Moses
  gives the copy ``UNK`` factors where the reference's words have none, and ``Word::operator==``
  compares every factor), so without ``max-unknowns`` every hypothesis that keeps an unknown word
  would be unreachable. We set ``max-unknowns=-1``, under which an unknown word may stand for any
  reference word, ask for a few distinct derivations per line, and keep the best one whose words are
  the hypothesis' words. Where none has them (several unknown words, which then match in any order),
  a second run asks for more derivations of those lines;
* a reference line must not be empty and a word must not contain Moses' factor delimiter ``|``:
  such hypotheses are unreachable without asking Moses (the Moses tokenizer escapes ``|``, so no
  phrase table produces one).

Loading a large text phrase table takes most of a short run (the 1.2M-pair Multi30k table: about 8 s
and 1 GB); with ``filter_script`` (Moses' ``filter-model-given-input.pl``) the tables are first
filtered to the phrases of the sources, as Moses users do before decoding a test set, once per run.
Filtering keeps every pair whose source phrase occurs in a sentence, so the translation options, and
the features, are the same.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rerank import processes
from rerank.errors import FormatError, RerankError, counted
from rerank.formats.files import display_name, work_file, work_text
from rerank.formats.moses_ini import MosesIni
from rerank.formats.nbest import FeatureLayout, NBestEntry, group_by_sentence, read_nbest

logger = logging.getLogger(__name__)

SentenceHypothesis = tuple[int, tuple[str, ...]]  # (sentence id, hypothesis words)
FACTOR_DELIMITER = "|"
CONSTRAINT_FEATURE = "ConstrainedDecoding"


@dataclass(frozen=True)
class ForcedDecoding:
    """How to run Moses: the decoder, its configuration and its search options."""

    moses: str
    moses_ini: str
    threads: int = 1
    distinct: int = 3  # derivations asked per line: an unknown word may match another word (see above)
    retry_distinct: int = 100  # asked again where only other words came back
    moses_args: tuple[str, ...] = ()  # more Moses options, e.g. ("-s", "500")
    filter_script: str | None = None  # filter-model-given-input.pl, to filter the tables to the sources first


@dataclass
class ForcedResult:
    """Moses' best derivation for each pair, or None where Moses cannot produce the hypothesis."""

    derivations: list[NBestEntry | None]
    layout: FeatureLayout | None  # the features Moses printed; None if nothing was reachable
    seconds: float = 0.0
    skipped: int = 0  # unreachable without asking Moses (empty, or a word with '|')

    @property
    def reachable(self) -> int:
        return sum(d is not None for d in self.derivations)

    @property
    def unreachable(self) -> int:
        return len(self.derivations) - self.reachable


def force_decode(settings: ForcedDecoding, sources: Sequence[str], pairs: Sequence[SentenceHypothesis]) -> ForcedResult:
    """Moses' features for each ``(sentence id, words)`` pair, ``sources[id]`` being its source."""
    moses = find_moses(settings.moses)
    ini = constrained_ini(settings.moses_ini)
    if settings.filter_script is not None and not os.path.isfile(settings.filter_script):
        raise RerankError(f"{settings.filter_script}: cannot read: no such file (the phrase-table filter script)")
    asked = [k for k, (_, words) in enumerate(pairs) if decodable(words)]
    derivations: list[NBestEntry | None] = [None] * len(pairs)
    if not asked:
        return ForcedResult(derivations, None, 0.0, len(pairs))
    for k in asked:
        if not 0 <= pairs[k][0] < len(sources):
            raise RerankError(f"forced decoding: sentence id {pairs[k][0]} has no source line "
                              f"(the source has {counted(len(sources), 'line')})")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rerank-forced-") as directory:
        work = Path(directory)
        if settings.filter_script is not None:
            ini = filtered_ini(settings.filter_script, settings.moses_ini,
                               sorted({sources[pairs[k][0]] for k in asked}), work)
        logger.info("forced decoding of %s with %s (%s)", counted(len(asked), "hypothesis", "hypotheses"),
                    display_name(settings.moses_ini), counted(settings.threads, "thread"))
        layout, retry = _decode(moses, ini, settings, settings.distinct, sources, pairs, asked, derivations, work)
        if retry:  # only other words came back: unknown words in another order, ask for more derivations
            logger.info("forced decoding again of %s with %d derivations each",
                        counted(len(retry), "hypothesis", "hypotheses"), settings.retry_distinct)
            layout2, _ = _decode(moses, ini, settings, settings.retry_distinct, sources, pairs, retry, derivations,
                                 work)
            layout = layout or layout2
    return ForcedResult(derivations, layout, time.perf_counter() - start, len(pairs) - len(asked))


def _decode(moses: str, ini: MosesIni, settings: ForcedDecoding, distinct: int, sources: Sequence[str],
            pairs: Sequence[SentenceHypothesis], asked: Sequence[int], derivations: list[NBestEntry | None], work: Path
            ) -> tuple[FeatureLayout | None, list[int]]:
    """One Moses run on ``pairs[k]`` for each ``k`` in ``asked``, filling ``derivations[k]``; returns the
    features' layout and the ``k`` for which Moses found derivations, none of them with the pair's words."""
    references = work / "references.txt"
    with work_text(work / "input.txt") as source_file, work_text(references) as reference_file:
        for line, k in enumerate(asked):
            sentence_id, words = pairs[k]
            source_file.write(sources[sentence_id] + "\n")
            reference_file.write(f"{line}\t{' '.join(words)}\n")
    constrained = MosesIni(ini.lines, ini.path)
    constrained.lines.insert(ini.headers["feature"] + 1, f"{CONSTRAINT_FEATURE} path={references} max-unknowns=-1")
    constrained.write(work / "moses.ini")
    nbest = work / "forced.nbest"
    command = [moses, "-f", str(work / "moses.ini"), "-threads", str(settings.threads),
               "-n-best-list", str(nbest), str(distinct), "distinct", *settings.moses_args]
    run_moses(command, work / "input.txt", work / "moses.log", settings.moses_ini)
    return _read_derivations(nbest, [pairs[k][1] for k in asked], derivations, asked)


def decodable(words: Sequence[str]) -> bool:
    """Whether Moses can be asked for ``words``: not empty, no factor delimiter in a word."""
    return bool(words) and not any(FACTOR_DELIMITER in w for w in words)


def find_moses(moses: str) -> str:
    """The path of the Moses decoder ``moses`` (a path, or a name on PATH)."""
    found = shutil.which(moses)
    if found is None:
        raise RerankError(f"{moses}: the Moses decoder was not found or is not executable (--moses)")
    return found


def constrained_ini(path: str) -> MosesIni:
    """``path`` read and checked: a ``[feature]`` section, no constraint of its own, existing files."""
    if not os.path.isfile(path):
        raise RerankError(f"{path}: cannot read: no such file")
    ini = MosesIni.read(path)
    if "feature" not in ini.headers:
        raise FormatError(ini.path, None, "a [feature] section (forced decoding needs a moses.ini with "
                          "feature functions, as Moses writes it since 2013)")
    for feature in ini.features():
        if feature.kind == CONSTRAINT_FEATURE:
            raise FormatError(ini.path, feature.index + 1, f"no {CONSTRAINT_FEATURE} feature (forced "
                              "decoding adds its own)", got=ini.lines[feature.index])
        target = feature.args.get("path")
        if target is not None and not (os.path.exists(target) or glob.glob(glob.escape(target) + ".*")):
            raise FormatError(ini.path, feature.index + 1, f"path= naming an existing file for {feature.name}",
                              got=target)
    return ini


def filtered_ini(script: str, ini_path: str, sources: Sequence[str], work: Path) -> MosesIni:
    """The moses.ini that ``script`` (``filter-model-given-input.pl``) writes for ``sources`` in ``work``."""
    source, target, log = work / "filter-input.txt", work / "filtered", work / "filter.log"
    with work_text(source) as f:
        f.writelines(f"{s}\n" for s in sources)
    start = time.perf_counter()
    with work_file(log) as out:
        status = processes.run(["perl", script, str(target), ini_path, str(source)], stdin=subprocess.DEVNULL,
                               stdout=out, stderr=subprocess.STDOUT)
    if status != 0 or not (target / "moses.ini").is_file():
        raise RerankError(f"{ini_path}: filtering its tables with {script} failed (exit status {status}): "
                          f"{_moses_complaint(log)}")
    logger.info("filtered the tables of %s to %s in %.1f s", display_name(ini_path),
                counted(len(sources), "source sentence"), time.perf_counter() - start)
    return MosesIni.read(target / "moses.ini")


def run_moses(command: list[str], source: Path, log: Path, ini_name: str) -> None:
    """Run Moses on ``source``, its stderr in ``log``; a failure names its most telling line."""
    with open(source, "rb") as stdin, work_file(log) as stderr:
        status = processes.run(command, stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr)
    if status != 0:
        raise RerankError(f"{ini_name}: Moses ({command[0]}) failed with exit status {status}: "
                          f"{_moses_complaint(log)}")


def _moses_complaint(log: Path) -> str:
    """The line of Moses' stderr that says what went wrong (an exception or error), else its last line."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if any(word in line for word in ("Exception", "ERROR", "Error", "error")):
            return line
    return lines[-1] if lines else "no message"


def _read_derivations(nbest: Path, wanted: Sequence[tuple[str, ...]], derivations: list[NBestEntry | None],
                      asked: Sequence[int]) -> tuple[FeatureLayout | None, list[int]]:
    """Fill ``derivations[asked[line]]`` with the best entry of Moses' list for input ``line`` whose words
    are ``wanted[line]``; returns the features' layout and the ``asked[line]`` that had only other words."""
    layout = None
    missed: list[int] = []
    if not nbest.exists():
        return None, missed
    for line, entries in group_by_sentence(read_nbest(nbest)):
        if not 0 <= line < len(wanted):
            raise RerankError(f"forced decoding: Moses' n-best list has an id {line} beyond its input")
        layout = entries[0].layout
        for entry in entries:  # best first
            if tuple(entry.tokens) == wanted[line]:
                derivations[asked[line]] = entry
                break
        else:
            missed.append(asked[line])
    return layout, missed
