"""``rerank score-table`` on a slice of the real Multi30k phrase table: one value appended to each line and
every other byte kept, the moses.ini updated to match, and bad input refused with nothing left behind."""

from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import content, leftovers
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats.moses_ini import MosesIni
from rerank.formats.phrase_table import read_phrase_table
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model
from rerank.models.vocab import Vocabulary

LINES = 300
SEPARATOR = "|||"


@pytest.fixture(scope="module")
def table(multi30k_slice: dict[str, Path]) -> Path:
    """The first 300 lines of the real phrase table, gzipped."""
    return multi30k_slice["phrase_table"]


@pytest.fixture(scope="module")
def model_dir(table: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random RNNsearch whose vocabularies are the slice's most frequent words (the rest is <unk>)."""
    entries = list(read_phrase_table(table))
    src_vocab = Vocabulary.build((e.source.split() for e in entries), 150)
    trg_vocab = Vocabulary.build((e.target.split() for e in entries), 150)
    model = tiny_model(tiny_config("rnnsearch"), len(src_vocab), len(trg_vocab), dtype=torch.float32)
    return save_model_dir(tmp_path_factory.mktemp("model") / "rnnsearch", model, src_vocab, trg_vocab)


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def reference_log_probs(model_dir: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    """ln p(target | source) of each pair alone, straight from the model."""
    loaded = load_model(model_dir)
    scores = []
    with torch.inference_mode():
        for source, target in pairs:
            src, src_len = pad(to_ids([source.split()], loaded.src_vocab))
            trg, _ = pad(to_ids([target.split()], loaded.trg_vocab))
            scores.append(float(loaded.model.score(loaded.model.encode(src, src_len), trg)))
    return np.array(scores)


def split_added(old: str, new: str) -> float:
    """The value ``new`` adds at the end of ``old``'s scores field; asserts that nothing else differs."""
    before, after = old.split(SEPARATOR), new.split(SEPARATOR)
    assert len(after) == len(before) and after[:2] == before[:2] and after[3:] == before[3:]
    body = before[2].rstrip(" ")
    trailing = before[2][len(body):]
    assert after[2].startswith(body + " ") and after[2].endswith(trailing)
    added = after[2][len(body) + 1: len(after[2]) - len(trailing)]
    assert added and " " not in added
    return float(added)


def test_one_value_is_appended_and_every_other_byte_kept(table: Path, model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scored.gz"
    code, _, err = run(["score-table", table, "-o", out, "--model", model_dir, "--window", 50, "--max-tokens", 64,
                        "--threads", 1],
                       capsys)
    assert code == 0, err
    assert f"{LINES:,} pairs in" in err and "pairs/s" in err
    before = content(table).decode().splitlines()
    after = gzip.decompress(out.read_bytes()).decode().splitlines()  # gzip, as the suffix says
    assert len(after) == len(before) == LINES
    values = np.array([split_added(old, new) for old, new in zip(before, after, strict=True)])
    assert ((values > 0) & (values <= 1)).all()
    pairs = [(line.split(SEPARATOR)[0], line.split(SEPARATOR)[1]) for line in before]
    np.testing.assert_allclose(np.log(values), reference_log_probs(model_dir, pairs), rtol=0, atol=1e-4)
    assert leftovers(tmp_path) == []


def test_an_ensemble_appends_the_mean_of_its_models_ln_p(table: Path, model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``--model A B``: one column, exp of the mean of the models' ln p; every other byte as one model's table has it;
    a model of other vocabularies takes part with its own."""
    entries = list(read_phrase_table(table))
    src_vocab = Vocabulary.build((e.source.split() for e in entries), 80)
    trg_vocab = Vocabulary.build((e.target.split() for e in entries), 120)
    other = save_model_dir(tmp_path / "other", tiny_model(tiny_config("encdec"), len(src_vocab), len(trg_vocab),
                                                          seed=3, dtype=torch.float32), src_vocab, trg_vocab)
    for name, models in (("one", [model_dir]), ("both", [model_dir, other])):
        code, _, err = run(["score-table", table, "-o", tmp_path / name, "--model", *models, "--window", 50,
                            "--threads", 1], capsys)
        assert code == 0, err
    before = content(table).decode().splitlines()
    one, both = ((tmp_path / name).read_text().splitlines() for name in ("one", "both"))
    assert [line.split(SEPARATOR)[:2] for line in both] == \
        [line.split(SEPARATOR)[:2] for line in one]
    values = np.array([split_added(old, new) for old, new in zip(before, both, strict=True)])
    pairs = [(line.split(SEPARATOR)[0], line.split(SEPARATOR)[1]) for line in before]
    mean = (reference_log_probs(model_dir, pairs) + reference_log_probs(other, pairs)) / 2
    np.testing.assert_allclose(np.log(values), np.maximum(mean, -100), rtol=0, atol=1e-4)
    assert not np.allclose(values, [split_added(old, new) for old, new in zip(before, one, strict=True)])
    code, _, err = run(["score-table", table, "-o", tmp_path / "ray", "--model", model_dir, other, "--ray"], capsys)
    assert code == 2 and "--ray scores with one model" in err


@pytest.mark.parametrize("per_word", [False, True])
def test_channel_appends_p_source_given_target_and_keeps_every_other_byte(table: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str],
                                                                         per_word: bool) -> None:
    entries = list(read_phrase_table(table))  # a French->English model: it reads the targets, scores the sources
    src_vocab = Vocabulary.build((e.target.split() for e in entries), 150)
    trg_vocab = Vocabulary.build((e.source.split() for e in entries), 150)
    model = tiny_model(tiny_config("rnnsearch"), len(src_vocab), len(trg_vocab), seed=5, dtype=torch.float32)
    channel = save_model_dir(tmp_path / "channel", model, src_vocab, trg_vocab)
    out = tmp_path / "scored.gz"
    code, _, err = run(["score-table", table, "-o", out, "--model", channel, "--channel",
                        *(["--per-word"] if per_word else []), "--threads", 1], capsys)
    assert code == 0, err
    before = content(table).decode().splitlines()
    after = gzip.decompress(out.read_bytes()).decode().splitlines()
    values = np.log([split_added(old, new) for old, new in zip(before, after, strict=True)])
    swapped = [(line.split(SEPARATOR)[1], line.split(SEPARATOR)[0]) for line in before]
    want = reference_log_probs(channel, swapped)  # ln p(source phrase | target phrase)
    if per_word:
        want /= np.array([len(source.split()) + 1 for _, source in swapped])
    np.testing.assert_allclose(values, want, rtol=0, atol=1e-4)


def test_precision_fp32_is_the_default_byte_for_byte_and_int8_is_near_it(table: Path, model_dir: Path,
                                                                         tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {}
    for precision in (None, "fp32", "int8"):
        out = tmp_path / f"scored.{precision}"
        code, _, err = run(["score-table", table, "-o", out, "--model", model_dir, "--threads", 1,
                            *(["--precision", precision] if precision else [])], capsys)
        assert code == 0, err
        outputs[precision] = out.read_bytes()
    assert outputs["fp32"] == outputs[None]
    assert outputs["int8"] != outputs[None]
    before = content(table).decode().splitlines()
    values = {p: np.log([split_added(old, new) for old, new in zip(before, outputs[p].decode().splitlines(),
                                                                    strict=True)]) for p in ("fp32", "int8")}
    tokens = np.array([len(line.split(SEPARATOR)[1].split()) + 1 for line in before])
    # see tests/unit/models/test_int8_against_fp32.py
    assert (np.abs(values["int8"] - values["fp32"]) <= 0.1 * tokens).all()


def test_a_pair_beyond_moses_lowest_score_is_floored_not_zero(model_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    long_target = " ".join(["un chien"] * 40)  # 81 tokens with </s>: ln p far below -100
    table = tmp_path / "table.txt"
    table.write_text(f"a dog ||| un chien ||| 0.5 0.5 0.5 0.5 ||| 0-0 1-1 ||| 1 1 1 ||| |||\n"
                     f"a dog ||| {long_target} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||\n")
    out = tmp_path / "out.txt"
    code, _, err = run(["score-table", table, "-o", out, "--model", model_dir], capsys)
    assert code == 0, err
    first, second = out.read_text().splitlines()
    assert 1e-44 < split_added(table.read_text().splitlines()[1], second) == float(f"{math.exp(-100):.6g}")
    assert split_added(table.read_text().splitlines()[0], first) > 1e-30
    assert "1 value floored at exp(-100)" in err


def test_moses_ini_gains_one_feature_one_weight_and_the_new_path(table: Path, model_dir: Path,
                                                                 multi30k_slice: dict[str, Path], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ini, ini_out, out = multi30k_slice["moses_ini"], tmp_path / "moses.ini", tmp_path / "scored.gz"
    code, _, err = run(["score-table", table, "-o", out, "--model", model_dir, "--moses-ini", ini,
                        "--moses-ini-out", ini_out, "--weight", 0.3], capsys)
    assert code == 0, err
    before, after = ini.read_text().splitlines(), ini_out.read_text().splitlines()
    changed = {i: (old, new) for i, (old, new) in enumerate(zip(before, after, strict=True)) if old != new}
    assert sorted(new for _, new in changed.values()) == sorted([
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=5 path={out} input-factor=0 output-factor=0",
        "TranslationModel0= 0.126263 0.0567749 0.12818 0.0607768 0.3"])
    assert all(len(line.split(SEPARATOR)[2].split()) == 5 for line in content(out).decode().splitlines())


def test_weight_auto_matches_the_new_scores_spread_to_the_others(table: Path, model_dir: Path,
                                                                 multi30k_slice: dict[str, Path], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ini, ini_out, out = multi30k_slice["moses_ini"], tmp_path / "moses.ini", tmp_path / "scored.gz"
    code, _, err = run(["score-table", table, "-o", out, "--model", model_dir, "--moses-ini", ini,
                        "--moses-ini-out", ini_out, "--weight", "auto", "--threads", 1], capsys)
    assert code == 0, err
    scores = np.array([[max(math.log(float(x)), -100.0) for x in line.split(SEPARATOR)[2].split()]
                       for line in content(out).decode().splitlines()])
    deviations = scores.std(axis=0)
    weights = (0.126263, 0.0567749, 0.12818, 0.0607768)  # the slice's moses.ini
    want = np.mean(np.abs(weights) * deviations[:-1]) / deviations[-1]
    written = MosesIni.read(ini_out).weights()["TranslationModel0"]
    assert written[:4] == weights and written[4] == pytest.approx(want, rel=1e-5)
    assert f"weighted {written[4]:g}" in err
    code, _, err = run(["score-table", table, "-o", tmp_path / "x.gz", "--model", model_dir, "--weight", "auto"],
                       capsys)
    assert code == 2 and "--weight auto is the new score's weight in the moses.ini: give --moses-ini" in err


@pytest.mark.parametrize("options,message", [
    (["--moses-ini", "INI"], "give both --moses-ini and --moses-ini-out"),
    (["--moses-ini", "INI", "--moses-ini-out", "OUT_INI", "--table", "TranslationModel9"],
     "no feature named 'TranslationModel9'"),
    (["--moses-ini", "BAD_INI", "--moses-ini-out", "OUT_INI"], "has num-features=5, but"),
    (["--model", "NO_MODEL"], "not a model directory"),
    (["--device", "tpu"], "unknown device"),
])
def test_bad_options_fail_before_scoring_and_write_nothing(table: Path, model_dir: Path,
                                                           multi30k_slice: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           options: list[str], message: str) -> None:
    ini = multi30k_slice["moses_ini"]
    bad_ini = tmp_path / "bad.ini"
    bad_ini.write_text(ini.read_text().replace("num-features=4", "num-features=5"))
    names = {"INI": ini, "BAD_INI": bad_ini, "OUT_INI": tmp_path / "out.ini", "NO_MODEL": tmp_path}
    out = tmp_path / "scored.gz"
    model = [] if "--model" in options else ["--model", model_dir]
    argv = ["score-table", table, "-o", out, *model, *[names.get(o, o) for o in options]]
    code, _, err = run(argv, capsys)
    assert code == 2 and message in err
    assert not out.exists() and not (tmp_path / "out.ini").exists() and leftovers(tmp_path) == []


def test_a_bad_line_midway_fails_with_its_line_number_and_leaves_nothing(table: Path, model_dir: Path,
                                                                         multi30k_slice: dict[str, Path],
                                                                         tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    lines = content(table).decode().splitlines(keepends=True)
    lines[199] = "a dog ||| un chien\n"
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress("".join(lines).encode()))
    shutil.copy(multi30k_slice["moses_ini"], tmp_path / "moses.ini")
    out, ini_out = tmp_path / "scored.gz", tmp_path / "out.ini"
    code, _, err = run(["score-table", broken, "-o", out, "--model", model_dir, "--window", 50,
                        "--moses-ini", tmp_path / "moses.ini", "--moses-ini-out", ini_out], capsys)
    assert code == 2
    assert f"{broken}:200: expected 3 to 7 fields" in err
    assert not out.exists() and not ini_out.exists() and leftovers(tmp_path) == []


def test_a_model_giving_nan_is_an_error_not_a_nan_in_the_table(table: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    entries = list(read_phrase_table(table))
    vocab = Vocabulary.build((e.target.split() for e in entries), 50)
    model = tiny_model(tiny_config("encdec"), len(vocab), len(vocab), dtype=torch.float32)
    with torch.no_grad():
        model.output.project.bias.fill_(float("nan"))
    broken = save_model_dir(tmp_path / "broken-model", model, vocab, vocab)
    out = tmp_path / "scored.gz"
    code, _, err = run(["score-table", table, "-o", out, "--model", broken], capsys)
    assert code == 2 and f"{table}:1: expected a phrase pair the model gives a finite score, got 'ln p = nan" in err
    assert not out.exists() and leftovers(tmp_path) == []


def test_stdout_output(table: Path, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["-q", "score-table", table, "-o", "-", "--model", model_dir], capsys)
    assert code == 0, err
    assert len(out.splitlines()) == LINES and err == ""
    written = tmp_path / "scored"
    assert run(["-q", "score-table", table, "-o", written, "--model", model_dir], capsys)[0] == 0
    assert out.encode() == written.read_bytes()  # the same bytes as the table written to a file
