"""The backbone commands end to end: score-nbest, apply, evaluate, and every kind of bad input."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import re
import sys
from pathlib import Path

import pytest
from helpers import content, cut_in_unigrams, leftovers
from sacrebleu.metrics import BLEU

from rerank.cli import main
from rerank.formats.nbest import read_nbest

REPO = Path(__file__).resolve().parents[2]
ZERO_NEW = ["--weight", "LM1=0", "--weight", "WP1=0", "--weight", "UNK1=0"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fields(path: Path) -> list[list[str]]:
    return [line.split("|||") for line in content(path).decode().splitlines()]


# score-nbest

def test_score_nbest_appends_lm_wp_unk_and_keeps_other_bytes(multi30k_slice: dict[str, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scored.gz"
    code, _, err = run(["score-nbest", multi30k_slice["nbest"], "--source", multi30k_slice["source"],
                        "--lm", multi30k_slice["lm"], "--word-penalty",
                        "--unk-corpus", REPO / "examples/data/train.fr.gz", "--shortlist", "5000",
                        "--batch-sentences", "7", "-o", out], capsys)
    assert code == 0, err
    assert "20 sentences" in err
    before, after = fields(multi30k_slice["nbest"]), fields(out)
    assert len(after) == len(before) > 1000
    unk = 0
    for old, new in zip(before, after, strict=True):
        assert new[:2] == old[:2] and new[3:] == old[3:]
        head, tail = new[2][:len(old[2]) - 1], new[2][len(old[2]) - 1:]
        assert head == old[2][:-1] and tail.startswith(" LM1= ") and tail.endswith(" ")
        values = dict(zip(new[2].split(), new[2].split()[1:], strict=False))
        assert abs(float(values["LM1="]) - float(values["LM0="])) <= 1e-3
        assert values["WP1="] == values["WordPenalty0="]
        unk += int(values["UNK1="])
    assert unk > 0
    # and as bytes: the output without the added values is the input, final newline included
    added = re.compile(rb" LM1= \S+ WP1= \S+ UNK1= \S+")
    assert added.sub(b"", content(out)) == content(multi30k_slice["nbest"])
    assert leftovers(tmp_path) == []
    entries = list(read_nbest(out))  # every line has the same dense features in the same order
    assert entries[-1].layout.labels[-3:] == ("LM1", "WP1", "UNK1")


def test_score_nbest_with_the_shipped_config(multi30k_slice: dict[str, Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """configs/rescoring/rescore.yaml uses the sample LM, which scores the sample's sentences as the full model did for
    Moses' LM0; an LM given by flags comes after the config's features."""
    monkeypatch.chdir(REPO)
    from_config, from_flags = tmp_path / "config.txt", tmp_path / "flags.txt"
    assert run(["score-nbest", multi30k_slice["nbest"], "--config", "configs/rescoring/rescore.yaml", "--lm-oov",
                "--lm", multi30k_slice["lm"], "--lm-label", "LM2", "-o", from_config], capsys)[0] == 0
    with pytest.raises(SystemExit) as exit_status:  # one --lm only; more in the config
        run(["score-nbest", multi30k_slice["nbest"], "--lm", "examples/data/lm.fr.4.sample.arpa.gz",
             "--lm", multi30k_slice["lm"], "-o", from_flags], capsys)
    assert exit_status.value.code == 2 and "--lm given twice" in capsys.readouterr().err
    entry = next(read_nbest(from_config))
    assert entry.layout.labels[-4:] == ("LM1", "WP1", "UNK1", "LM2") and entry.layout.sizes[-1] == 2
    for e in read_nbest(from_config):
        assert e.dense[-5] == e.dense[-2]  # the same model from the config and from the flags
        assert abs(e.dense[-5] - e.dense[1]) <= 1e-3  # Moses' LM0, printed with 6 significant digits


def test_score_nbest_stdin_to_stdout(test_data: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((test_data / "toy.nbest").read_bytes())))
    code, out, _ = run(["score-nbest", "-", "--word-penalty", "--wp-label", "WP7"], capsys)
    assert code == 0
    assert out == with_word_penalty((test_data / "toy.nbest").read_text(encoding="utf-8"), "WP7")
    assert out.splitlines()[0].endswith("-12.8201 WP7= -11 ||| -3.67449")


def with_word_penalty(nbest: str, label: str) -> str:
    """``nbest`` with ``label= -(number of words)`` appended to each line's features, every other byte kept."""
    lines = []
    for line in nbest.splitlines(keepends=True):
        parts = line.split("|||")
        body = parts[2].rstrip(" ")
        parts[2] = f"{body} {label}= {-len(parts[1].split())}{parts[2][len(body):] or ' '}"
        lines.append("|||".join(parts))
    return "".join(lines)


@pytest.mark.parametrize("name", ["sparse.nbest", "six-fields.nbest"])
def test_score_nbest_keeps_sparse_features_and_six_fields(name: str, test_data: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Sparse features (labels with '_') and Moses' fifth and sixth fields (segmentation, word alignment) pass
    through the command byte for byte; the new feature goes at the end of field 3."""
    if name == "sparse.nbest":
        nbest = test_data / name
    else:
        nbest = tmp_path / name
        nbest.write_text("0 ||| das Haus  ||| LM0= -4.5 TM0= -1 -2 ||| -3.25 ||| 0-0=0-0 1-1=1-1 ||| 0-0 1-1\n"
                         "0 ||| ein Haus ist  ||| LM0= -6 TM0= -1.5 -2 ||| -4 ||| 0-2=0-1 ||| 0-0 1-1 1-2\n"
                         "1 ||| ja  ||| LM0= -1 TM0= 0 0 ||| -0.5 |||  ||| \n", encoding="utf-8")
    out = tmp_path / "scored"
    code, _, err = run(["score-nbest", nbest, "--word-penalty", "-o", out], capsys)
    assert code == 0, err
    assert out.read_bytes() == with_word_penalty(nbest.read_text(encoding="utf-8"), "WP1").encode()


@pytest.mark.parametrize("argv, message", [
    (["--word-penalty", "--wp-label", "WordPenalty0"], r"toy.nbest: the n-best list already has the feature.s. "
                                                       r"WordPenalty0; give the new feature another label "
                                                       r"\(--wp-label NAME\)"),
    (["--word-penalty", "--unk-vocab", "{toy_fr}", "--unk-label", "WP1"], "feature label.s. used twice: WP1"),
    (["--wp-label", "WP2"], "--wp-label needs the feature it configures"),
    (["--unk-vocab", "{toy_fr}", "--shortlist", "5"], "--shortlist needs"),
    ([], "no features to add"),
    (["--word-penalty", "--wp-label", "WP_1"], "feature label 'WP_1' must be a letter"),
    (["--config", "{toy_fr}"], "toy.fr: top level: expected a mapping"),
])
def test_score_nbest_config_errors(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   argv: list[str], message: str) -> None:
    argv = [a.format(toy_fr=test_data / "toy.fr") for a in argv]
    code, _, err = run(["score-nbest", test_data / "toy.nbest", "-o", tmp_path / "out", *argv], capsys)
    assert code == 2
    assert err.startswith("rerank: error: ") and err.count("\n") == 1
    assert re.search(message, err)
    assert list(tmp_path.iterdir()) == []


# apply

def test_apply_with_moses_weights_reproduces_moses_1best(multi30k_slice: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    scored = tmp_path / "scored.gz"
    assert run(["score-nbest", multi30k_slice["nbest"], "--lm", multi30k_slice["lm"],
                "--word-penalty", "--unk-vocab", REPO / "examples/data/shortlist.fr.gz", "-o", scored], capsys)[0] == 0
    onebest, reranked = tmp_path / "1best", tmp_path / "reranked.gz"
    code, _, err = run(["apply", scored, "--weights", multi30k_slice["moses_ini"], *ZERO_NEW,
                        "--source", multi30k_slice["source"], "-o", onebest, "--nbest-out", reranked], capsys)
    assert code == 0, err
    assert "skipping weights of features" in err and "UnknownWordPenalty0" in err
    assert onebest.read_bytes() == multi30k_slice["onebest"].read_bytes()
    entries = list(read_nbest(reranked))
    assert sorted(e.fields[:3] for e in entries) == sorted(e.fields[:3] for e in read_nbest(scored))
    for a, b in itertools.pairwise(entries):
        assert a.sentence_id < b.sentence_id or (a.sentence_id == b.sentence_id and a.total >= b.total)
    originals = {e.fields[1]: e.total for e in read_nbest(scored) if e.sentence_id == 0}
    for e in entries[:5]:  # the new total is Moses' own, to the printed precision
        assert e.total == pytest.approx(originals[e.fields[1]], abs=2e-5)


def test_apply_yaml_weights_and_stdout(test_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["apply", test_data / "toy.nbest", "--weights", test_data / "weights.yaml"], capsys)
    assert code == 0
    assert out == (test_data / "toy.1best").read_text()


def test_apply_later_weights_win(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A large weight on the word penalty (fewer words is better) picks the shortest hypotheses."""
    code, out, _ = run(["apply", test_data / "toy.nbest", "--weights", test_data / "weights.yaml",
                        "--weight", "WordPenalty0=100"], capsys)
    assert code == 0
    assert out.splitlines()[0] == "un homme avec un chapeau orange regarde quelque chose . "


def test_apply_first_maximum_wins_ties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nbest = tmp_path / "ties.nbest"
    nbest.write_text("0 ||| a  ||| F= 1 G= 2 ||| 0\n0 ||| b  ||| F= 2 G= 1 ||| 0\n0 ||| c  ||| F= 1 G= 2 ||| 0\n"
                     "1 ||| d  ||| F= 1 G= 1 ||| 0\n1 ||| e  ||| F= 1 G= 1 ||| 0\n")
    code, out, _ = run(["apply", nbest, "--weight", "F=1", "--weight", "G=1", "--nbest-out", tmp_path / "n",
                        "-o", tmp_path / "1"], capsys)
    assert code == 0
    assert (tmp_path / "1").read_bytes() == b"a \nd \n"
    assert (tmp_path / "n").read_bytes() == (b"0 ||| a  ||| F= 1 G= 2 ||| 3\n0 ||| b  ||| F= 2 G= 1 ||| 3\n"
                                            b"0 ||| c  ||| F= 1 G= 2 ||| 3\n1 ||| d  ||| F= 1 G= 1 ||| 2\n"
                                            b"1 ||| e  ||| F= 1 G= 1 ||| 2\n")


def test_apply_sentences_without_hypotheses(test_data: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A sentence the n-best list skips gets an empty line, as Moses writes for a failed sentence."""
    nbest = tmp_path / "gap.nbest"
    nbest.write_text("".join(line for line in (test_data / "toy.nbest").read_text().splitlines(keepends=True)
                             if not line.startswith("1 ")))
    moses = (test_data / "toy.1best").read_text().splitlines(keepends=True)
    code, _, err = run(["apply", nbest, "--weights", test_data / "weights.yaml", "--source", test_data / "toy.en",
                        "-o", tmp_path / "1best"], capsys)
    assert code == 0
    assert (tmp_path / "1best").read_text() == moses[0] + "\n" + moses[2]
    assert "1 sentence has no hypotheses" in err
    code, _, err = run(["apply", nbest, "--weights", test_data / "weights.yaml", "--num-sentences", "5",
                        "-o", tmp_path / "1best"], capsys)
    assert (tmp_path / "1best").read_text() == moses[0] + "\n" + moses[2] + "\n\n"
    assert "3 sentences have no hypotheses" in err


def test_apply_empty_nbest(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty list is a failed decoding run: an error, as for `rerank tune`, not a file of empty lines."""
    (tmp_path / "empty").write_text("")
    code, _, err = run(["apply", tmp_path / "empty", "--weights", test_data / "weights.yaml",
                        "--source", test_data / "toy.en", "-o", tmp_path / "1best"], capsys)
    assert code == 2 and not (tmp_path / "1best").exists()
    assert "empty: expected at least one hypothesis, got 'an empty n-best list'" in err


def test_apply_sparse_features_are_reported(test_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["apply", test_data / "sparse.nbest", "--weight", "LM0=1", "--missing-weight", "0"], capsys)
    assert code == 0 and out == "in Libyen der Sieg \n"  # the best LM0
    assert "only dense features are scored" in err


@pytest.mark.parametrize("argv, message", [
    (["--weight", "LM1=1"], r"--weight: expected weights for features of .*toy.nbest \(.*\), got 'LM1'"),
    (["--weights", "{bad_yaml}"], r"bad.yaml:1: expected weights for features of .*toy.nbest \(.*\), got 'LM1'"),
    ([], r"no weight for the n-best features PhrasePenalty0"),
    (["--weight", "TranslationModel0=1,2"], "TranslationModel0 has 4 values in the n-best list but 2 weights"),
    (["--weight", "LM0="], r"--weight 'LM0=': expected Label=value"),
])
def test_apply_weight_errors(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    (tmp_path / "bad.yaml").write_text("LM1: 0.5\n")
    partial = ["--weight", "Distortion0=1", "--weight", "LM0=1", "--weight", "WordPenalty0=1"]
    argv = [a.format(bad_yaml=tmp_path / "bad.yaml") for a in argv]
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["apply", test_data / "toy.nbest", *partial, *argv, "-o", out / "1best"], capsys)
    assert code == 2
    assert re.search(message, err), err
    assert list(out.iterdir()) == []


# evaluate

def test_evaluate_matches_sacrebleu(multi30k_slice: dict[str, Path], test_data: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    hyp, ref = multi30k_slice["onebest"], multi30k_slice["reference"]
    expected = BLEU(tokenize="none").corpus_score(hyp.read_text().splitlines(), [ref.read_text().splitlines()])
    code, out, _ = run(["evaluate", "-r", ref, "--tokenize", "none", "--source", multi30k_slice["source"],
                        "--buckets", "5", f"moses={hyp}", "--json", tmp_path / "s.json",
                        "--plot", tmp_path / "bleu.png"], capsys)
    assert code == 0
    assert f"moses: {expected}" in out
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:" in out
    assert "chrF signature: nrefs:1|" in out
    report = json.loads((tmp_path / "s.json").read_text())
    assert report["systems"][0]["bleu"] == pytest.approx(expected.score)
    assert sum(b["sentences"] for b in report["buckets"]) == 20
    assert [b["label"] for b in report["buckets"]][0] == "6-10"
    assert (tmp_path / "bleu.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers(tmp_path) == []


def test_evaluate_several_systems_and_references(test_data: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["evaluate", "-r", test_data / "toy.fr", "-r", test_data / "toy.1best", "--json", "-",
                        f"a={test_data / 'toy.1best'}", test_data / "toy.fr"], capsys)
    assert code == 0
    report = json.loads(out)
    assert [s["name"] for s in report["systems"]] == ["a", "toy.fr"]
    assert [s["bleu"] for s in report["systems"]] == [pytest.approx(100.0)] * 2  # each is one of the references
    assert report["bleu_signature"].startswith("nrefs:2|") and report["buckets"] == []


def test_evaluate_quintiles(multi30k_slice: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["evaluate", "-r", multi30k_slice["reference"], "--source", multi30k_slice["source"],
                        "--buckets", "quintiles", "--json", "-", multi30k_slice["onebest"]], capsys)
    buckets = json.loads(out)["buckets"]
    assert code == 0 and 3 <= len(buckets) <= 5 and sum(b["sentences"] for b in buckets) == 20
    assert all(a["high"] < b["low"] for a, b in itertools.pairwise(buckets))


@pytest.mark.parametrize("argv, message", [
    (["-r", "{short}", "{hyp}"], r"short.fr:3: expected 3 lines, one for each line of .*toy.1best, but the file "
                                 r"ends after 2"),
    (["-r", "{long}", "{hyp}"], r"long.fr:4: expected the end of the file after 3 lines"),
    (["-r", "{ref}", "{hyp}", "{short}"], r"short.fr:3: expected 3 lines"),
    (["-r", "{ref}", "--source", "{short}", "{hyp}"], r"short.fr:3: expected 3 lines"),
    (["-r", "{crlf}", "{hyp}"], r"crlf.fr:1: expected Unix line ends"),
    (["-r", "{ref}", "{latin}"], r"latin.txt:1: expected UTF-8 text"),
    (["-r", "{ref}", "{hyp}", "{hyp}"], "two systems named 'toy.1best'"),
    (["-r", "{ref}", "--tokenize", "moses", "{hyp}"], "--tokenize: unknown BLEU tokenizer 'moses': expected one of"),
    (["-r", "{ref}", "--plot", "{out}/p.png", "{hyp}"], "--plot draws BLEU by source length: give --source"),
    (["-r", "{ref}", "{empty}"], r"empty.txt:1: expected at least one line"),
])
def test_evaluate_errors(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                         message: str) -> None:
    ref = (test_data / "toy.fr").read_text()
    files = {"short": tmp_path / "short.fr", "long": tmp_path / "long.fr", "crlf": tmp_path / "crlf.fr",
             "latin": tmp_path / "latin.txt", "empty": tmp_path / "empty.txt"}
    files["short"].write_text("".join(ref.splitlines(keepends=True)[:2]))
    files["long"].write_text(ref + "extra\n")
    files["crlf"].write_bytes(ref.replace("\n", "\r\n").encode())
    files["latin"].write_bytes(b"caf\xe9\nb\nc\n")
    files["empty"].write_text("")
    out = tmp_path / "out"
    out.mkdir()
    names = {**files, "ref": test_data / "toy.fr", "hyp": test_data / "toy.1best", "out": out}
    code, _, err = run(["evaluate", "--json", out / "s.json", *[a.format(**names) for a in argv]], capsys)
    assert code == 2
    assert re.search(message, err), err
    assert list(out.iterdir()) == []


# bad input: one message naming the file and line, exit status 2, no output left behind

def _toy_lines(test_data: Path) -> list[str]:
    return (test_data / "toy.nbest").read_text().splitlines(keepends=True)


def _bad_nbest(test_data: Path, tmp_path: Path, case: str) -> tuple[Path, str]:
    """A copy of toy.nbest broken on line 8 (of 9) the way ``case`` says, and the message expected."""
    lines = _toy_lines(test_data)
    line = lines[7]
    path = tmp_path / "bad.nbest"
    expected = f"{path}:8: expected "
    if case == "fields":
        lines[7] = line.rsplit("|||", 1)[0] + "\n"
        expected += r"4 to 6 fields separated by '\|\|\|'"
    elif case == "non-numeric value":
        lines[7] = line.replace("LM0= -55.7748", "LM0= -55.77x48")
        expected += "a number after 'LM0='"
    elif case == "non-numeric total":
        lines[7] = line.rsplit("|||", 1)[0] + "||| high\n"
        expected += r"a number \(the total score\) in field 4"
    elif case == "value count":
        parts = line.split("|||")
        parts[2] = " " + " ".join(parts[2].split()[:-1]) + " "  # one TranslationModel0 value less
        lines[7] = "|||".join(parts)
        expected += "4 values after 'TranslationModel0=', as on the first line, got '3 values'"
    elif case == "ids backwards":
        lines[7] = "1" + line[1:]
        expected += r"sentence ids in increasing order \(after 2\)"
    elif case == "crlf":
        lines[7] = line.replace("\n", "\r\n")
        expected += "Unix line ends"
    elif case == "invalid utf-8":
        path.write_bytes("".join(lines[:7]).encode() + line.encode().replace(b"karat\xc3\xa9", b"karat\xe9")
                         + "".join(lines[8:]).encode())
        return path, expected + "UTF-8 text"
    elif case == "truncated gzip":
        path = tmp_path / "bad.nbest.gz"
        data = gzip.compress("".join(lines * 40).encode())
        path.write_bytes(data[: len(data) // 2])
        return path, rf"{path}:\d+: expected a complete gzip stream"
    path.write_text("".join(lines), encoding="utf-8")
    return path, expected


NBEST_CASES = ["fields", "non-numeric value", "non-numeric total", "value count", "ids backwards", "crlf",
               "invalid utf-8", "truncated gzip"]


def _check_failed(code: int, err: str, expected: str, out: Path) -> None:
    assert code == 2
    assert err.count("rerank: error: ") == 1 and "Traceback" not in err
    assert re.search(expected, err), err
    assert list(out.iterdir()) == []  # neither the output nor a temporary file


@pytest.mark.parametrize("case", NBEST_CASES)
def test_score_nbest_bad_nbest(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               case: str) -> None:
    path, expected = _bad_nbest(test_data, tmp_path, case)
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["score-nbest", path, "--word-penalty", "--batch-sentences", "1",
                        "-o", out / "scored.gz"], capsys)
    _check_failed(code, err, expected, out)


@pytest.mark.parametrize("case", NBEST_CASES)
def test_apply_bad_nbest(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    path, expected = _bad_nbest(test_data, tmp_path, case)
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["apply", path, "--weights", test_data / "weights.yaml", "-o", out / "1best",
                        "--nbest-out", out / "reranked.gz"], capsys)
    _check_failed(code, err, expected, out)


@pytest.mark.parametrize("command", ["score-nbest", "apply"])
def test_nbest_id_beyond_the_source(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    command: str) -> None:
    source = tmp_path / "two.en"
    source.write_text("".join((test_data / "toy.en").read_text().splitlines(keepends=True)[:2]))
    out = tmp_path / "out"
    out.mkdir()
    options = ["--word-penalty", "--batch-sentences", "1"] if command == "score-nbest" else \
        ["--weights", test_data / "weights.yaml"]
    code, _, err = run([command, test_data / "toy.nbest", "--source", source, *options, "-o", out / "o"], capsys)
    _check_failed(code, err, r"toy.nbest:7: expected a sentence id below 2, the number of lines of .*two.en, "
                             "got '2'", out)


def test_apply_id_beyond_num_sentences(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["apply", test_data / "toy.nbest", "--weights", test_data / "weights.yaml",
                        "--num-sentences", "1", "-o", out / "o"], capsys)
    _check_failed(code, err, r"toy.nbest:4: expected a sentence id below 1, the number of lines of --num-sentences",
                  out)


@pytest.mark.parametrize("case", ["crlf", "invalid utf-8"])
def test_bad_source(test_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    source = tmp_path / "src.en"
    text = (test_data / "toy.en").read_bytes()
    source.write_bytes(text.replace(b"\n", b"\r\n") if case == "crlf" else text.replace(b"karate", b"karat\xe9"))
    expected = rf"{source}:{1 if case == 'crlf' else 3}: expected " + ("Unix" if case == "crlf" else "UTF-8")
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["score-nbest", test_data / "toy.nbest", "--source", source, "--word-penalty",
                        "-o", out / "o"], capsys)
    _check_failed(code, err, expected, out)


@pytest.mark.parametrize("case", ["missing", "not an lm", "truncated"])
def test_bad_language_model(test_data: Path, regression_slice: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str], case: str) -> None:
    lm = tmp_path / "lm.arpa"
    if case == "not an lm":
        lm.write_text("# a language model\n")
    elif case == "truncated":
        lm.write_bytes(cut_in_unigrams((regression_slice / "models/lexicalized-reordering/europarl.lm").read_bytes()))
    expected = {"missing": rf"the command line: kenlm.path: {lm}: no such file or directory",
                "not an lm": rf"{lm}:1: expected an ARPA or KenLM binary language model \(feature LM1\)",
                "truncated": rf"{lm}:\d+: expected an ARPA or KenLM binary language model .*in the 1-gram"}[case]
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["score-nbest", test_data / "toy.nbest", "--lm", lm, "-o", out / "o"], capsys)
    _check_failed(code, err, expected, out)


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["apply", tmp_path / "none.gz", "--weight", "LM0=1", "-o", tmp_path / "o"], capsys)
    assert code == 2 and "none.gz: cannot read: No such file" in err
    assert list(tmp_path.iterdir()) == []


# the whole test set, as the done-when of the issue

@pytest.mark.slow
def test_full_test_set_reproduces_moses(multi30k_moses: Path, shared_data: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    tok = shared_data / "multi30k" / "tok"
    nbest = multi30k_moses / "nbest" / "test_2016_flickr.100best.gz"
    scored, onebest = tmp_path / "scored.gz", tmp_path / "1best"
    assert run(["score-nbest", nbest, "--source", tok / "test_2016_flickr.lc.norm.tok.en",
                "--lm", multi30k_moses / "lm/train.fr.4.arpa", "--word-penalty",
                "--unk-corpus", tok / "train.lc.norm.tok.fr", "-o", scored], capsys)[0] == 0
    lines = 0
    for old, new in zip(read_nbest(nbest), read_nbest(scored), strict=True):
        assert new.fields[:2] == old.fields[:2] and new.fields[3:] == old.fields[3:]
        assert new.fields[2].startswith(old.fields[2].rstrip(" ") + " LM1= ")
        # both are printed with 6 significant digits: at most one unit of the last one apart
        assert abs(new.dense[-3] - old.dense[1]) <= 1e-3 * max(1.0, abs(old.dense[1]) / 100) + 1e-9
        lines += 1
    assert lines == 64736
    assert run(["apply", scored, "--weights", multi30k_moses / "model/moses.ini", *ZERO_NEW,
                "--source", tok / "test_2016_flickr.lc.norm.tok.en", "-o", onebest], capsys)[0] == 0
    assert onebest.read_bytes() == (multi30k_moses / "nbest/test_2016_flickr.1best").read_bytes()
    code, out, _ = run(["evaluate", "-r", tok / "test_2016_flickr.lc.norm.tok.fr", "--tokenize", "none", onebest],
                       capsys)
    assert code == 0
    assert "BLEU = 56.12 " in out and "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp" in out
