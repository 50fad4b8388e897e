"""The mistakes that cost a user BLEU or time without failing: hypotheses and references tokenized or cased
differently, or references of another set (warned by evaluate, oracle, tune and the experiment), an empty n-best
list given to apply, a list or a reference of another source (found before any model loads), library messages (a
fake .gz), and a shipped config used from another directory."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import edit_scored_list, write_arpa

from rerank.cli import main
from rerank.config import resolved_input
from rerank.formats.tokenization import style_mismatch, text_style
from rerank.models.checkpoint import WEIGHTS
from rerank.study.checks import check_experiment
from rerank.study.config import load_experiment

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data"
TEST_DATA = REPO / "tests" / "data"
MISMATCH = "BLEU would compare different tokens"


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err


def detokenized(line: str) -> str:
    """Moses' tokenized French made plain, as detokenizer.perl and deescape-special-chars.perl would."""
    line = line.replace("&apos; ", "'").replace("&apos;", "'").replace("&quot;", '"')
    return re.sub(r" ([.,!?;:])(?= |$)", r"\1", line)


def write_detokenized(source: Path, target: Path) -> Path:
    target.write_text("".join(detokenized(line) + "\n" for line in source.read_text().splitlines()))
    return target


def lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.parametrize("hypotheses, references", [
    (SAMPLE / "val.1best", SAMPLE / "val.fr"), (SAMPLE / "test.1best", SAMPLE / "test.fr"),
    (TEST_DATA / "multi30k" / "test.1best", TEST_DATA / "multi30k" / "test.fr"),
    (TEST_DATA / "toy.1best", TEST_DATA / "toy.fr")])
def test_the_shipped_data_agree(hypotheses: Path, references: Path) -> None:
    hyps, refs = text_style(lines(hypotheses)), text_style(lines(references))
    assert style_mismatch(hyps, refs, "h", "r") is None
    assert refs.tokenized in (True, None)


def test_the_multi30k_files_agree(shared_data: Path) -> None:
    files = sorted((shared_data / "multi30k" / "tok").glob("*.fr"))
    if not files:
        pytest.skip("no tokenized Multi30k in ../shared")
    styles = [text_style(lines(path)) for path in files]
    assert all(style.tokenized and style.escapes for style in styles)
    assert all(style_mismatch(styles[0], style, "a", "b") is None for style in styles)


def test_the_styles_are_told_apart() -> None:
    tokenized = lines(SAMPLE / "val.fr")
    plain = [detokenized(line) for line in tokenized]
    assert text_style(tokenized).tokenized is True and text_style(plain).tokenized is False
    assert MISMATCH in (style_mismatch(text_style(tokenized), text_style(plain), "h", "r") or "")
    assert MISMATCH in (style_mismatch(text_style(plain), text_style(tokenized), "h", "r") or "")
    unescaped = [line.replace("&apos;", "'") for line in tokenized]
    assert "escapes quotes" in (style_mismatch(text_style(tokenized), text_style(unescaped), "h", "r") or "")
    assert text_style(["a b c", "d e"]).tokenized is None  # no punctuation: no style, never a warning


def test_evaluate_warns_of_detokenized_references(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = write_detokenized(SAMPLE / "test.fr", tmp_path / "test.detok.fr")
    code, err = run(["evaluate", SAMPLE / "test.1best", "-r", plain, "--tokenize", "none"], capsys)
    assert code == 0
    assert re.search(r"test.1best looks tokenized .* but .*test.detok.fr looks detokenized: BLEU would compare "
                     r"different tokens", err)
    code, err = run(["evaluate", SAMPLE / "test.1best", "-r", SAMPLE / "test.fr", "--tokenize", "none"], capsys)
    assert code == 0 and MISMATCH not in err and "warning" not in err.lower()


def test_evaluate_warns_of_tokenized_references_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = write_detokenized(SAMPLE / "test.1best", tmp_path / "test.detok.1best")
    code, err = run(["evaluate", plain, "-r", SAMPLE / "test.fr", "--tokenize", "13a"], capsys)
    assert code == 0 and "test.detok.1best looks detokenized" in err and MISMATCH in err


def test_oracle_and_tune_warn_on_their_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = write_detokenized(SAMPLE / "val.fr", tmp_path / "val.detok.fr")
    nbest = TEST_DATA / "multi30k" / "val.100best.gz"
    reference = tmp_path / "val20.detok.fr"
    reference.write_text("".join(plain.read_text().splitlines(True)[:20]))
    code, err = run(["oracle", nbest, "-r", reference], capsys)
    assert code == 0 and "val.100best.gz looks tokenized" in err and MISMATCH in err
    tuning = Path(shutil.copy(reference, tmp_path / "tuning.detok.fr"))  # a warning is said once in a process
    code, err = run(["tune", "--nbest", nbest, "-r", tuning, "--restarts", "1", "-o", tmp_path / "w.yaml"], capsys)
    assert code == 0 and "val.100best.gz looks tokenized" in err and MISMATCH in err
    code, err = run(["oracle", nbest, "-r", TEST_DATA / "multi30k" / "val.fr"], capsys)
    assert code == 0 and MISMATCH not in err


CASE = "is lowercased but"
UNRELATED = "looks unrelated to"


def test_evaluate_warns_of_cased_references_against_a_lowercased_system(shared_data: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Moses' lowercased, tokenized 1-best against Multi30k's raw references: BLEU 38.32 instead of 56.12."""
    hypotheses = shared_data / "moses-multi30k" / "nbest" / "test_2016_flickr.1best"
    raw, tokenized = (shared_data / "multi30k" / "raw" / "test_2016_flickr.fr",
                      shared_data / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.fr")
    code, err = run(["evaluate", hypotheses, "-r", raw], capsys)
    assert code == 0 and f"test_2016_flickr.1best {CASE} {raw} has capitals" in err and "--lowercase" in err
    assert MISMATCH in err and UNRELATED not in err  # tokenized differently, but the right references
    code, err = run(["evaluate", hypotheses, "-r", tokenized, "--tokenize", "none"], capsys)
    assert code == 0 and CASE not in err and MISMATCH not in err


def test_case_is_warned_where_bleu_counts_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cased = tmp_path / "test.cased.fr"
    cased.write_text("".join(line[:1].upper() + line[1:] + "\n" for line in lines(SAMPLE / "test.fr")))
    code, err = run(["evaluate", SAMPLE / "test.1best", "-r", cased, "--tokenize", "none"], capsys)
    assert code == 0 and f"test.1best {CASE} {cased} has capitals" in err and err.count("\n") == 1
    code, err = run(["evaluate", SAMPLE / "test.1best", "-r", cased, "--tokenize", "none", "--lowercase"], capsys)
    assert code == 0 and err == ""
    nbest = TEST_DATA / "multi30k" / "val.100best.gz"
    tuning = tmp_path / "val20.cased.fr"
    tuning.write_text("".join(line.capitalize() + "\n" for line in lines(TEST_DATA / "multi30k" / "val.fr")))
    code, err = run(["tune", "--nbest", nbest, "-r", tuning, "--restarts", "1", "-o", tmp_path / "w.yaml"], capsys)
    assert code == 0 and f"val.100best.gz {CASE} {tuning} has capitals" in err
    code, err = run(["tune", "--nbest", nbest, "-r", tuning, "--restarts", "1", "-o", tmp_path / "w.yaml",
                     "--lowercase"], capsys)
    assert code == 0 and CASE not in err


def test_another_sets_references_are_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sample's test list against its validation references (as many lines): BLEU near 0, exit status 0,
    and a warning naming both files from evaluate, oracle and tune."""
    nbest = SAMPLE / "test.100best.gz"
    code, err = run(["evaluate", SAMPLE / "test.1best", "-r", SAMPLE / "val.fr", "--tokenize", "none"], capsys)
    assert code == 0 and f"{SAMPLE / 'val.fr'} {UNRELATED} {SAMPLE / 'test.1best'}: over 250 sentences" in err
    assert f"check that {SAMPLE / 'val.fr'} holds the references of the text {SAMPLE / 'test.1best'}" in err
    for command in (["oracle", nbest, "-r", SAMPLE / "val.fr"],
                    ["tune", "--nbest", nbest, "-r", Path(shutil.copy(SAMPLE / "val.fr", tmp_path / "v.fr")),
                     "--restarts", "1", "-o", tmp_path / "w.yaml"]):
        code, err = run(command, capsys)
        assert code == 0 and UNRELATED in err and "test.100best.gz" in err, command
    code, err = run(["tune", "--nbest", nbest, "-r", SAMPLE / "test.fr", "--restarts", "1", "-o",
                     tmp_path / "w.yaml"], capsys)
    assert code == 0 and UNRELATED not in err


def test_apply_refuses_an_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.nbest").write_text("")
    code, err = run(["apply", tmp_path / "empty.nbest", "--weights", TEST_DATA / "weights.yaml", "-o",
                     tmp_path / "1best"], capsys)
    assert code == 2 and "empty.nbest: expected at least one hypothesis, got 'an empty n-best list'" in err
    assert not (tmp_path / "1best").exists()


def broken_model(tmp_path: Path) -> Path:
    """RNNsearch's model directory with weights that cannot load: reading them is the first model work."""
    model = tmp_path / "rnnsearch"
    shutil.copytree(REPO / "examples" / "models" / "rnnsearch", model, ignore=shutil.ignore_patterns(WEIGHTS))
    (model / WEIGHTS).write_bytes(b"PK\x03\x04 not a weights file")
    return model


def test_a_list_of_another_source_fails_before_any_model_loads(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "short.en"
    source.write_text("".join((TEST_DATA / "toy.en").read_text().splitlines(True)[:2]))
    code, err = run(["score-nbest", TEST_DATA / "toy.nbest", "--source", source, "--model", broken_model(tmp_path),
                     "-o", tmp_path / "out.gz"], capsys)
    assert code == 2
    assert re.search(r"toy.nbest:7: expected a sentence id below 2, the number of lines of .*short.en, got '2'", err)
    assert "weights file" not in err and not (tmp_path / "out.gz").exists()


def sample_study(tmp_path: Path, **changes: object) -> Path:
    config = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text())
    config = {key: (str(REPO / value) if isinstance(value, str) and (REPO / value).exists() else value)
              for key, value in config.items()}
    for part in ("moses", "dev", "test"):
        config[part] = {key: str(REPO / value) for key, value in config[part].items()}
    config.update(output_dir=str(tmp_path / "run"), **changes)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_experiment_checks_its_data_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "test.fr"
    short.write_text("".join((SAMPLE / "test.fr").read_text().splitlines(True)[:249]))
    test = {"source": str(SAMPLE / "test.en"), "reference": str(short), "nbest": str(SAMPLE / "test.100best.gz")}
    code, err = run(["experiment", sample_study(tmp_path, test=test)], capsys)
    assert code == 2 and re.search(r"study.yaml: test.reference: expected as many lines as test.source "
                                   r"\(.*test.en: 250\), got 249 in .*test.fr", err)
    assert not (tmp_path / "run" / "commands.sh").exists()


def test_a_fake_gz_is_named_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "refs.gz"
    fake.write_text("un homme .\n")
    code, err = run(["evaluate", TEST_DATA / "toy.1best", "-r", fake], capsys)
    assert code == 2 and "refs.gz:1: expected gzip data, as the name ends in .gz, got 'not a gzip file'" in err
    assert "Gzip" not in err


def test_config_paths_are_found_beside_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    shutil.copy(TEST_DATA / "toy.fr", configs / "words.fr")
    (configs / "rescore.yaml").write_text("features:\n  - kind: unk-penalty\n    corpus: words.fr\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, err = run(["score-nbest", TEST_DATA / "toy.nbest", "--config", "../configs/rescore.yaml", "-o", "out"],
                    capsys)
    assert code == 0, err
    assert all(" UNK1= " in line for line in (elsewhere / "out").read_text().splitlines())


def test_the_working_directory_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.txt").write_text("beside the config\n")
    monkeypatch.chdir(tmp_path)
    assert resolved_input("a.txt", "configs") == "configs/a.txt"
    Path("a.txt").write_text("here\n")
    assert resolved_input("a.txt", "configs") == "a.txt"
    assert resolved_input("missing.txt", "configs") == "missing.txt"  # for its error to name as written
    (tmp_path / "configs" / "a.txt").unlink()
    (tmp_path / "configs" / "deep").mkdir()
    Path("a.txt").rename(tmp_path / "data.txt")
    monkeypatch.chdir(tmp_path / "configs")
    assert resolved_input("data.txt", "deep") == str(tmp_path / "data.txt")  # the nearest directory above


def test_a_shipped_config_runs_from_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_experiment(REPO / "configs" / "experiments" / "sample.yaml")
    check_experiment(config)  # every file it names, found from the repository's root
    assert config.dev.nbest == str(REPO / "examples" / "data" / "val.100best.gz")
    assert config.output_dir == "runs/sample"  # what it writes stays relative to the working directory


def test_score_nbest_reuses_the_values_of_a_scored_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hypothesis a scored list has takes its values from there (shown by one changed in that list); the
    others are scored; with nothing changed, the output is the plain run's."""
    nbest, flags = TEST_DATA / "toy.nbest", ["--word-penalty", "--unk-corpus", TEST_DATA / "toy.fr"]
    assert run(["score-nbest", nbest, *flags, "-o", tmp_path / "plain"], capsys)[0] == 0
    plain = (tmp_path / "plain").read_text().splitlines(True)
    first = [line for line in plain if line.startswith("0 ")]
    shutil.copy(tmp_path / "plain", tmp_path / "scored")
    shutil.copy(tmp_path / "plain.features.yaml", tmp_path / "scored.features.yaml")
    edit_scored_list(tmp_path / "scored", lambda text: "".join([first[0].replace("WP1= -11 UNK1= 0",
                                                                                 "WP1= -99 UNK1= 7"), *first[1:]]))
    assert "WP1= -99 UNK1= 7" in (tmp_path / "scored").read_text()
    assert run(["score-nbest", nbest, *flags, "--reuse", tmp_path / "scored", "-o", tmp_path / "out"], capsys)[0] == 0
    out = (tmp_path / "out").read_text().splitlines(True)
    assert out[0] == first[0].replace("WP1= -11 UNK1= 0", "WP1= -99 UNK1= 7") and out[1:] == plain[1:]
    shutil.copy(tmp_path / "scored.features.yaml", tmp_path / "wrong.features.yaml")
    (tmp_path / "wrong").write_text(first[0].replace("WP1= -11", "WP1= -11 -1"))
    edit_scored_list(tmp_path / "wrong", lambda text: text)
    code, err = run(["score-nbest", nbest, *flags, "--reuse", tmp_path / "wrong", "-o", tmp_path / "out2"], capsys)
    assert code == 2 and "WP1 has 2 values, but the feature gives 1" in err


def test_the_sample_page_gets_the_run_s_times(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("sample_table", REPO / "examples" / "sample_table.py")
    assert spec is not None and spec.loader is not None
    sample_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample_table)
    timings = tmp_path / "timings.json"
    step = {"wall_s": 30.4, "cpu_s": 50.2, "load": 2.0, "cores": 2}
    timings.write_text(json.dumps({"steps": {"translate dev encdec": step, "translate test encdec": step,
                                             "tune tuning/a.yaml": step},
                                   "total": {"wall_s": 125.0, "cpu_s": 170.0, "load": 2.54, "cores": 2}}))
    page = f"# T\n\n## Time\n\n{sample_table.TIME_START}old\n{sample_table.TIME_END}\n"
    text = sample_table.with_times(page, timings)
    assert "took 170 s of CPU (user and system) and 2 min 5 s by the wall clock on a 2-core machine under a load " \
           "average of 2.5" in text
    assert "| translate | 2 | 61 | 100 |\n| tune | 1 | 30 | 50 |\n" + sample_table.TIME_END in text
    assert "old" not in text and sample_table.with_times(page, tmp_path / "none.json") == page


def scored_with_model(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: Path, output: str,
                      *extra: object) -> tuple[int, str]:
    """``score-nbest`` of the toy list with the shipped encoder-decoder (which reads the source) and a word
    penalty."""
    return run(["score-nbest", TEST_DATA / "toy.nbest", "--source", source, "--model", REPO / "examples" / "models" /
                "encdec", "--word-penalty", *extra, "-o", tmp_path / output], capsys)


def test_reuse_refuses_a_list_scored_against_another_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """The list records its source's digest for RNN0: a list scored against another source (same sentence ids,
    same hypotheses, other RNN0 values) is refused before any model loads, naming the label and both sources;
    against the same source, its values are taken and the output is a fresh scoring's."""
    other = tmp_path / "other.en"
    other.write_text("".join(f"the {line}\n" for line in (TEST_DATA / "toy.en").read_text().splitlines()))
    assert scored_with_model(tmp_path, capsys, other, "other.gz")[0] == 0
    assert scored_with_model(tmp_path, capsys, TEST_DATA / "toy.en", "fresh.gz")[0] == 0
    assert gzip.decompress((tmp_path / "other.gz").read_bytes()) != gzip.decompress((tmp_path / "fresh.gz")
                                                                                    .read_bytes())
    code, err = scored_with_model(tmp_path, capsys, TEST_DATA / "toy.en", "out.gz", "--reuse", tmp_path / "other.gz")
    assert code == 2 and not (tmp_path / "out.gz").exists()
    assert err.splitlines() == [f"rerank: error: {tmp_path}/other.gz: RNN0 was scored with source {other} (sha256 "
                                f"{hashlib.sha256(other.read_bytes()).hexdigest()[:12]}), not {TEST_DATA}/toy.en "
                                f"(sha256 {hashlib.sha256((TEST_DATA / 'toy.en').read_bytes()).hexdigest()[:12]}): "
                                "its values are not this feature's; reuse a list scored with the same features, or "
                                "score without it"]
    assert scored_with_model(tmp_path, capsys, TEST_DATA / "toy.en", "out.gz", "--reuse", tmp_path / "fresh.gz")[0] == 0
    assert (tmp_path / "out.gz").read_bytes() == (tmp_path / "fresh.gz").read_bytes()
    assert (tmp_path / "out.gz.features.yaml").read_text().replace("out.gz", "fresh.gz") == \
        (tmp_path / "fresh.gz.features.yaml").read_text()


def test_reuse_refuses_another_language_model_under_the_same_label(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """LM1 from a language model whose file changed since (same name, other content) is refused; so is an option
    that changes the values (--lm-oov adds a count)."""
    lm = tmp_path / "lm.arpa"
    write_arpa(lm, (TEST_DATA / "toy.fr").read_text().splitlines())
    nbest = TEST_DATA / "toy.nbest"
    assert run(["score-nbest", nbest, "--lm", lm, "-o", tmp_path / "scored"], capsys)[0] == 0
    digest = hashlib.sha256(lm.read_bytes()).hexdigest()[:12]
    code, err = run(["score-nbest", nbest, "--lm", lm, "--lm-oov", "--reuse", tmp_path / "scored", "-o",
                     tmp_path / "out"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith(f"rerank: error: {tmp_path}/scored: LM1 was scored with "
                                                         "oov false, not true: ")
    write_arpa(lm, (TEST_DATA / "toy.fr").read_text().splitlines()[:2])  # another model, the same file name
    code, err = run(["score-nbest", nbest, "--lm", lm, "--reuse", tmp_path / "scored", "-o", tmp_path / "out"], capsys)
    assert code == 2 and f"{tmp_path}/scored: LM1 was scored with path {lm} (sha256 {digest}), not {lm} (sha256 " \
        f"{hashlib.sha256(lm.read_bytes()).hexdigest()[:12]})" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.features.yaml").exists()


def test_a_list_without_its_record_is_reused_only_unchecked(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A scored list without a record (an older rerank's), or whose text is not the one its record describes (it
    was replaced since), is refused with a message naming --reuse-unchecked, which takes its values as they are.
    A list written to stdout has no record."""
    nbest, flags = TEST_DATA / "toy.nbest", ["--word-penalty"]
    assert run(["score-nbest", nbest, *flags, "-o", tmp_path / "scored"], capsys)[0] == 0
    record = (tmp_path / "scored.features.yaml").read_text()
    (tmp_path / "scored.features.yaml").unlink()
    code, err = run(["score-nbest", nbest, *flags, "--reuse", tmp_path / "scored", "-o", tmp_path / "out"], capsys)
    assert code == 2 and err.splitlines() == [
        f"rerank: error: {tmp_path}/scored: no record of what its features were computed from (scored.features.yaml, "
        f"which score-nbest writes beside a list): score it again, or give it as --reuse-unchecked {tmp_path}/scored "
        "to take its values as they are"]
    (tmp_path / "scored.features.yaml").write_text(record)
    (tmp_path / "scored").write_text((tmp_path / "scored").read_text().replace("WP1= -11", "WP1= -99"))
    code, err = run(["score-nbest", nbest, *flags, "--reuse", tmp_path / "scored", "-o", tmp_path / "out"], capsys)
    assert code == 2 and f"{tmp_path}/scored: not the list its record {tmp_path}/scored.features.yaml describes" in err
    code, err = run(["score-nbest", nbest, *flags, "--reuse-unchecked", tmp_path / "scored", "-o", tmp_path / "out"],
                    capsys)
    assert code == 0 and "its values are taken unchecked" in err and "WP1= -99" in (tmp_path / "out").read_text()
    assert run(["score-nbest", nbest, *flags, "-o", "-"], capsys)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.features.yaml", "scored", "scored.features.yaml"]


def test_a_scored_list_and_its_record_appear_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scoring that fails (a sentence id beyond the source, found as the list is read from stdin) leaves neither
    the list nor its record; the record of a chained scoring keeps the input list's features."""
    nbest = TEST_DATA / "toy.nbest"
    assert run(["score-nbest", nbest, "--word-penalty", "-o", tmp_path / "first"], capsys)[0] == 0
    assert run(["score-nbest", tmp_path / "first", "--word-penalty", "--wp-label", "WP2", "-o", tmp_path / "second"],
               capsys)[0] == 0
    assert list(yaml.safe_load((tmp_path / "second.features.yaml").read_text())["features"]) == ["WP1", "WP2"]
    short = tmp_path / "short.en"
    short.write_text("one line\n")
    code, _ = run(["score-nbest", nbest, "--source", short, "--model", REPO / "examples" / "models" / "encdec",
                   "-o", tmp_path / "third"], capsys)
    assert code == 2 and not (tmp_path / "third").exists() and not (tmp_path / "third.features.yaml").exists()
