"""Shared fixtures: the real data next to the repository, small slices of it, and one torch thread for
every test."""

from __future__ import annotations

import gzip
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import head

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session", autouse=True)
def single_thread() -> Iterator[None]:
    """Torch runs on one thread in every test (tiny tensors only lose time to thread hand-offs on a busy
    machine); the previous count comes back after the session."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``shared/data`` beside the repository (the real Moses and Multi30k files); skips when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (Moses regression files, Multi30k)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def regression(shared_data: Path) -> Path:
    """The Moses regression-test data."""
    return shared_data / "moses-regression-tests"


@pytest.fixture(scope="session")
def multi30k_moses(shared_data: Path) -> Path:
    """The Moses en-fr system on Multi30k: model, LM, n-best lists."""
    return shared_data / "moses-multi30k"


@pytest.fixture(scope="session")
def test_data() -> Path:
    """Small hand-written fixtures."""
    return TEST_DATA


@pytest.fixture(scope="session")
def multi30k_slice(multi30k_moses: Path, shared_data: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The first 20 sentences of test_2016_flickr: 100-best list (gzipped), source, reference, Moses' 1-best."""
    sentences = 20
    directory = tmp_path_factory.mktemp("multi30k_slice")
    nbest = directory / "test.100best.gz"
    with gzip.open(multi30k_moses / "nbest" / "test_2016_flickr.100best.gz", "rb") as f, gzip.open(nbest, "wb") as out:
        out.writelines(itertools.takewhile(lambda line: int(line.split(b"|||")[0]) < sentences, f))
    tok = shared_data / "multi30k" / "tok"
    files = {"nbest": nbest,
             "source": head(tok / "test_2016_flickr.lc.norm.tok.en", sentences, directory / "test.en"),
             "reference": head(tok / "test_2016_flickr.lc.norm.tok.fr", sentences, directory / "test.fr"),
             "onebest": head(multi30k_moses / "nbest" / "test_2016_flickr.1best", sentences, directory / "test.1best")}
    return files
