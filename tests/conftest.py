"""Shared fixtures: small slices of the real data (in tests/data, see its README), the full real data
beside the repository for the few tests that need whole files, and one torch thread for every test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import TINY_LM_TEXT, write_arpa

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TEST_DATA = REPO / "tests" / "data"


@pytest.fixture(scope="session", autouse=True)
def single_thread() -> Iterator[None]:
    """Torch runs on one thread in every test (tiny tensors only lose time to thread hand-offs on a busy
    machine); the previous count comes back after the session."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _real(path: Path, what: str) -> Path:
    """``path`` under shared/data; the test skips, naming it, where it is absent."""
    if not path.exists():
        pytest.skip(f"{path} not found: this test needs {what}")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``shared/data`` beside the repository (the real Moses and Multi30k files); skips when absent."""
    return _real(SHARED_DATA, "the real data (Moses regression files, Multi30k)")


@pytest.fixture(scope="session")
def regression() -> Path:
    """The full Moses regression-test data; skips when absent."""
    return _real(SHARED_DATA / "moses-regression-tests", "the whole Moses regression-test files")


@pytest.fixture(scope="session")
def multi30k_moses() -> Path:
    """The full Moses en-fr system on Multi30k (model, 18 MB LM, whole n-best lists); skips when absent."""
    return _real(SHARED_DATA / "moses-multi30k", "the whole Multi30k Moses system")


@pytest.fixture(scope="session")
def test_data() -> Path:
    """Small fixtures, hand-written or cut from the real data."""
    return TEST_DATA


@pytest.fixture(scope="session")
def regression_slice() -> Path:
    """Slices of the Moses regression-test data, in its layout (``tests/...``, ``models/...``)."""
    return TEST_DATA / "moses-regression-tests"


@pytest.fixture(scope="session")
def multi30k_slice() -> dict[str, Path]:
    """The first 20 sentences of Multi30k test_2016_flickr and val with the Moses system's outputs:
    ``nbest`` (the 100-best list, gzipped), ``source``, ``reference`` and ``onebest`` (Moses' 1-best) of
    test; ``val_nbest``, ``val_source`` and ``val_reference``; the system's ``moses_ini``, the first 300
    lines of its ``phrase_table``, and ``lm``: the sample's 4-gram LM (examples/data), which scores
    these hypotheses exactly as the full model does."""
    data = TEST_DATA / "multi30k"
    return {"nbest": data / "test.100best.gz", "source": data / "test.en", "reference": data / "test.fr",
            "onebest": data / "test.1best", "val_nbest": data / "val.100best.gz", "val_source": data / "val.en",
            "val_reference": data / "val.fr", "moses_ini": data / "moses.ini",
            "phrase_table": data / "phrase-table.gz", "lm": REPO / "examples" / "data" / "lm.fr.4.sample.arpa.gz"}


@pytest.fixture(scope="session")
def arpa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trigram ARPA model of ``TINY_LM_TEXT``, normalised by construction (see ``write_arpa``)."""
    path = tmp_path_factory.mktemp("lm") / "tiny.arpa"
    write_arpa(path, TINY_LM_TEXT)
    return path


@pytest.fixture(scope="session")
def slice_table_model(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of a small random RNNsearch whose vocabularies are the 150 most frequent words of each side of
    the slice's phrase table."""
    from tiny_models import save_model_dir, tiny_config, tiny_model

    from rerank.formats.phrase_table import read_phrase_table
    from rerank.models.vocab import Vocabulary

    entries = list(read_phrase_table(multi30k_slice["phrase_table"]))
    src_vocab = Vocabulary.build((e.source.split() for e in entries), 150)
    trg_vocab = Vocabulary.build((e.target.split() for e in entries), 150)
    model = tiny_model(tiny_config("rnnsearch"), len(src_vocab), len(trg_vocab), dtype=torch.float32)
    return save_model_dir(tmp_path_factory.mktemp("model") / "rnnsearch", model, src_vocab, trg_vocab)


@pytest.fixture(scope="session")
def pretrained_models(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random Marian models as OPUS-MT ships them (``tiny_marian``), their SentencePiece model trained on the
    slice's sources and references: ``hf`` (en-fr), ``hf_reverse`` (fr-en, for the channel), and ``ct2`` and
    ``ct2_reverse``, the two converted for CTranslate2 with their tokenizers' files. Skips without the extras."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("ctranslate2", reason="the ctranslate2 extra is not installed")
    from tiny_models import ctranslate2_conversion, tiny_marian

    lines = [line for key in ("source", "reference", "val_source", "val_reference")
             for line in multi30k_slice[key].read_text(encoding="utf-8").splitlines()]
    root = tmp_path_factory.mktemp("pretrained")
    models = {"hf": tiny_marian(root / "hf", lines), "hf_reverse": tiny_marian(root / "hf-reverse", lines, seed=1)}
    models["ct2"] = ctranslate2_conversion(models["hf"], root / "ct2")
    models["ct2_reverse"] = ctranslate2_conversion(models["hf_reverse"], root / "ct2-reverse")
    return models
