"""Forced decoding with the real Moses decoder: Moses' own features for any hypothesis, and the union
of n-best lists (`rerank merge-nbest --moses-ini`) in which every line has them.

The system is the sample in ``examples/data`` on three ``val`` sentences and one made-up sentence with
an unknown word, its phrase table filtered to them so that Moses loads in well under a second. Moses'
own n-best list is made here, by the same binary and moses.ini that then forces the hypotheses.
The binary is looked for in ``shared/tools/moses`` beside the repository; the tests skip without it.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import sample_moses_ini

from rerank.cli import main
from rerank.formats.nbest import NBestEntry, read_nbest
from rerank.rescore.forced import ForcedDecoding, force_decode

REPOSITORY = Path(__file__).resolve().parents[2]
MOSES = REPOSITORY.parent / "shared" / "tools" / "moses" / "bin" / "moses"
FILTER = MOSES.parents[1] / "scripts" / "training" / "filter-model-given-input.pl"
EXAMPLES = REPOSITORY / "examples" / "data"
SENTENCES = 3
UNKNOWN = "xyzzy"  # a word the phrase table does not have: Moses copies it to the output
MADE_UP = f"a dog trots on the {UNKNOWN} ."  # "trots" is unknown too: the table has only the sample's phrases
NBEST = 30
MOSES_FEATURES = ("Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0")

pytestmark = pytest.mark.skipif(not os.access(MOSES, os.X_OK),
                                reason=f"the Moses decoder not found in {MOSES.parent}")


@dataclass(frozen=True)
class System:
    moses_ini: Path
    source: Path
    nbest: Path  # Moses' own 30-best list (distinct) of the source
    sources: list[str]

    def entries(self) -> list[NBestEntry]:
        return list(read_nbest(self.nbest))


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> System:
    directory = tmp_path_factory.mktemp("forced")
    sources = (EXAMPLES / "val.en").read_text(encoding="utf-8").splitlines()[:SENTENCES] + [MADE_UP]
    source = directory / "source.en"
    source.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    moses_ini = sample_moses_ini(directory, sources)
    nbest = directory / "moses.nbest"
    with open(source, "rb") as stdin:
        subprocess.run([str(MOSES), "-f", str(moses_ini), "-threads", "1", "-n-best-list", str(nbest), str(NBEST),
                        "distinct"], stdin=stdin, capture_output=True, check=True, timeout=120)
    return System(moses_ini, source, nbest, sources)


def settings(system: System) -> ForcedDecoding:
    return ForcedDecoding(str(MOSES), str(system.moses_ini), threads=2)


def close(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= 1e-3 for x, y in zip(a, b, strict=True))


# ------------------------------------------------------------------------------------------------ module

def test_moses_own_hypotheses_get_moses_own_features(system: System) -> None:
    entries = system.entries()
    result = force_decode(settings(system), system.sources, [(e.sentence_id, tuple(e.tokens)) for e in entries])
    assert result.unreachable == 0
    assert result.layout is not None and result.layout.labels == MOSES_FEATURES
    assert {e.sentence_id for e in entries} == set(range(SENTENCES + 1))
    matches = 0
    for entry, forced in zip(entries, result.derivations, strict=True):
        assert forced is not None and forced.tokens == entry.tokens
        # the n-best list keeps the best derivation the beam found; the forced search may find a better one
        assert forced.total >= entry.total - 1e-3, (entry.line(), forced.line())
        if close(forced.dense, entry.dense):
            matches += 1
        else:
            assert forced.total > entry.total + 1e-4, (entry.line(), forced.line())
    assert matches >= 0.95 * len(entries)
    # the unknown word, copied to the output, is reachable (ConstrainedDecoding's max-unknowns)
    assert all(UNKNOWN in e.tokens for e in entries if e.sentence_id == SENTENCES)


def test_hypotheses_moses_cannot_produce_are_unreachable(system: System) -> None:
    first = next(e for e in system.entries() if e.sentence_id == SENTENCES)
    without_unknown = tuple(w for w in first.tokens if w != UNKNOWN)
    pairs = [(0, ("zzz", "qqq")), (SENTENCES, without_unknown), (0, ()), (0, ("un", "a|b")),
             (SENTENCES, tuple(first.tokens))]
    result = force_decode(settings(system), system.sources, pairs)
    assert [d is not None for d in result.derivations] == [False, False, False, False, True]
    assert result.skipped == 2  # the empty one and the one with Moses' factor delimiter: Moses is not asked
    forced = result.derivations[-1]
    assert forced is not None and close(forced.dense, first.dense)


def test_unknown_words_match_in_their_own_order(system: System) -> None:
    """Under max-unknowns=-1 unknown words match any reference word: forcing "... xyzzy trots ." also
    gives the better-scoring "... trots xyzzy ."; a second run with more derivations finds the right one."""
    swapped = [e for e in system.entries() if e.sentence_id == SENTENCES
               and e.tokens.index(UNKNOWN) < e.tokens.index("trots")]
    assert swapped
    pairs = [(SENTENCES, tuple(e.tokens)) for e in swapped]
    one = ForcedDecoding(str(MOSES), str(system.moses_ini), threads=2, distinct=1, retry_distinct=1)
    assert force_decode(one, system.sources, pairs).reachable < len(pairs)
    retried = force_decode(ForcedDecoding(str(MOSES), str(system.moses_ini), threads=2, distinct=1),
                           system.sources, pairs)
    for entry, forced in zip(swapped, retried.derivations, strict=True):
        assert forced is not None and forced.tokens == entry.tokens and close(forced.dense, entry.dense)


@pytest.mark.skipif(not FILTER.is_file(), reason=f"{FILTER} not found")
def test_filtering_the_tables_first_gives_the_same_features(system: System) -> None:
    pairs = [(e.sentence_id, tuple(e.tokens)) for e in system.entries()][::3]
    plain = force_decode(settings(system), system.sources, pairs)
    filtered = force_decode(ForcedDecoding(str(MOSES), str(system.moses_ini), threads=2, filter_script=str(FILTER)),
                            system.sources, pairs)
    assert [d.line() if d else None for d in filtered.derivations] == \
           [d.line() if d else None for d in plain.derivations]


# ------------------------------------------------------------------------------------------- merge-nbest

def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_the_union_gives_every_line_moses_features(system: System, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    entries = system.entries()
    by_sentence: dict[int, list[NBestEntry]] = {}
    for e in entries:
        by_sentence.setdefault(e.sentence_id, []).append(e)
    moses = write_lines(tmp_path / "moses.nbest", [e.line() for s in sorted(by_sentence) for e in by_sentence[s][:2]])
    others = [e for s in sorted(by_sentence) for e in by_sentence[s][1:6]]  # one shared with Moses' list, <= 4 not
    new = sum(len(by_sentence[s][2:6]) for s in by_sentence)
    other_lines = [f"{e.sentence_id} ||| {' '.join(e.tokens)} ||| RNNsearch0= -1 ||| -1" for e in others]
    other_lines.insert(0, "0 ||| zzz qqq ||| RNNsearch0= -2 ||| -2")
    other = write_lines(tmp_path / "rnn.nbest", other_lines)
    out = tmp_path / "union.nbest.gz"
    code = main(["merge-nbest", f"Moses={moses}", f"RNNsearch={other}", "--moses-ini", str(system.moses_ini),
                 "--source", str(system.source), "--moses", str(MOSES), "--threads", "2", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    union = list(read_nbest(out))
    assert union[0].layout.labels == (*MOSES_FEATURES, "Unreachable0", "InMoses", "InRNNsearch")
    assert len(union) == 2 * len(by_sentence) + new + 1
    full = {(e.sentence_id, tuple(e.tokens)): e for e in entries}
    moses_values = {(e.sentence_id, tuple(e.tokens)): e.dense for s in by_sentence for e in by_sentence[s][:2]}
    matches = 0
    for u in union:
        key = (u.sentence_id, tuple(u.tokens))
        values, unreachable, in_moses = u.dense[:8], u.dense[8], u.dense[9]
        if key in moses_values:  # copied from Moses' list
            assert (in_moses, unreachable) == (1.0, 0.0) and close(values, moses_values[key])
        elif key in full:  # forced: the values of Moses' own 30-best, or a better derivation
            assert (in_moses, unreachable) == (0.0, 0.0)
            matches += close(values, full[key].dense)
        else:  # neutral: the mean over Moses' list of the sentence
            assert key == (0, ("zzz", "qqq")) and unreachable == 1.0
            mean = tuple(sum(c) / 2 for c in zip(*(e.dense for e in by_sentence[0][:2]), strict=True))
            assert close(values, mean)
    assert matches >= new - 1
    assert f"{len(union)} lines: {2 * len(by_sentence)} copied from the list of Moses, " \
           f"{new + 1} forced-decoded ({new} reachable, 1 unreachable" in err


def test_a_sentence_without_moses_hypotheses_gets_the_mean_of_the_whole_list(system: System, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    kept = [e for e in system.entries() if e.sentence_id != 0]  # Moses has no hypothesis of sentence 0
    moses = write_lines(tmp_path / "moses.nbest", [e.line() for e in kept])
    other = write_lines(tmp_path / "rnn.nbest", ["0 ||| zzz qqq ||| RNNsearch0= -2 ||| -2"])
    out = tmp_path / "union.nbest"
    code = main(["merge-nbest", f"Moses={moses}", f"RNNsearch={other}", "--moses-ini", str(system.moses_ini),
                 "--source", str(system.source), "--moses", str(MOSES), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    union = list(read_nbest(out))
    unreachable = next(u for u in union if u.sentence_id == 0)
    mean = tuple(sum(column) / len(kept) for column in zip(*(e.dense for e in kept), strict=True))
    assert unreachable.dense[8] == 1.0 and close(unreachable.dense[:8], mean)
    assert any(v != 0 for v in unreachable.dense[:8])
    assert "has hypotheses for 3 of the 4 sentences" in err  # Moses' list misses sentence 0
    assert "has hypotheses for 1 of the 4 sentences" in err


@pytest.mark.parametrize("problem", ["no ini", "placeholder", "moses fails", "no moses", "no source"])
def test_bad_input_is_one_line_and_exit_status_2(system: System, tmp_path: Path, problem: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ini = tmp_path / "moses.ini"
    text = system.moses_ini.read_text(encoding="utf-8")
    moses = str(MOSES)
    expected = ""
    if problem == "no ini":
        expected = f"{ini}: cannot read"
    elif problem == "placeholder":
        ini.write_text(re.sub(r"path=\S+phrase-table.gz", "path=MODEL_DIR/phrase-table.gz", text), encoding="utf-8")
        line = 1 + text.splitlines().index(next(t for t in text.splitlines() if t.startswith("PhraseDictionary")))
        expected = f"{ini}:{line}: expected path= naming an existing file for TranslationModel0, " \
                   "got 'MODEL_DIR/phrase-table.gz'"
    elif problem == "moses fails":
        ini.write_text(text.replace("num-features=4", "num-features=3"), encoding="utf-8")
        expected = f"{ini}: Moses ({MOSES}) failed with exit status 1: FATAL ERROR: Mismatch in number of features"
    elif problem == "no moses":
        ini.write_text(text, encoding="utf-8")
        moses = str(tmp_path / "no-such-moses")
        expected = f"{moses}: the Moses decoder was not found"
    else:
        ini.write_text(text, encoding="utf-8")
        expected = "--moses-ini needs --source"
    other = write_lines(tmp_path / "rnn.nbest", ["0 ||| zzz ||| RNNsearch0= -2 ||| -2"])
    out = tmp_path / "union.nbest"
    source = [] if problem == "no source" else ["--source", str(system.source)]
    code = main(["merge-nbest", f"Moses={system.nbest}", f"RNNsearch={other}", "--moses-ini", str(ini), *source,
                 "--moses", moses, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("rerank: error:")]
    assert len(errors) == 1 and expected in errors[0], err
    assert "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".union*"))
