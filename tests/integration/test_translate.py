"""`rerank translate` and `rerank align` end to end, on tiny model directories written by the tests."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import leftovers
from tiny_models import save_model_dir, teach, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats.files import read_text
from rerank.formats.nbest import group_by_sentence, read_nbest
from rerank.models.vocab import UNK, Vocabulary

REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "data"



def toy_vocabularies(target_size: int = 8) -> tuple[Vocabulary, Vocabulary]:
    """Every source word of the toy files, and a target shortlist so short that <unk> is common."""
    read = lambda name: [line.split() for line in read_text(TOY / name)]  # noqa: E731
    return Vocabulary.build(read("toy.en"), 100), Vocabulary.build(read("toy.fr"), target_size)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An RNNsearch that has learnt a little of the toy pairs, whose target shortlist makes <unk> common."""
    src_vocab, trg_vocab = toy_vocabularies()
    pairs = ([src_vocab.encode(line.split()) for line in read_text(TOY / "toy.en")],
             [trg_vocab.encode(line.split()) for line in read_text(TOY / "toy.fr")])
    model = teach(tiny_model(tiny_config(), len(src_vocab), len(trg_vocab), dtype=torch.float32, biases={}),
                  [pairs] * 40)
    return save_model_dir(tmp_path_factory.mktemp("rnnsearch"), model, src_vocab, trg_vocab)


@pytest.fixture(scope="module")
def encdec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src_vocab, trg_vocab = toy_vocabularies()
    model = tiny_model(tiny_config("encdec"), len(src_vocab), len(trg_vocab))
    return save_model_dir(tmp_path_factory.mktemp("encdec"), model, src_vocab, trg_vocab)


def translate(model: Path, *options: str) -> int:
    return main(["-q", "translate", "--model", str(model), "-i", str(TOY / "toy.en"), *options])


def test_stdin_to_stdout_in_a_pipeline(model_dir: Path) -> None:
    source = (TOY / "toy.en").read_bytes()
    done = subprocess.run([sys.executable, "-m", "rerank", "translate", "--model", str(model_dir), "--beam", "3",
                           "--threads", "1"], input=source, capture_output=True, cwd=REPO, check=True)
    assert "translated 3 sentences in" in done.stderr.decode()  # progress goes to stderr
    # the same bytes as the same translation written to a file
    written = subprocess.run([sys.executable, "-m", "rerank", "-q", "translate", "--model", str(model_dir), "--beam",
                              "3", "--threads", "1", "-i", str(TOY / "toy.en"), "-o", "-"],
                             capture_output=True, cwd=REPO, check=True).stdout
    assert done.stdout == written and done.stdout.count(b"\n") == 3 and done.stdout.endswith(b"\n")


def test_stdin_in_process(model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                          tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a man\n\na dog .\n")))
    assert main(["-q", "translate", "--model", str(model_dir), "--beam", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.split("\n")
    assert len(lines) == 4 and lines[-1] == ""
    assert lines[1] == ""  # an empty sentence has the empty translation
    source = tmp_path / "source"
    source.write_bytes(b"a man\n\na dog .\n")
    assert main(["-q", "translate", "--model", str(model_dir), "--beam", "2", "-i", str(source), "-o",
                 str(tmp_path / "out")]) == 0
    assert (tmp_path / "out").read_text(encoding="utf-8") == out


def test_nbest_list_reads_back_and_goes_through_score_nbest_and_tune(model_dir: Path, tmp_path: Path) -> None:
    nbest = tmp_path / "out.nbest"
    assert translate(model_dir, "--beam", "4", "--nbest", "3", "-o", str(nbest)) == 0
    entries = list(read_nbest(nbest))
    groups = list(group_by_sentence(entries))
    assert [sentence for sentence, _ in groups] == [0, 1, 2]
    for _, group in groups:
        assert len(group) == 3
        assert len({e.hypothesis for e in group}) == 3
        for entry in group:
            assert entry.layout.labels == ("RNNsearch0",) and entry.layout.sizes == (1,)
            assert entry.total == pytest.approx(entry.dense[0], rel=1e-5)
            assert entry.dense[0] < 0
        assert [e.total for e in group] == sorted((e.total for e in group), reverse=True)  # no length penalty
    scored = tmp_path / "scored.nbest"
    assert main(["-q", "score-nbest", str(nbest), "--word-penalty", "-o", str(scored)]) == 0
    rescored = list(read_nbest(scored))
    assert rescored[0].layout.labels == ("RNNsearch0", "WP1")
    assert [e.dense[1] for e in rescored] == [-len(e.tokens) for e in entries]
    weights = tmp_path / "weights.yaml"
    assert main(["-q", "tune", "--nbest", str(scored), "-r", str(TOY / "toy.fr"), "--restarts", "2",
                 "-o", str(weights)]) == 0
    assert set(yaml.safe_load(weights.read_text())) == {"RNNsearch0", "WP1"}


def test_its_list_rescored_by_a_model_takes_a_new_label(model_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    """A list that translate wrote holds RNNsearch0: score-nbest --model on it stops with one line that names
    --model-label, and with --model-label the same model gives back each hypothesis' own search score."""
    nbest, scored = tmp_path / "out.nbest", tmp_path / "scored.nbest"
    assert translate(model_dir, "--beam", "4", "--nbest", "3", "-o", str(nbest)) == 0
    capsys.readouterr()
    rescore = ["-q", "score-nbest", str(nbest), "--source", str(TOY / "toy.en"), "--model", str(model_dir),
               "-o", str(scored)]
    assert main(rescore) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already has the feature(s) RNNsearch0" in err and "(--model-label NAME)" in err
    assert not scored.exists()
    assert main([*rescore, "--model-label", "RNNsearch1"]) == 0
    entries = list(read_nbest(scored))
    assert len(entries) == 9 and {e.layout.labels for e in entries} == {("RNNsearch0", "RNNsearch1")}
    for entry in entries:
        assert entry.dense[1] == pytest.approx(entry.dense[0], abs=1e-3)
    assert main([*rescore, "--model-label", "A1", "--model-label", "A2"]) == 2
    assert "2 label(s) for 1 --model" in capsys.readouterr().err


def test_label_option_and_its_check(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    nbest = tmp_path / "out.nbest"
    assert translate(model_dir, "--beam", "2", "--nbest", "1", "--label", "NMT1", "-o", str(nbest)) == 0
    assert [e.layout.labels for e in read_nbest(nbest)] == [("NMT1",)] * 3
    assert translate(model_dir, "--nbest", "1", "--label", "RNN_0", "-o", str(tmp_path / "bad")) == 2
    assert "sparse feature" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_encdec_label_default(encdec_dir: Path, tmp_path: Path) -> None:
    nbest = tmp_path / "out.nbest"
    assert translate(encdec_dir, "--beam", "2", "--nbest", "2", "-o", str(nbest)) == 0
    assert next(read_nbest(nbest)).layout.labels == ("RNN0",)


def test_length_penalty_orders_the_nbest_list_by_ln_p_per_word(model_dir: Path, tmp_path: Path) -> None:
    nbest = tmp_path / "out.nbest"
    assert translate(model_dir, "--beam", "5", "--nbest", "5", "--length-penalty", "average", "-o", str(nbest)) == 0
    for _, group in group_by_sentence(read_nbest(nbest)):
        per_word = [e.total / (len(e.tokens) + 1) for e in group]
        assert per_word == sorted(per_word, reverse=True)


def test_weights_add_the_word_penalty_and_rank_by_the_weighted_total(model_dir: Path, tmp_path: Path) -> None:
    plain, neutral, bonus = tmp_path / "plain.nbest", tmp_path / "neutral.nbest", tmp_path / "bonus.nbest"
    (tmp_path / "neutral.yaml").write_text("RNNsearch0: 1\nWP0: 0\n")
    (tmp_path / "moses.ini").write_text("[weight]\nRNNsearch0= 0.5\nWP0= -1.5\n")  # a bonus of 1.5 a word
    assert translate(model_dir, "--beam", "4", "--nbest", "4", "-o", str(plain)) == 0
    assert translate(model_dir, "--beam", "4", "--nbest", "4", "--weights", str(tmp_path / "neutral.yaml"),
                     "-o", str(neutral)) == 0
    assert translate(model_dir, "--beam", "4", "--nbest", "4", "--weights", str(tmp_path / "moses.ini"),
                     "-o", str(bonus)) == 0
    unweighted, weighted = list(read_nbest(plain)), list(read_nbest(neutral))
    assert [(e.sentence_id, e.hypothesis, e.dense[0]) for e in unweighted] == \
           [(e.sentence_id, e.hypothesis, e.dense[0]) for e in weighted]  # weights 1 and 0: the same search
    for _, group in group_by_sentence(read_nbest(bonus)):
        for entry in group:
            assert entry.layout.labels == ("RNNsearch0", "WP0")  # on every line, as mert needs
            assert entry.dense[1] == -len(entry.tokens)
            assert entry.total == pytest.approx(0.5 * entry.dense[0] + 1.5 * len(entry.tokens), abs=1e-4)
        assert [e.total for e in group] == sorted((e.total for e in group), reverse=True)
    best = lambda entries: [len(g[0].tokens) for _, g in group_by_sentence(entries)]  # noqa: E731
    assert best(read_nbest(bonus)) >= best(unweighted) and sum(best(read_nbest(bonus))) > sum(best(unweighted))


@pytest.mark.parametrize("content, message", [
    ("RNNsearch0: 1\nLM0: 0.5\n", "weights.yaml: weights for features the search does not have: LM0 "
                                   "(it has RNNsearch0, WP0)"),
    ("RNN0: 1\n", "weights.yaml: weights for features the search does not have: RNN0"),
    ("RNNsearch0: 0\nWP0: 1\n", "weights.yaml: the weight of the model's ln p must not be 0"),
    ("WP0: [1, 2]\n", "weights.yaml: WP0 has 1 value in the search but 2 weights"),
])
def test_bad_weights_files(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, content: str,
                           message: str) -> None:
    weights, out = tmp_path / "weights.yaml", tmp_path / "out"
    weights.write_text(content)
    assert translate(model_dir, "--nbest", "2", "--weights", str(weights), "-o", str(out)) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def check_replacements(plain: Path, replaced: Path, translations: dict[str, str]) -> None:
    """Only the <unk>s changed, each into its source word's translation or the source word itself."""
    sources = [line.split() for line in read_text(TOY / "toy.en")]
    plain_lines = [line.split() for line in read_text(plain)]
    assert any(UNK in line for line in plain_lines), "the test model should produce <unk>"
    for source, before, after in zip(sources, plain_lines, read_text(replaced), strict=True):
        after = after.split()
        assert len(before) == len(after) and UNK not in after
        for old, new in zip(before, after, strict=True):
            if old != UNK:
                assert new == old
            else:
                assert new in translations.values() or (new in source and new not in translations)


def test_unk_replacement_copies_source_words_or_their_translations(model_dir: Path, tmp_path: Path) -> None:
    plain, replaced, dictionary = tmp_path / "plain", tmp_path / "replaced", tmp_path / "dict.txt"
    dictionary.write_text("man homme\norange orange\nhat chapeau\n")
    assert translate(model_dir, "--beam", "3", "-o", str(plain)) == 0
    assert translate(model_dir, "--beam", "3", "--unk-replace", "--dictionary", str(dictionary),
                     "-o", str(replaced)) == 0
    check_replacements(plain, replaced, {"man": "homme", "orange": "orange", "hat": "chapeau"})
    copied = tmp_path / "copied"
    assert translate(model_dir, "--beam", "3", "--unk-replace", "-o", str(copied)) == 0
    check_replacements(plain, copied, {})


def test_unk_replacement_from_a_phrase_table(model_dir: Path, tmp_path: Path) -> None:
    table = tmp_path / "phrase-table.gz"
    with gzip.open(table, "wt") as f:
        f.write("a ||| un ||| 0.5 0.5 0.4 0.5\n"
                "a ||| une ||| 0.5 0.5 0.6 0.5\n"
                "man ||| homme ||| 0.5 0.5 0.9 0.5\n"
                "orange hat ||| chapeau orange ||| 0.5 0.5 0.9 0.5\n")
    plain, replaced = tmp_path / "plain", tmp_path / "replaced"
    assert translate(model_dir, "--beam", "3", "-o", str(plain)) == 0
    assert translate(model_dir, "--beam", "3", "--unk-replace", "--phrase-table", str(table), "-o", str(replaced)) == 0
    check_replacements(plain, replaced, {"a": "une", "man": "homme"})


def test_alignments_and_attention_files(model_dir: Path, tmp_path: Path) -> None:
    out, alignments, attention = tmp_path / "out", tmp_path / "out.align", tmp_path / "out.attention.jsonl"
    assert translate(model_dir, "--beam", "3", "-o", str(out), "--alignments", str(alignments),
                     "--attention", str(attention)) == 0
    sources = [line.split() for line in read_text(TOY / "toy.en")]
    outputs = [line.split() for line in read_text(out)]
    records = [json.loads(line) for line in read_text(attention)]
    for i, (source, words, pairs, record) in enumerate(zip(sources, outputs, read_text(alignments), records,
                                                          strict=True)):
        links = [tuple(map(int, pair.split("-"))) for pair in pairs.split()]
        assert sorted(j for _, j in links) == list(range(len(words)))  # each target word once
        assert all(0 <= s < len(source) for s, _ in links)
        assert record["id"] == i and record["source"] == [*source, "</s>"] and record["target"] == [*words, "</s>"]
        weights = record["attention"]
        assert len(weights) == len(words) + 1 and all(len(row) == len(source) + 1 for row in weights)
        assert all(abs(sum(row) - 1) < 1e-3 for row in weights)
        for s, j in links:  # the hard link is the heaviest source word of its row
            assert weights[j][s] == max(weights[j][: len(source)])


def test_align_draws_a_png(model_dir: Path, tmp_path: Path) -> None:
    figure = tmp_path / "attention.png"
    assert main(["-q", "align", "--model", str(model_dir), "--source", "a man in an orange hat .",
                 "--target", "un homme avec un chapeau orange .", "-o", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    translated = tmp_path / "translated.png"
    assert main(["-q", "align", "--model", str(model_dir), "--source-file", str(TOY / "toy.en"), "--line", "2",
                 "--beam", "2", "-o", str(translated)]) == 0
    assert translated.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("options, message", [
    (["--nbest", "5", "--beam", "3"], "--nbest 5 needs a beam at least as wide, not 3"),
    (["--alpha", "0.5"], "--alpha is the parameter of --length-penalty wu"),
    (["--dictionary", "x.txt"], "--dictionary and --phrase-table are for --unk-replace"),
    (["--alignments", "-"], "--output and --alignments both write to stdout"),
    (["--weights", "w.yaml", "--length-penalty", "wu"], "--weights and --length-penalty wu do not combine"),
])
def test_bad_options(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, options: list[str],
                     message: str) -> None:
    assert translate(model_dir, *options) == 2
    assert message in capsys.readouterr().err


def test_bad_input_fails_with_file_and_line_and_leaves_no_output(model_dir: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "bad.en"
    source.write_bytes(b"a man .\na \xff dog\n")
    out, alignments = tmp_path / "out", tmp_path / "out.align"
    code = main(["translate", "--model", str(model_dir), "-i", str(source), "-o", str(out),
                 "--alignments", str(alignments)])
    assert code == 2
    assert f"rerank: error: {source}:2: expected UTF-8 text" in capsys.readouterr().err
    assert not out.exists() and not alignments.exists() and leftovers(tmp_path) == []


def test_missing_model_and_models_without_attention(encdec_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert translate(tmp_path / "nowhere") == 2
    assert f"{tmp_path / 'nowhere'}: no such directory" in capsys.readouterr().err
    assert translate(encdec_dir, "--unk-replace") == 2
    assert "--unk-replace needs attention weights, and an encdec model has none" in capsys.readouterr().err
    assert main(["align", "--model", str(encdec_dir), "--source", "a man", "-o", str(tmp_path / "a.png")]) == 2
    assert "rerank align needs attention weights" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_sentences_too_long_for_location_attention(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src_vocab, trg_vocab = toy_vocabularies()
    model = tiny_model(tiny_config(score="location", max_source_length=12), len(src_vocab), len(trg_vocab))
    model_dir = save_model_dir(tmp_path / "location", model, src_vocab, trg_vocab)
    out = tmp_path / "out"
    assert translate(model_dir, "-o", str(out)) == 2
    assert (f"{TOY / 'toy.en'}:2: expected at most 11 words: the model's location attention has "
            "max_source_length 12") in capsys.readouterr().err
    assert not out.exists()


def test_align_errors(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["align", "--model", str(model_dir), "--source-file", str(TOY / "toy.en"), "--line", "9",
                 "-o", str(tmp_path / "a.png")]) == 2
    assert f"{TOY / 'toy.en'}: expected at least 9 lines (--line 9), got '3 lines'" in capsys.readouterr().err
    assert main(["align", "--model", str(model_dir), "--source", "a man", "-o", str(tmp_path / "a.xyz")]) == 2
    assert "unknown image format 'xyz'" in capsys.readouterr().err
    assert main(["align", "--model", str(model_dir), "--source-file", str(TOY / "toy.en"),
                 "-o", str(tmp_path / "a.png")]) == 2
    assert "--source-file needs --line" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_empty_input_gives_empty_output(model_dir: Path, tmp_path: Path) -> None:
    empty, out = tmp_path / "empty.en", tmp_path / "out"
    empty.write_bytes(b"")
    assert main(["-q", "translate", "--model", str(model_dir), "-i", str(empty), "-o", str(out)]) == 0
    assert out.read_bytes() == b""
