"""Fixtures shared by the training tests: a prepared corpus big enough for several pools of token batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.training.prepare import PrepareSettings, prepare_parallel
from rerank.training.prepared import PreparedCorpus


@pytest.fixture(scope="module")
def token_corpus(tmp_path_factory: pytest.TempPathFactory, test_data: Path) -> PreparedCorpus:
    """A prepared corpus of 800 pairs: the Multi30k slices' 40, 20 times, in 8 shards."""
    directory = tmp_path_factory.mktemp("corpus")
    paths = []
    for language in ("en", "fr"):
        lines = [line for part in ("val", "test") for line in
                 (test_data / "multi30k" / f"{part}.{language}").read_text().splitlines()] * 20
        paths.append(directory / f"train.{language}")
        paths[-1].write_text("\n".join(lines) + "\n")
    prepare_parallel(paths[0], paths[1], directory / "prepared", PrepareSettings(shard_pairs=100))
    return PreparedCorpus(directory / "prepared")
