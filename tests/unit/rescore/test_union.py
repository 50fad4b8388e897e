"""The union with Moses' features: which hypotheses need forcing, the list-wide mean that stands in for a sentence
Moses has nothing of, and (with the real Moses decoder, on a sample system filtered to two sentences) the lines,
the report and the errors that keep a union from meaning something else than it says."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import sample_moses_ini

from rerank.errors import RerankError
from rerank.formats.nbest import read_nbest
from rerank.rescore.forced import ForcedDecoding
from rerank.rescore.union import UNREACHABLE, hypotheses_to_force, list_mean, union_with_moses_features

REPOSITORY = Path(__file__).resolve().parents[3]
MOSES = REPOSITORY.parent / "shared" / "tools" / "moses" / "bin" / "moses"
EXAMPLES = REPOSITORY / "examples" / "data"
needs_moses = pytest.mark.skipif(not os.access(MOSES, os.X_OK), reason=f"the Moses decoder not found in {MOSES.parent}")

MOSES_LIST = """\
0 ||| a b  ||| F0= 1 G0= 2 ||| 0
0 ||| a c  ||| F0= 3 G0= -4 ||| 0
2 ||| d  ||| F0= 5 G0= 0.5 ||| 0
"""
OTHER_LIST = """\
0 ||| a c ||| R0= 1 ||| 1
0 ||| x ||| R0= 1 ||| 1
1 ||| y ||| R0= 1 ||| 1
2 ||| d ||| R0= 1 ||| 1
"""


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_hypotheses_to_force_are_those_moses_list_lacks(tmp_path: Path) -> None:
    systems = [("Moses", write(tmp_path / "moses.nbest", MOSES_LIST)),
               ("RNNsearch", write(tmp_path / "other.nbest", OTHER_LIST))]
    assert hypotheses_to_force(systems, 0) == [(0, ("x",)), (1, ("y",))]
    assert hypotheses_to_force(systems[::-1], 1) == [(0, ("x",)), (1, ("y",))]
    # system 1 as "Moses": the union's order, first system first
    assert hypotheses_to_force(systems, 1) == [(0, ("a", "b"))]


def test_the_list_mean_is_each_features_mean_over_every_line(tmp_path: Path, test_data: Path) -> None:
    assert list_mean(write(tmp_path / "moses.nbest", MOSES_LIST)) == ((1 + 3 + 5) / 3, (2 - 4 + 0.5) / 3)
    assert list_mean(write(tmp_path / "empty.nbest", "")) is None
    toy = [line.split(" ||| ")[2].split() for line in (test_data / "toy.nbest").read_text().splitlines()]
    lm0 = [float(fields[fields.index("LM0=") + 1]) for fields in toy]
    mean = list_mean(test_data / "toy.nbest")
    assert mean is not None and len(mean) == 8 and mean[1] == pytest.approx(sum(lm0) / 9, abs=1e-12)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample's moses.ini and phrase table filtered to two val sentences, its sample LM, and Moses' 5-best list
    (distinct) of them."""
    directory = tmp_path_factory.mktemp("union")
    sources = (EXAMPLES / "val.en").read_text(encoding="utf-8").splitlines()[1:3]
    source = directory / "source.en"
    source.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    moses_ini = sample_moses_ini(directory, sources)
    nbest = directory / "moses.nbest"
    if os.access(MOSES, os.X_OK):
        with open(source, "rb") as stdin:
            subprocess.run([str(MOSES), "-f", str(moses_ini), "-threads", "1", "-n-best-list", str(nbest), "5",
                            "distinct"], stdin=stdin, capture_output=True, check=True, timeout=120)
    return {"source": source, "moses_ini": moses_ini, "nbest": nbest}


@needs_moses
def test_copied_forced_and_unreachable_lines(system: dict[str, Path], tmp_path: Path) -> None:
    moses = list(read_nbest(system["nbest"]))
    alone, second = [e for e in moses if e.sentence_id == 0], [e for e in moses if e.sentence_id == 1]
    assert len(alone) == 1 and len(second) == 3
    kept = write(tmp_path / "moses.nbest", "".join(e.line() + "\n" for e in [*alone, second[0]]))
    other = write(tmp_path / "rnn.nbest", "0 ||| zzz qqq ||| R0= -2 ||| 0\n"
                                          f"1 ||| {' '.join(second[1].tokens)} ||| R0= -1 ||| 0\n")
    sources = system["source"].read_text(encoding="utf-8").splitlines()
    settings = ForcedDecoding(str(MOSES), str(system["moses_ini"]))
    entries, report = union_with_moses_features([("Moses", kept), ("RNNsearch", other)], 0, settings, sources)
    assert report.forced.reachable == 1 and report.forced.unreachable == 1  # before the lines are read
    union = list(entries)
    assert (report.lines, report.from_moses) == (4, 2)
    labels = ("Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0", UNREACHABLE, "InMoses",
              "InRNNsearch")
    assert [u.layout.labels for u in union] == [labels] * 4
    # Moses' lines: its values copied, as it printed them
    assert union[0].line() == (f"0 ||| {alone[0].hypothesis.strip()} ||| {alone[0].fields[2].strip()} "
                               f"{UNREACHABLE}= 0 InMoses= 1 InRNNsearch= 0 ||| 0")
    assert union[2].dense == (*second[0].dense, 0.0, 1.0, 0.0)
    # a hypothesis Moses cannot produce: the mean of Moses' hypotheses of its sentence (here the one)
    assert union[1].tokens == ["zzz", "qqq"] and union[1].dense == (*alone[0].dense, 1.0, 0.0, 1.0)
    # Moses' own 2nd hypothesis of sentence 1, forced: the values of Moses' list
    assert union[3].tokens == second[1].tokens and union[3].dense[8:] == (0.0, 0.0, 1.0)
    assert union[3].dense[:8] == pytest.approx(second[1].dense, abs=1e-3)


@needs_moses
def test_a_moses_ini_of_other_features_than_the_lists_is_refused(system: dict[str, Path], tmp_path: Path) -> None:
    moses = write(tmp_path / "moses.nbest", MOSES_LIST.replace("2 |||", "1 |||"))
    other = write(tmp_path / "rnn.nbest", f"0 ||| {next(read_nbest(system['nbest'])).hypothesis} ||| R0= -1 ||| 0\n")
    sources = system["source"].read_text(encoding="utf-8").splitlines()
    entries, _ = union_with_moses_features([("Moses", moses), ("RNNsearch", other)], 0,
                                           ForcedDecoding(str(MOSES), str(system["moses_ini"])), sources)
    with pytest.raises(RerankError) as error:
        list(entries)
    assert str(error.value) == (f"{system['moses_ini']}: Moses prints the features Distortion0=(1) LM0=(1) "
                                "WordPenalty0=(1) PhrasePenalty0=(1) TranslationModel0=(4) but "
                                f"{moses} has F0=(1) G0=(1): is it the moses.ini that made the list?")


@needs_moses
def test_an_empty_moses_list_leaves_no_neutral_values(system: dict[str, Path], tmp_path: Path) -> None:
    moses = write(tmp_path / "moses.nbest", "")
    reachable = next(read_nbest(system["nbest"])).hypothesis
    other = write(tmp_path / "rnn.nbest", f"0 ||| {reachable} ||| R0= -1 ||| 0\n1 ||| zzz qqq ||| R0= -1 ||| 0\n")
    sources = system["source"].read_text(encoding="utf-8").splitlines()
    entries, _ = union_with_moses_features([("Moses", moses), ("RNNsearch", other)], 0,
                                           ForcedDecoding(str(MOSES), str(system["moses_ini"])), sources,
                                           allow_empty=True)
    with pytest.raises(RerankError) as error:
        list(entries)
    assert str(error.value) == (f"{moses}: Moses' list has no hypotheses, so there are no neutral values (their "
                                "mean) for the hypotheses Moses cannot produce")


@needs_moses
def test_nothing_moses_can_force_and_no_list_leave_no_features(system: dict[str, Path], tmp_path: Path) -> None:
    moses = write(tmp_path / "moses.nbest", "")
    other = write(tmp_path / "rnn.nbest", "0 ||| a|b ||| R0= -1 ||| 0\n")  # Moses' factor delimiter: never asked
    entries, report = union_with_moses_features([("Moses", moses), ("RNNsearch", other)], 0,
                                                ForcedDecoding(str(MOSES), str(system["moses_ini"])), ["a", "b"],
                                                allow_empty=True)
    assert report.forced.skipped == 1 and report.forced.layout is None
    with pytest.raises(RerankError) as error:
        list(entries)
    assert str(error.value) == f"{moses}: Moses' list has no hypotheses and none could be forced"
