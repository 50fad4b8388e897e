"""Inputs a hostile or careless user gives, each refused with exit status 2 and one message naming the file and
the key, before any work: experiment configs, model directories, averages, shard manifests, YAML aliases,
command templates, prepared corpora."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.config import ALIAS_BYTES, load_config, load_yaml
from rerank.errors import ConfigError, RerankError
from rerank.formats.shards import MAX_SHARDS, Shard
from rerank.models.averaging import checkpoint_path
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, load_model, save_state
from rerank.models.vocab import SPECIALS, Vocabulary
from rerank.rescore.append import RescoreConfig
from rerank.study.checks import check_experiment, unknown_word_list
from rerank.study.config import load_experiment
from rerank.training.config import DataConfig
from rerank.training.prepare import MANIFEST, PrepareSettings, manifest_checksum, prepare_parallel
from rerank.training.prepared import PreparedCorpus, check_prepared_settings
from rerank.tune.parallel import check_submitted_path
from rerank.tune.templates import Template

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
MODELS = REPO / "examples" / "models"


# ------------------------------------------------------------------------------------------------ experiments

def experiment(tmp_path: Path, **changes: object) -> Path:
    """configs/experiments/sample.yaml with absolute paths and ``changes`` (dotted keys)."""
    config = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text())
    for section in ("moses", "dev", "test"):
        config[section] = {key: str(REPO / value) for key, value in config[section].items()}
    for key in ("encdec", "rnnsearch"):
        config[key] = str(REPO / config[key])
    config["output_dir"] = str(tmp_path / "run")
    for key, value in changes.items():
        *parents, last = key.split(".")
        section = config
        for parent in parents:
            section = section[parent]
        section[last] = value
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], **changes: object) -> str:
    """The message of ``rerank experiment`` on the sample config with ``changes``, which must fail before its
    first step (nothing in the output directory but what every run makes first)."""
    path = experiment(tmp_path, **changes)
    started = time.monotonic()
    assert main(["-q", "experiment", str(path)]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - started < 30 and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "rescore.yaml").exists() and not (tmp_path / "run" / "models").exists()
    return err


@pytest.mark.parametrize(("key", "value"), [("dev.source", "{dir}"), ("moses.language_model", "{dir}"),
                                            ("test.reference", "{dir}")])
def test_a_directory_given_as_a_file_is_refused_before_the_first_step(key: str, value: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, **{key: value.format(dir=tmp_path)})
    assert f"experiment.yaml: expected files, got directories: {key}: {tmp_path}" in err


def test_a_reference_shorter_than_its_source_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "ref"
    short.write_text("a\nb\nc\n")
    err = refused(tmp_path, capsys, **{"dev.reference": str(short)})
    assert "experiment.yaml: dev.reference: expected as many lines as dev.source" in err and "got 3" in err


def test_nbest_wider_than_the_beam_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, nbest=20, beam=10)
    assert "experiment.yaml: top level: nbest: expected at most beam (10)" in err


def test_a_bad_bucket_scheme_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, buckets="abc")
    assert "experiment.yaml: buckets: expected a bucket width" in err


def test_a_left_to_right_model_is_not_a_right_to_left_feature(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, right_to_left=str(MODELS / "rnnsearch"))
    assert "experiment.yaml: right_to_left: expected a right-to-left model (model.reverse_target: true)" in err


def test_a_bad_model_directory_is_named_by_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(MODELS / "encdec", broken)
    (broken / WEIGHTS).unlink()
    err = refused(tmp_path, capsys, encdec=str(broken))
    assert f"experiment.yaml: encdec: {broken} is not a model directory" in err


def test_a_nan_weight_in_moses_ini_is_named_in_the_users_file(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    ini = tmp_path / "moses.ini"
    text = (REPO / "examples" / "data" / "moses.ini").read_text()
    ini.write_text(text.replace("\nWordPenalty0= -0.225306\n", "\nWordPenalty0= nan\n"))
    err = refused(tmp_path, capsys, **{"moses.ini": str(ini)})
    assert f"experiment.yaml: moses.ini: {ini}:" in err and "finite numbers" in err


def test_more_folds_than_dev_sentences_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "dev"
    short.write_text("a\nb\nc\n")
    err = refused(tmp_path, capsys, cv_folds=4, **{"dev.source": str(short), "dev.reference": str(short),
                                                   "dev.nbest": str(DATA / "toy.nbest")})
    assert err == f"rerank: error: {tmp_path}/experiment.yaml: cv_folds: expected at most the 3 sentences of " \
        f"dev.source ({short}), one a fold at least, got 4\n"


@pytest.mark.parametrize(("changes", "message"), [
    ({"tokenize": "13b"}, "experiment.yaml: tokenize: expected one of none, "),
    ({"seeds": [1, -1]}, "experiment.yaml: seeds: expected seeds of at least 0, got [1, -1]"),
    ({"device": "gpu"}, "experiment.yaml: device: unknown device 'gpu'; expected cpu, cuda or cuda:N"),
])
def test_a_value_out_of_range_is_named_by_its_key(changes: dict[str, object], message: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert message in refused(tmp_path, capsys, **changes)


def test_a_language_model_that_is_not_one_is_refused_at_its_first_line(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A text file (here the French side of the data) as the language model is refused before the first step,
    naming the experiment's key and the file's first line; KenLM would say so only when LM1 is scored."""
    err = refused(tmp_path, capsys, **{"moses.language_model": str(REPO / "examples" / "data" / "val.fr")})
    first = (REPO / "examples" / "data" / "val.fr").read_text().splitlines()[0]
    assert err.startswith(f"rerank: error: {tmp_path}/experiment.yaml: moses.language_model: {REPO}/examples/data/"
                          f"val.fr:1: expected an ARPA language model (\\data\\ first) or a KenLM binary model, got "
                          f"'{first[:40]}")
    binary = tmp_path / "lm.binary"
    binary.write_bytes(b"mmap lm http://kheafield.com/code format version 5\n\0\0")
    cslm = {"cslm": str(MODELS / "encdec"), "moses.language_model": str(binary)}  # its back-off needs ARPA text
    err = refused(tmp_path, capsys, **cslm)
    assert f"moses.language_model: {binary}: expected an ARPA language model (text): a KenLM binary model does " \
        "not do here" in err


def test_the_sample_passes_every_check(tmp_path: Path) -> None:
    check_experiment(load_experiment(experiment(tmp_path)), "experiment.yaml")


# ------------------------------------------------------------------------------------------------ UNK1

def test_unk1_counts_words_not_pieces(tmp_path: Path) -> None:
    from features.word_penalty import UnknownWordCount

    pieces = tmp_path / "vocab.trg.txt"
    tokens = [*SPECIALS, "▁un", "▁homme", "s", "▁vert", "▁la", "▁le", "▁chien"]
    pieces.write_text("".join(f"{token}\n" for token in tokens))
    with pytest.raises(ConfigError, match="expected words, got the pieces of a subword model"):
        UnknownWordCount(UnknownWordCount.Config(vocab=str(pieces)))
    assert unknown_word_list(MODELS / "rnnsearch") == {"vocab": str(MODELS / "rnnsearch" / "vocab.trg.txt")}
    config = tmp_path / "subwords.yaml"
    target = tmp_path / "train.fr"
    target.write_text("un homme vert\n")
    config.write_text(yaml.safe_dump({"model": {"subwords": {"type": "bpe", "vocab_size": 300}},
                                      "data": {"train": {"source": str(target), "target": str(target)},
                                               "trg_vocab_size": 500}}))
    assert unknown_word_list(config) == {"corpus": str(target), "shortlist": 500}


# ------------------------------------------------------------------------------------------------ models

def word_model(directory: Path, tokens: list[str] | None = None) -> Path:
    torch.manual_seed(0)
    model = tiny_model(tiny_config())
    src = Vocabulary([*SPECIALS, *(f"w{i}" for i in range(26))])
    trg = Vocabulary([*SPECIALS, *(tokens or [f"v{i}" for i in range(21)])])
    return save_model_dir(directory, model, src, trg)


def test_a_model_of_pieces_without_its_subword_settings_is_refused(tmp_path: Path) -> None:
    directory = word_model(tmp_path / "m", [f"▁p{i}" for i in range(21)])
    with pytest.raises(RerankError, match="model.subwords: expected the subword settings of the model"):
        load_model(directory)


def kept_checkpoints(directory: Path, poisoned: bool = False) -> Path:
    """A model directory with two kept checkpoints and the checkpoint.pt that names them."""
    word_model(directory)
    weights = torch.load(directory / WEIGHTS, weights_only=True)["model"]
    for updates in (1, 2):
        state = {name: value + updates for name, value in weights.items()}
        if poisoned and updates == 2:
            state = {name: torch.full_like(value, float("nan")) for name, value in weights.items()}
        checkpoint_path(directory, updates).parent.mkdir(exist_ok=True)
        save_state({"model": state}, checkpoint_path(directory, updates))
    history = [{"updates": 1.0, "valid_ppl": 3.0}, {"updates": 2.0, "valid_ppl": 2.0}]
    save_state({"progress": {"history": history}}, directory / CHECKPOINT)
    return directory


def test_average_refuses_nan_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = kept_checkpoints(tmp_path / "m", poisoned=True)
    assert main(["-q", "average", str(source), str(tmp_path / "avg"), "--last", "2"]) == 2
    assert "has a NaN or an infinity in" in capsys.readouterr().err
    assert not (tmp_path / "avg").exists() and [p.name for p in tmp_path.iterdir()] == ["m"]


def test_average_writes_a_new_model_and_never_into_another_run_or_its_source(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]
                                                                            ) -> None:
    source = kept_checkpoints(tmp_path / "m")
    other = kept_checkpoints(tmp_path / "other")
    before = (other / WEIGHTS).read_bytes()
    assert main(["-q", "average", str(source), str(other), "--last", "2"]) == 2
    assert "the directory holds another run's files" in capsys.readouterr().err
    assert (other / WEIGHTS).read_bytes() == before
    os.symlink(source, tmp_path / "again")
    weights = (source / WEIGHTS).read_bytes()
    assert main(["-q", "average", str(source), str(tmp_path / "again"), "--last", "2"]) == 2
    assert "it is also an input" in capsys.readouterr().err and (source / WEIGHTS).read_bytes() == weights
    (tmp_path / "file").write_text("x")
    assert main(["-q", "average", str(source), str(tmp_path / "file"), "--last", "2"]) == 2
    assert "it is a file, not a directory" in capsys.readouterr().err
    assert main(["-q", "average", str(source), str(tmp_path / "avg"), "--last", "2"]) == 0
    assert main(["-q", "average", str(source), str(tmp_path / "avg"), "--best", "1"]) == 0  # an average: replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "avg", "file", "m", "other"]


def test_average_refuses_its_source_through_a_bind_mount(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = kept_checkpoints(tmp_path / "m")
    mount = tmp_path / "mount"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True,
                                           check=False).returncode != 0:
        pytest.skip("bind mounts need root and a kernel that allows them here")
    try:
        weights = (source / WEIGHTS).read_bytes()
        assert main(["-q", "average", str(source), str(mount), "--last", "2"]) == 2
        assert "it is also an input" in capsys.readouterr().err and (source / WEIGHTS).read_bytes() == weights
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_checkpoint_history_without_its_keys_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = kept_checkpoints(tmp_path / "m")
    save_state({"progress": {"history": [{"updates": 1.0}]}}, source / CHECKPOINT)
    assert main(["-q", "average", str(source), str(tmp_path / "avg"), "--best", "1"]) == 2
    assert "progress.history[0]: expected updates (an integer) and valid_ppl (a number)" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ shards, YAML

def test_a_shard_count_beyond_reason_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=f"N at most {MAX_SHARDS:,}"):
        Shard.parse(f"1/{MAX_SHARDS + 1}")
    part = tmp_path / "part"
    part.write_text("x\n")
    manifest = {"command": "translate", "kind": "translations", "shard": "1/100000000000",
                "input": {"path": "in", "size": 2, "sha256": "0"}, "settings": {},
                "range": {"start": 0, "end": 2, "lines": 1, "first_line": 1, "to_end": False},
                "output": {"bytes": 2, "sha256": "0"}}
    (tmp_path / "part.shard.yaml").write_text(yaml.safe_dump(manifest))
    started = time.monotonic()
    assert main(["merge-shards", str(part), "-o", str(tmp_path / "all")]) == 2
    assert time.monotonic() - started < 10
    assert "shard: I/N with 1 <= I <= N <= 100,000, got '1/100000000000'" in capsys.readouterr().err


def test_yaml_aliases_are_bounded_in_bytes_and_messages_in_length(tmp_path: Path) -> None:
    big = "x" * (ALIAS_BYTES // 8)
    path = tmp_path / "aliases.yaml"
    path.write_text(f"a: &big {big}\nb: [{', '.join(['*big'] * 10)}]\n")
    with pytest.raises(ConfigError, match="repeat more than 10,000 values or 1,048,576 bytes"):
        load_yaml(path)
    path.write_text(f"batch_sentences: {'y' * 1_000_000}\n")
    with pytest.raises(ConfigError) as error:
        load_config(RescoreConfig, path)
    assert len(str(error.value)) < 300 and "expected an integer" in str(error.value)


# ------------------------------------------------------------------------------------------------ templates

@pytest.mark.parametrize("text", ["sh <<EOF\nmoses -n {nbest}\nEOF", "sh <<'END'\necho {nbest}\nEND",
                                  "cat <<-EOF | sh\n\tmoses {nbest}\n\tEOF"])
def test_a_placeholder_in_a_here_document_is_refused(text: str) -> None:
    with pytest.raises(RerankError, match="is in the body of a here-document"):
        Template(text, "--decoder", ("nbest",))


def test_a_here_document_without_placeholders_and_one_after_its_end_pass() -> None:
    template = Template("sh <<EOF\necho it's \"$HOME\"\nEOF\nmoses -n {nbest}", "--decoder", ("nbest",))
    assert template.render({"nbest": "a b"}).endswith("EOF\nmoses -n 'a b'")


def test_a_submitted_script_must_read_the_same_to_a_second_shell(tmp_path: Path) -> None:
    check_submitted_path(tmp_path / "run1.part1.sh")
    with pytest.raises(RerankError, match="characters a second shell would read"):
        check_submitted_path(tmp_path / "$(touch pwned)" / "run1.part1.sh")


# ------------------------------------------------------------------------------------------------ prepared data

@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prepared") / "data"
    prepare_parallel(DATA / "toy.en", DATA / "toy.fr", out, PrepareSettings(src_vocab_size=40, trg_vocab_size=30))
    return out


def tampered(prepared: Path, tmp_path: Path, change: dict[str, object], checksum: bool = True) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(prepared, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest.update(change)
    if checksum:
        manifest["checksum"] = manifest_checksum(manifest)
    (copy / MANIFEST).write_text(json.dumps(manifest))
    return copy


def test_an_edited_manifest_is_refused(prepared: Path, tmp_path: Path) -> None:
    settings = {**json.loads((prepared / MANIFEST).read_text())["settings"], "trg_vocab_size": 9000}
    with pytest.raises(RerankError, match="does not match its checksum"):
        PreparedCorpus(tampered(prepared, tmp_path, {"settings": settings}, checksum=False))


@pytest.mark.parametrize(("change", "message"), [
    ({"settings": "all"}, "settings: expected a mapping, got 'all'"),
    ({"dtypes": {"src": "<f8", "trg": "<u2"}}, "dtypes.src: expected one of <u2, <u4, got '<f8'"),
    ({"vocabularies": {"src": {"file": None, "bytes": 1, "sha256": "0" * 64}}}, "vocabularies.src.file: expected"),
    ({"pairs": "many"}, "pairs: expected a count"),
    ({"shards": [{"pairs": 1}]}, "shards[0].src: expected a file record"),
])
def test_a_manifest_of_the_wrong_shape_is_one_error(change: dict[str, object], message: str, prepared: Path,
                                                   tmp_path: Path) -> None:
    with pytest.raises(RerankError) as error:
        PreparedCorpus(tampered(prepared, tmp_path, change))
    assert f"{MANIFEST}: {message}" in str(error.value)


def test_a_config_that_disagrees_with_its_prepared_data_is_refused(prepared: Path) -> None:
    manifest = PreparedCorpus(prepared).manifest
    data = DataConfig(valid=None, prepared=str(prepared), src_vocab_size=40, trg_vocab_size=30)  # type: ignore[arg-type]
    check_prepared_settings(manifest, data, prepared)
    for key, value in (("src_vocab_size", 15000), ("max_length", 80)):
        with pytest.raises(RerankError, match=f"data.{key}: expected"):
            check_prepared_settings(manifest, dataclasses.replace(data, **{key: value}), prepared)


def test_the_cli_says_it_for_a_tampered_manifest(prepared: Path, tmp_path: Path) -> None:
    copy = tampered(prepared, tmp_path, {"settings": "all"})
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4},
        "data": {"prepared": str(copy), "valid": {"source": str(DATA / "toy.en"), "target": str(DATA / "toy.fr")}},
        "output_dir": str(tmp_path / "model")}))
    result = subprocess.run([sys.executable, "-m", "rerank", "train", "--config", str(config)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "settings: expected a mapping" in result.stderr


def test_a_subword_vocabulary_below_the_smallest_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    argv = ["prepare", str(DATA / "toy.en"), str(DATA / "toy.fr"), "-o", str(tmp_path / "p"), "--subwords", "bpe",
            "--subword-vocab-size", "299"]
    assert main(argv) == 2
    assert "--subword-vocab-size: vocab_size: expected an integer of at least 300, got 299" in capsys.readouterr().err


def test_a_model_to_fine_tune_is_checked_before_the_data_are_prepared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--init-from: a CSLM config (nothing to start from) and a directory that holds no model are refused, the
    model directory left without prepared data."""
    cslm = REPO / "configs" / "training" / "cslm.yaml"
    assert main(["train", "--config", str(cslm), "--init-from", str(tmp_path)]) == 2
    assert "--init-from: " in capsys.readouterr().err
    config = REPO / "configs" / "training" / "sample" / "rnnsearch.yaml"
    argv = ["train", "--config", str(config), "--init-from", str(tmp_path / "none"),
            "--output-dir", str(tmp_path / "m")]
    assert main(argv) == 2
    assert str(tmp_path / "none") in capsys.readouterr().err
    assert not (tmp_path / "m" / "data").exists()


def test_an_empty_validation_set_is_refused_before_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4},
        "data": {"train": {"source": str(DATA / "toy.en"), "target": str(DATA / "toy.fr")},
                 "valid": {"source": str(empty), "target": str(empty)}},
        "training": {"max_updates": 10, "valid_every": 5, "threads": 1},
        "output_dir": str(tmp_path / "model")}))
    assert main(["-q", "train", "--config", str(config)]) == 2
    assert f"{empty}: expected validation sentences (data.valid), got an empty file" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["score-nbest", "score-table", "translate"])
def test_a_shard_manifest_records_every_option_but_those_declared_not_to_change_the_output(command: str) -> None:
    from rerank.cli import build_parser
    from rerank.formats.shards import PLUMBING, shard_settings

    argv = {"score-nbest": ["score-nbest", "L", "--word-penalty", "-o", "out"],
            "score-table": ["score-table", "T", "--model", "M", "-o", "out"],
            "translate": ["translate", "--model", "M", "-i", "S", "-o", "out"]}[command]
    args = build_parser().parse_args([*argv, "--shard", "1/2"])
    settings = shard_settings(args)
    declared = {args.shard_input, *args.outputs, *args.shard_same_output}
    assert set(settings) == set(vars(args)) - PLUMBING - declared
    assert "threads" not in settings and "device" in settings
    args.new_option = "x"  # an option a command gains is recorded without a word
    assert shard_settings(args)["new_option"] == "x"
