"""Property-based tests of the structured readers (prepared manifests, checkpoint histories, experiment configs)
and of the output layer's path shapes: any value in gives a result or one RerankError, never another exception;
an output never replaces an input or a file a descriptor names."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.errors import RerankError
from rerank.formats.files import STDOUT_FD, check_outputs
from rerank.models.averaging import validation_history
from rerank.models.checkpoint import save_state
from rerank.study.checks import check_experiment
from rerank.study.config import load_experiment
from rerank.training.prepare import MANIFEST, PrepareSettings, manifest_checksum, prepare_parallel
from rerank.training.prepared import PreparedCorpus

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=True),
                    st.sampled_from(["", "a", "../x", "/etc/passwd", "shard-00000.src", "<u2", "<f8", "0" * 64]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(
                                                           ["file", "bytes", "sha256", "src", "trg", "idx", "pairs",
                                                            "updates", "valid_ppl", "history", "x"]), inner,
                                                           max_size=3)), max_leaves=8)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fuzz") / "data"
    prepare_parallel(DATA / "toy.en", DATA / "toy.fr", out, PrepareSettings(src_vocab_size=40, trg_vocab_size=30))
    return out


def _paths(manifest: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place (a path of keys and indices) in a manifest."""
    places = [prefix]
    if isinstance(manifest, dict):
        for key, value in manifest.items():
            places += _paths(value, (*prefix, key))
    elif isinstance(manifest, list):
        for i, value in enumerate(manifest):
            places += _paths(value, (*prefix, i))
    return places


@FUZZ
@given(data=st.data())
def test_any_value_anywhere_in_a_prepared_manifest_reads_or_is_one_error(prepared: Path, data: st.DataObject) -> None:
    manifest = json.loads((prepared / MANIFEST).read_text())
    places = [place for place in _paths(manifest) if place and place[0] != "checksum"]
    place = data.draw(st.sampled_from(places))
    value = data.draw(VALUES)
    target: Any = manifest
    for key in place[:-1]:
        target = target[key]
    if data.draw(st.booleans()):
        target[place[-1]] = value
    elif isinstance(target, dict):
        del target[place[-1]]
    manifest["checksum"] = manifest_checksum(manifest)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "data"
        shutil.copytree(prepared, copy)
        (copy / MANIFEST).write_text(json.dumps(manifest))
        try:
            PreparedCorpus(copy)
        except RerankError as e:
            assert str(e).count("\n") == 0 and len(str(e)) < 1000


@FUZZ
@given(history=VALUES)
def test_any_checkpoint_history_reads_or_is_one_error(history: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoint.pt"
        save_state({"progress": {"history": history}}, path)
        try:
            result = validation_history(path)
        except RerankError as e:
            assert str(e).startswith(str(path)) and len(str(e)) < 1000
        else:
            assert all(isinstance(u, int) and isinstance(p, float) for u, p in result.items())


EXPERIMENT_KEYS = ["encdec", "rnnsearch", "right_to_left", "channel", "cslm", "beam", "nbest", "buckets",
                   "moses.ini", "moses.language_model", "dev.source", "dev.reference", "test.nbest", "seeds",
                   "decoder_tuning", "list_sizes", "threads"]


@FUZZ
@given(key=st.sampled_from(EXPERIMENT_KEYS), value=st.one_of(VALUES, st.sampled_from(
    [str(DATA), str(DATA / "toy.en"), str(REPO / "examples" / "models" / "encdec"), "abc", "10", "quintiles"])))
def test_any_value_of_an_experiment_key_is_checked_or_one_error(key: str, value: Any) -> None:
    config = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text())
    for section in ("moses", "dev", "test"):
        config[section] = {k: str(REPO / v) for k, v in config[section].items()}
    for name in ("encdec", "rnnsearch"):
        config[name] = str(REPO / config[name])
    *parents, last = key.split(".")
    section = config
    for parent in parents:
        section = section[parent]
    section[last] = value
    with tempfile.TemporaryDirectory() as tmp:
        config["output_dir"] = str(Path(tmp) / "run")
        path = Path(tmp) / "experiment.yaml"
        path.write_text(yaml.safe_dump(config))
        try:
            check_experiment(load_experiment(path), str(path))
        except RerankError as e:
            assert str(path) in str(e) and str(e).count("\n") == 0


# ------------------------------------------------------------------------------------------------ output paths

PIECES = st.sampled_from(["input", "output", "link-to-input", "hard-link", "link-to-fd1", "link-to-fd-link",
                          "dir", "dir/../input", "./output", "link-to-proc-1", "new/../output"])


@FUZZ
@given(shapes=st.lists(PIECES, min_size=1, max_size=3))
def test_output_path_shapes_never_replace_an_input(shapes: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "input").write_text("INPUT\n")
        (root / "dir").mkdir()
        (root / "new").mkdir()
        os.symlink(root / "input", root / "link-to-input")
        os.link(root / "input", root / "hard-link")
        os.symlink("/proc/self/fd/1", root / "link-to-fd1")
        os.symlink(root / "link-to-fd1", root / "link-to-fd-link")
        os.symlink("/proc/1/fd/1", root / "link-to-proc-1")
        outputs = [(f"--out{i}", str(root / shape)) for i, shape in enumerate(shapes)]
        try:
            checked = check_outputs(outputs, [str(root / "input")])
        except RerankError as e:
            assert str(e).count("\n") == 0
            return
        input_identity = (os.stat(root / "input").st_dev, os.stat(root / "input").st_ino)
        for output in checked:
            assert output.identity != input_identity
            if "fd" in os.path.relpath(output.path, root):  # the shape, not the temporary directory's random name
                assert output.stream and output.descriptor == STDOUT_FD
        assert sum(output.to_stdout for output in checked) <= 1
