"""Property-based tests of every reader: any bytes in give a result or one clean error (a RerankError, which the
CLI prints as one line with exit status 2), never another exception; and a command given any bytes leaves
either its whole output or none.

The inputs are random bytes and random lines built from each format's own pieces (separators, labels,
numbers, NaN, brackets, YAML syntax), so that the examples reach past the first line's checks. The runs are
derandomized (the same examples every time) and small: a few seconds per reader.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.cli import main
from rerank.config import load_config, load_yaml
from rerank.errors import RerankError
from rerank.formats.arpa import check_language_model, read_arpa_structure
from rerank.formats.dictionaries import read_dictionary
from rerank.formats.moses_ini import MosesIni
from rerank.formats.nbest import read_nbest
from rerank.formats.phrase_table import read_phrase_table
from rerank.formats.scored import difference, read_record
from rerank.formats.shards import ShardOutput
from rerank.formats.weights import load_weights
from rerank.rescore.append import RescoreConfig
from rerank.study.config import load_experiment
from rerank.training.config import TrainConfig
from rerank.tune.config import TuneConfig

FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

NUMBERS = st.sampled_from(["0", "-1.5", "3e2", "nan", "inf", "-inf", "1e999", "0x10", "", "-", "1,5", "٣"])
WORDS = st.sampled_from(["a", "b", "LM0=", "d=", "tm=", "|||", "||", "=", " ", "\t", "é", "\x00", "\r", "[weight]",
                         "[feature]", "KENLM", "path=", "name=LM0", "\\data\\", "ngram", "1=", "\\1-grams:", "\\end\\",
                         ":", "-", "{", "}", "[", "]", "&a", "*a", "<<", "!!python/object", "'", '"', "#", "0", "1"])
TOKEN = st.one_of(WORDS, NUMBERS)


def lines_of(token: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    line = st.lists(token, max_size=12).map(" ".join)
    return st.lists(line, max_size=12).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass"))


def nbest_lines() -> st.SearchStrategy[bytes]:
    feature = st.tuples(st.sampled_from(["LM0=", "d=", "tm=", "W0=", "x_y="]), st.lists(NUMBERS, max_size=3)).map(
        lambda pair: " ".join([pair[0], *pair[1]]))
    line = st.tuples(st.sampled_from(["0", "1", "2", "-1", "x", " 0"]), st.lists(WORDS, max_size=4).map(" ".join),
                     st.lists(feature, max_size=3).map(" ".join), NUMBERS).map(lambda f: " ||| ".join(f))
    return st.lists(line, max_size=8).map(lambda ls: "\n".join(ls).encode())


def table_lines() -> st.SearchStrategy[bytes]:
    line = st.tuples(st.lists(WORDS, max_size=3).map(" ".join), st.lists(WORDS, max_size=3).map(" ".join),
                     st.lists(NUMBERS, max_size=4).map(" ".join), st.sampled_from(["", "0-0", "0-0 1-1", "x"]),
                     st.sampled_from(["", "1 1 1", "a"])).map(lambda f: " ||| ".join(f))
    return st.lists(line, max_size=8).map(lambda ls: "\n".join(ls).encode())


def arpa_texts() -> st.SearchStrategy[bytes]:
    gram = st.tuples(NUMBERS, st.lists(WORDS, min_size=1, max_size=2).map(" ".join), NUMBERS).map("\t".join)
    body = st.tuples(st.integers(0, 3), st.integers(0, 3), st.lists(gram, max_size=4), st.lists(gram, max_size=4))
    return body.map(lambda b: (f"\\data\\\nngram 1={b[0]}\nngram 2={b[1]}\n\n\\1-grams:\n" + "\n".join(b[2])
                               + "\n\n\\2-grams:\n" + "\n".join(b[3]) + "\n\n\\end\\\n").encode())


def any_bytes(structured: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=200), structured, structured.map(gzip.compress),
                     structured.map(lambda b: gzip.compress(b)[: max(1, len(gzip.compress(b)) // 2)]))


@contextlib.contextmanager
def written(data: bytes, name: str = "input") -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / name
        path.write_bytes(data)
        yield path


def result_or_clean_error(read: Callable[[Path], Any], data: bytes, name: str = "input") -> None:
    with written(data, name) as path:
        try:
            read(path)
        except RerankError as e:
            assert str(e).strip() and "\n" not in str(e).strip().splitlines()[0]


@FUZZ
@given(any_bytes(nbest_lines()))
def test_nbest_lists(data: bytes) -> None:
    result_or_clean_error(lambda p: list(read_nbest(p)), data)


@FUZZ
@given(any_bytes(table_lines()))
def test_phrase_tables(data: bytes) -> None:
    result_or_clean_error(lambda p: list(read_phrase_table(p)), data)


@FUZZ
@given(any_bytes(lines_of(TOKEN)))
def test_moses_ini(data: bytes) -> None:
    def read(path: Path) -> None:
        ini = MosesIni.read(path)
        ini.features()
        ini.weights()
    result_or_clean_error(read, data)


@FUZZ
@given(any_bytes(lines_of(TOKEN)))
def test_weights_yaml_or_moses_ini(data: bytes) -> None:
    result_or_clean_error(load_weights, data, "weights.yaml")


@FUZZ
@given(any_bytes(arpa_texts()))
def test_arpa_files(data: bytes) -> None:
    result_or_clean_error(read_arpa_structure, data, "lm.arpa")


@FUZZ
@given(any_bytes(arpa_texts()))
def test_language_model_checks(data: bytes) -> None:
    result_or_clean_error(check_language_model, data, "lm.arpa")


@FUZZ
@given(any_bytes(lines_of(TOKEN)))
def test_dictionaries(data: bytes) -> None:
    result_or_clean_error(read_dictionary, data)


def yaml_texts() -> st.SearchStrategy[bytes]:
    keys = st.sampled_from(["loop", "mert", "bleu", "seed", "features", "kind", "batch_sentences", "output_dir",
                            "model", "training", "tokenize", "restarts", "min_change", "x"])
    scalars = st.one_of(NUMBERS, st.sampled_from(["true", "null", "[1, 2]", "{a: 1}", "&a 1", "*a", "~", "'s'",
                                                  "[kind: word-penalty]", ".nan", ".inf", "-.inf"]))
    line = st.tuples(st.sampled_from(["", "  ", "- ", "    "]), keys, scalars).map(lambda t: f"{t[0]}{t[1]}: {t[2]}")
    return st.lists(line, max_size=10).map(lambda ls: "\n".join(ls).encode())


@FUZZ
@given(any_bytes(yaml_texts()))
def test_configs(data: bytes) -> None:
    for cls in (TuneConfig, RescoreConfig, TrainConfig):
        result_or_clean_error(lambda p, cls=cls: load_config(cls, p), data, "config.yaml")
    result_or_clean_error(load_yaml, data, "config.yaml")
    result_or_clean_error(load_experiment, data, "experiment.yaml")


def manifest_texts() -> st.SearchStrategy[bytes]:
    value = st.one_of(NUMBERS, st.sampled_from(["1/2", "2/2", "0/0", "score-table", "true", "null", "[]", "{}"]))
    keys = st.sampled_from(["command", "kind", "shard", "input", "range", "output", "settings", "path", "size",
                            "sha256", "start", "end", "lines", "first_line", "to_end", "bytes"])
    line = st.tuples(st.sampled_from(["", "  "]), keys, value).map(lambda t: f"{t[0]}{t[1]}: {t[2]}")
    return st.lists(line, max_size=16).map(lambda ls: "\n".join(ls).encode())


def record_texts() -> st.SearchStrategy[bytes]:
    value = st.one_of(NUMBERS, st.sampled_from(["kenlm", "true", "null", "[]", "{}", "{file: a, sha256: b}",
                                                "[{sha256: null}]", "'x'"]))
    keys = st.sampled_from(["nbest", "sha256", "features", "LM1", "kind", "path", "file", "source", "oov"])
    line = st.tuples(st.sampled_from(["", "  ", "    "]), keys, value).map(lambda t: f"{t[0]}{t[1]}: {t[2]}")
    return st.lists(line, max_size=12).map(lambda ls: "\n".join(ls).encode())


@FUZZ
@given(any_bytes(record_texts()))
def test_scored_list_records(data: bytes) -> None:
    def read(path: Path) -> None:
        record = read_record(path.with_name("scored"))
        if record is not None:
            for entry in record.features.values():
                difference(entry, {"kind": "kenlm", "path": {"file": "lm", "sha256": "0" * 64}})
    result_or_clean_error(read, data, "scored.features.yaml")


@FUZZ
@given(any_bytes(manifest_texts()))
def test_shard_manifests(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "part"
        output.write_bytes(b"0 ||| a ||| d= 0 ||| 0\n")
        Path(directory, "part.shard.yaml").write_bytes(data)
        try:
            ShardOutput.read(output)
        except RerankError:
            pass


@FUZZ
@given(any_bytes(nbest_lines()))
def test_a_command_leaves_its_whole_output_or_none(data: bytes) -> None:
    with written(data, "in.nbest") as path:
        out = path.with_name("out.1best")
        with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
            code = main(["-q", "apply", str(path), "--weight", "LM0=1", "--missing-weight", "0.5", "-o", str(out)])
        assert code in (0, 2)
        assert out.exists() == (code == 0)
        assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
