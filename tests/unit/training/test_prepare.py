"""Prepared training data: the pass gives the vocabularies and batches the in-memory reading gave, the
epoch's pools cover every pair once, and bad input (files of different lengths, an empty corpus,
shards truncated or changed, a manifest that does not match, a vocabulary not the model's, a write
that fails) is one clear error with exit status 2 and nothing half-written left to trust."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import assert_resumes_mid_epoch

from rerank.cli import main
from rerank.formats.phrase_table import read_phrase_table
from rerank.models.batching import to_ids
from rerank.models.vocab import Vocabulary
from rerank.training.data import bucketed_order, make_batch, read_parallel
from rerank.training.prepare import (
    MANIFEST,
    PrepareSettings,
    manifest_checksum,
    prepare_parallel,
    prepare_phrase_table,
)
from rerank.training.prepared import EpochPlan, PreparedCorpus

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def corpus(tmp_path: Path, test_data: Path) -> tuple[Path, Path]:
    """1,000 pairs: the 40 of the Multi30k slices 25 times, shuffled (seeded), one made longer than 50 words."""
    sides = []
    for language in ("en", "fr"):
        lines = [line for part in ("val", "test") for line in
                 (test_data / "multi30k" / f"{part}.{language}").read_text().splitlines()]
        sides.append(lines * 25)
    order = np.random.default_rng(5).permutation(1000)
    sides = [[side[i] for i in order] for side in sides]
    sides[0][3] = " ".join(["long"] * 60)
    paths = tmp_path / "train.en", tmp_path / "train.fr"
    for path, side in zip(paths, sides, strict=True):
        path.write_text("\n".join(side) + "\n")
    return paths


def test_prepared_data_give_the_vocabularies_and_batches_of_the_text(tmp_path: Path,
                                                                      corpus: tuple[Path, Path]) -> None:
    settings = PrepareSettings(src_vocab_size=150, trg_vocab_size=170, max_length=50, shard_pairs=300)
    manifest = prepare_parallel(*corpus, tmp_path / "prepared", settings)
    text = read_parallel(*corpus)
    keep = [i for i, (s, t) in enumerate(zip(text.sources, text.targets, strict=True)) if len(s) <= 50 >= len(t)]
    assert manifest["lines"] == 1000 and manifest["pairs"] == len(keep) == 999 and manifest["skipped_longer"] == 1
    assert len(manifest["shards"]) == 4 and manifest["dtypes"] == {"src": "<u2", "trg": "<u2"}
    src_vocab = Vocabulary.build([text.sources[i] for i in keep], 150)
    trg_vocab = Vocabulary.build([text.targets[i] for i in keep], 170)
    assert len(src_vocab) == 154 and len(trg_vocab) == 174  # shortlists: some words are <unk>
    prepared = PreparedCorpus(tmp_path / "prepared")
    assert prepared.src_vocab.tokens == src_vocab.tokens and prepared.trg_vocab.tokens == trg_vocab.tokens
    src_ids = to_ids([text.sources[i] for i in keep], src_vocab)
    trg_ids = to_ids([text.targets[i][::-1] for i in keep], trg_vocab)
    lengths = np.array([len(s) + len(t) / 1000 for s, t in zip(src_ids, trg_ids, strict=True)])
    expected = bucketed_order(lengths, 16, 4, np.random.default_rng([9, 2]))
    plan = EpochPlan(prepared, 16, 4, 10_000, seed=9, epoch=2)
    assert len(plan) == len(expected)
    for b in (0, 7, len(plan) - 1):
        assert np.array_equal(plan[b], expected[b])
        batch, reference = prepared.batch(plan[b], reverse_target=True), make_batch(
            [src_ids[i] for i in expected[b]], [trg_ids[i] for i in expected[b]])
        for name in ("src", "src_len", "trg", "trg_len"):
            assert torch.equal(getattr(batch, name), getattr(reference, name)), name


def test_gzip_input_prepares_the_same_ids(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    zipped = []
    for path in corpus:
        zipped.append(tmp_path / f"{path.name}.gz")
        zipped[-1].write_bytes(gzip.compress(path.read_bytes()))
    plain = prepare_parallel(*corpus, tmp_path / "plain")
    packed = prepare_parallel(*zipped, tmp_path / "packed")
    assert [s["src"]["sha256"] for s in plain["shards"]] == [s["src"]["sha256"] for s in packed["shards"]]
    assert plain["vocabularies"] == packed["vocabularies"]


def test_pools_cover_every_pair_once_and_are_found_again(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    prepare_parallel(*corpus, tmp_path / "prepared", PrepareSettings(shard_pairs=100))
    prepared = PreparedCorpus(tmp_path / "prepared")
    plan = EpochPlan(prepared, 8, 5, 120, seed=3, epoch=1)  # blocks of 40 pairs, pools of 3 blocks
    assert len(plan.pools) == 9 and len(prepared.ids) == 10
    batches = [plan[b] for b in range(len(plan))]
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(prepared)))
    again = EpochPlan(prepared, 8, 5, 120, seed=3, epoch=1)
    for b in (len(plan) - 1, 0, 50):  # in any order, as a resumed run asks
        assert np.array_equal(again[b], batches[b])
    other_epoch = EpochPlan(prepared, 8, 5, 120, seed=3, epoch=2)
    assert not all(np.array_equal(other_epoch[b], batches[b]) for b in range(5))


def test_phrase_pairs_are_the_distinct_pairs_of_the_table(tmp_path: Path, test_data: Path) -> None:
    table = tmp_path / "table"
    lines = gzip.decompress((test_data / "multi30k" / "phrase-table.gz").read_bytes()).decode().splitlines()
    table.write_text("\n".join(lines + lines[100:200]) + "\n")  # repeated pairs count once
    manifest = prepare_phrase_table(table, tmp_path / "prepared", PrepareSettings(max_length=7))
    distinct = list(dict.fromkeys((e.source, e.target) for e in read_phrase_table(table)))
    assert manifest["lines"] == len(distinct) == 300
    prepared = PreparedCorpus(tmp_path / "prepared")
    vocab = prepared.trg_vocab
    batch = prepared.batch(np.arange(len(prepared))[-3:])
    assert [vocab.decode(row.tolist()) for row in batch.trg] == [t.split() for _, t in distinct[-3:]]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["-q", *args])
    return status, capsys.readouterr().err


def test_files_of_different_lengths_are_refused_at_the_line(tmp_path: Path, corpus: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "short.fr"
    short.write_text("".join(corpus[1].read_text().splitlines(keepends=True)[:900]))
    status, err = run_cli(["prepare", str(corpus[0]), str(short), "-o", str(tmp_path / "out")], capsys)
    assert status == 2
    assert f"{short}:901: expected as many lines as {corpus[0]} (1,000), got 'end of file'" in err
    assert list(tmp_path.glob("*out*")) == []


def test_an_empty_corpus_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    status, err = run_cli(["prepare", str(empty), str(empty), "-o", str(tmp_path / "out")], capsys)
    assert status == 2 and "no lines: nothing to train on" in err
    assert list(tmp_path.glob("*out*")) == []


def train_config(tmp_path: Path, test_data: Path, prepared: Path, output_dir: Path) -> Path:
    valid = {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}
    config = {
        "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4},
        "data": {"prepared": str(prepared), "valid": valid},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "max_updates": 2,
                     "valid_every": 2, "threads": 1},
        "output_dir": str(output_dir),
    }
    path = tmp_path / f"{output_dir.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("damage", ["truncated", "changed", "manifest"])
def test_damaged_prepared_data_are_refused_naming_the_file(tmp_path: Path, test_data: Path, corpus: tuple[Path, Path],
                                                           capsys: pytest.CaptureFixture[str], damage: str) -> None:
    prepared = tmp_path / "prepared"
    prepare_parallel(*corpus, prepared, PrepareSettings(shard_pairs=500))
    config = train_config(tmp_path, test_data, prepared, tmp_path / "model")
    shard = prepared / "shard-00001.trg"
    if damage == "truncated":
        shard.write_bytes(shard.read_bytes()[:-10])
        expected = f"{shard}: refused: expected {shard.stat().st_size + 10:,} bytes"
    elif damage == "changed":
        data = bytearray(shard.read_bytes())
        data[100] ^= 1
        shard.write_bytes(bytes(data))
        expected = f"{shard}: refused: expected the SHA-256 {MANIFEST} gives"
    else:
        manifest = json.loads((prepared / MANIFEST).read_text())
        manifest["shards"][0]["pairs"] += 1
        manifest["checksum"] = manifest_checksum(manifest)  # an edit its checksum does not catch: the index does
        (prepared / MANIFEST).write_text(json.dumps(manifest))
        expected = f"{prepared / 'shard-00000.idx'}: refused: expected offsets of"
    status, err = run_cli(["train", "--config", str(config)], capsys)
    assert status == 2
    assert expected in err and "prepare the data again" in err


def test_a_vocabulary_that_is_not_the_models_is_refused(tmp_path: Path, test_data: Path, corpus: tuple[Path, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    prepared, model = tmp_path / "prepared", tmp_path / "model"
    prepare_parallel(*corpus, prepared)
    config = train_config(tmp_path, test_data, prepared, model)
    assert run_cli(["train", "--config", str(config)], capsys)[0] == 0
    prepare_parallel(corpus[1], corpus[0], prepared, replace=True)  # prepared again, from other text
    config.write_text(config.read_text().replace("max_updates: 2", "max_updates: 4"))
    status, err = run_cli(["train", "--config", str(config)], capsys)
    assert status == 2
    assert f"{prepared / 'vocab.src.txt'}: refused: its vocabulary is not that of the model in {model}" in err


def test_a_write_that_fails_leaves_nothing_behind(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    """A file-size limit makes the writes fail as a full disk does (EFBIG in place of ENOSPC)."""
    script = ("import resource, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
              "from rerank.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-c", script, "-q", "prepare", *map(str, corpus), "-o", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"rerank: error: {out}: cannot write the prepared data")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("; nothing was kept\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.en", "train.fr"]


def test_an_existing_directory_is_not_overwritten(tmp_path: Path, corpus: tuple[Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    status, err = run_cli(["prepare", *map(str, corpus), "-o", str(tmp_path / "out")], capsys)
    assert status == 2 and "already exists" in err


def test_train_prepares_its_text_once_into_the_model_directory(tmp_path: Path, test_data: Path,
                                                               corpus: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = train_config(tmp_path, test_data, tmp_path / "unused", tmp_path / "model")
    data = yaml.safe_load(config.read_text())
    data["data"] = {"train": {"source": str(corpus[0]), "target": str(corpus[1])}, "valid": data["data"]["valid"]}
    config.write_text(yaml.safe_dump(data))
    assert run_cli(["train", "--config", str(config)], capsys)[0] == 0
    manifest = (tmp_path / "model" / "data" / MANIFEST).read_text()
    config.write_text(config.read_text().replace("max_updates: 2", "max_updates: 4"))
    capsys.readouterr()
    assert main(["train", "--config", str(config)]) == 0
    assert "prepared from the same files with the same settings" in capsys.readouterr().err
    assert (tmp_path / "model" / "data" / MANIFEST).read_text() == manifest


def test_a_run_stopped_mid_epoch_resumes_to_the_same_weights(tmp_path: Path, test_data: Path,
                                                             corpus: tuple[Path, Path]) -> None:
    """Pools of 96 pairs (blocks of 3 batches of 8, 4 blocks a pool, 11 pools an epoch): stopped at update 7, inside
    the first pool, the run goes on to update 30 (in the third pool) as one never stopped."""
    prepare_parallel(*corpus, tmp_path / "prepared", PrepareSettings(shard_pairs=250))

    def run(name: str, updates: int) -> Path:
        config = train_config(tmp_path, test_data, tmp_path / "prepared", tmp_path / name)
        data = yaml.safe_load(config.read_text())
        data["model"]["dropout"] = 0.3
        data["training"].update({"batch_size": 8, "bucket_window": 3, "pool_pairs": 96, "max_updates": updates,
                                 "valid_every": 7})
        config.write_text(yaml.safe_dump(data))
        assert main(["-q", "train", "--config", str(config)]) == 0
        return tmp_path / name / "checkpoint.pt"

    assert_resumes_mid_epoch(run)


def test_a_models_own_vocabularies_give_the_ids(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    """--vocabularies (a model to fine-tune): its shortlists, copied byte for byte, are the ids (other words
    <unk>); a subword model's pieces give the same shards as the pass that learnt them."""
    student = REPO / "examples" / "models" / "rnnsearch"
    assert main(["-q", "prepare", *map(str, corpus), "-o", str(tmp_path / "words"), "--vocabularies",
                 str(student), "--src-vocab-size", "10"]) == 0
    for name in ("vocab.src.txt", "vocab.trg.txt"):
        assert (tmp_path / "words" / name).read_bytes() == (student / name).read_bytes()
    prepared, vocab = PreparedCorpus(tmp_path / "words"), Vocabulary.load(student / "vocab.src.txt")
    first = read_parallel(*corpus).sources[0]
    assert prepared.batch(np.array([0]), False).src[0, :len(first) + 1].tolist() == list(to_ids([first], vocab)[0])

    assert main(["-q", "prepare", *map(str, corpus), "-o", str(tmp_path / "learnt"), "--subwords", "bpe",
                 "--subword-vocab-size", "300"]) == 0
    model = tmp_path / "model"
    model.mkdir()
    for name in ("vocab.src.txt", "vocab.trg.txt", "subwords.src.model", "subwords.trg.model"):
        (model / name).write_bytes((tmp_path / "learnt" / name).read_bytes())
    (model / "config.yaml").write_text(yaml.safe_dump({"model": {"architecture": "rnnsearch", "subwords": {
        "type": "bpe", "vocab_size": 300}}}), encoding="utf-8")
    assert main(["-q", "prepare", *map(str, corpus), "-o", str(tmp_path / "pieces"), "--vocabularies",
                 str(model)]) == 0
    learnt, again = (json.loads((tmp_path / name / MANIFEST).read_text()) for name in ("learnt", "pieces"))
    assert again["shards"] == learnt["shards"] and again["settings"]["subwords"] == learnt["settings"]["subwords"]
    assert main(["-q", "prepare", *map(str, corpus), "-o", str(tmp_path / "both"), "--vocabularies",
                 str(model), "--subwords", "bpe"]) == 2
