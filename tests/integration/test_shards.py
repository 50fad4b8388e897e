"""``--shard I/N`` of score-table, score-nbest and translate, and ``rerank merge-shards``: the merged shards are
the bytes of an unsharded run, for N = 3 and for N above the number of lines (empty shards); a missing,
foreign, stale or changed shard is refused, naming it."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats import shards
from rerank.formats.files import read_text
from rerank.models.vocab import Vocabulary
from rerank.search import translate


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gzip blocks of 512 compressed bytes, phrase-table segments of about 4 source phrases and translation
    blocks of 2 lines, so that the small test files fall into several shards."""
    monkeypatch.setattr(shards, "GZIP_BLOCK", 512)
    monkeypatch.setattr(shards, "TABLE_SEGMENT", 4)
    monkeypatch.setattr(translate, "SORT_WINDOW", 2)


@pytest.fixture(scope="module")
def translation_model(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    src_vocab = Vocabulary.build([line.split() for line in read_text(multi30k_slice["val_source"])], 200)
    trg_vocab = Vocabulary.build([line.split() for line in read_text(multi30k_slice["val_reference"])], 200)
    model = tiny_model(tiny_config("rnnsearch"), len(src_vocab), len(trg_vocab), dtype=torch.float32)
    return save_model_dir(tmp_path_factory.mktemp("model") / "translate", model, src_vocab, trg_vocab)


def run(*argv: object) -> int:
    return main(["-q", *(str(a) for a in argv)])


def sharded(tmp_path: Path, count: int, command: list[object], output: str) -> list[Path]:
    """Run ``command`` once per shard with ``-o`` named after the shard; the outputs, in a scrambled order."""
    parts = []
    for index in range(1, count + 1):
        part = tmp_path / output.replace("#", f"{index}-of-{count}")
        assert run(*command, "-o", part, "--shard", f"{index}/{count}") == 0
        assert shards.manifest_path(part).exists()
        parts.append(part)
    return parts[1::2] + parts[::2]


def lines_of(path: Path) -> int:
    data = path.read_bytes()
    return len((gzip.decompress(data) if path.suffix == ".gz" else data).splitlines())


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "plain"])
@pytest.mark.parametrize("count", [3, 7])
def test_score_table_shards_merge_into_the_unsharded_table(multi30k_slice: dict[str, Path], slice_table_model: Path,
                                                           tmp_path: Path, compressed: bool, count: int) -> None:
    table = multi30k_slice["phrase_table"]
    if not compressed:
        table = tmp_path / "phrase-table"
        table.write_bytes(gzip.decompress(multi30k_slice["phrase_table"].read_bytes()))
    command: list[object] = ["score-table", table, "--model", slice_table_model, "--threads", 1]
    assert run(*command, "-o", tmp_path / "whole.gz") == 0
    parts = sharded(tmp_path, count, command, "part.#.gz")
    sizes = [lines_of(part) for part in sorted(parts, key=lambda p: int(p.name.split(".")[1].split("-")[0]))]
    assert sum(sizes) == 300 and all(0 < size < 300 for size in sizes)  # each shard has a part of the table
    assert run("merge-shards", *parts, "-o", tmp_path / "merged.gz") == 0
    assert (tmp_path / "merged.gz").read_bytes() == (tmp_path / "whole.gz").read_bytes()  # the gzip bytes too
    assert run("merge-shards", *parts, "-o", tmp_path / "merged") == 0
    assert (tmp_path / "merged").read_bytes() == gzip.decompress((tmp_path / "whole.gz").read_bytes())


def test_more_shards_than_lines_and_the_moses_ini(multi30k_slice: dict[str, Path], slice_table_model: Path,
                                                  tmp_path: Path) -> None:
    table = tmp_path / "five"
    with gzip.open(multi30k_slice["phrase_table"], "rt", encoding="utf-8") as f:
        table.write_text("".join(next(f) for _ in range(5)), encoding="utf-8")
    ini = tmp_path / "moses.ini"
    ini.write_text(multi30k_slice["moses_ini"].read_text(encoding="utf-8"), encoding="utf-8")
    command: list[object] = ["score-table", table, "--model", slice_table_model, "--threads", 1]
    assert run(*command, "-o", tmp_path / "whole.gz", "--moses-ini", ini, "--moses-ini-out",
               tmp_path / "whole.ini") == 0
    parts = sharded(tmp_path, 12, command, "part.#")
    sizes = [lines_of(part) for part in parts]
    assert sum(sizes) == 5 and sizes.count(0) >= 7
    assert run("merge-shards", *parts, "-o", tmp_path / "merged.gz", "--moses-ini", ini, "--moses-ini-out",
               tmp_path / "merged.ini") == 0
    assert (tmp_path / "merged.gz").read_bytes() == (tmp_path / "whole.gz").read_bytes()
    whole_ini = (tmp_path / "whole.ini").read_text(encoding="utf-8")
    assert (tmp_path / "merged.ini").read_text(encoding="utf-8") == whole_ini.replace("whole.gz", "merged.gz")
    assert "num-features=5" in whole_ini


@pytest.mark.parametrize(("count", "threads"), [(3, 1), (25, 1), (3, 2)])
def test_score_nbest_shards_hold_whole_sentences(multi30k_slice: dict[str, Path], translation_model: Path,
                                                 tmp_path: Path, count: int, threads: int) -> None:
    """Merged shards are the unsharded list byte for byte, with one torch thread or two."""
    nbest = multi30k_slice["val_nbest"]  # 20 sentences
    config = tmp_path / "rescore.yaml"
    config.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "name": "RNNsearch1",
                                                    "model": str(translation_model)}]}), encoding="utf-8")
    command: list[object] = ["score-nbest", nbest, "--source", multi30k_slice["val_source"], "--config", config,
                             "--lm", multi30k_slice["lm"], "--word-penalty", "--batch-sentences", 2, "--threads",
                             threads]
    assert run(*command, "-o", tmp_path / "whole.gz") == 0
    parts = sharded(tmp_path, count, command, "part.#.gz")
    ids = [{int(line.split(b" ||| ")[0]) for line in gzip.decompress(part.read_bytes()).splitlines()}
           for part in parts]
    assert sum(len(part) for part in ids) == 20  # no sentence in two shards
    assert all(i ^ 1 in part for part in ids for i in part)  # whole blocks of 2 ids, scored together
    assert sum(not part for part in ids) >= count - 10
    assert run("merge-shards", *parts, "-o", tmp_path / "merged.gz") == 0
    assert (tmp_path / "merged.gz").read_bytes() == (tmp_path / "whole.gz").read_bytes()


@pytest.mark.parametrize("count", [3, 30])
def test_translate_shards_keep_the_sentence_ids(multi30k_slice: dict[str, Path], translation_model: Path,
                                                tmp_path: Path, count: int) -> None:
    source = multi30k_slice["val_source"]  # 20 lines, plain
    command: list[object] = ["translate", "--model", translation_model, "-i", source, "--beam", 3, "--nbest", 3,
                             "--threads", 1, "--batch-size", 1]
    assert run(*command, "-o", tmp_path / "whole.nbest", "--alignments", tmp_path / "whole.align") == 0
    parts, alignments = [], []
    for index in range(1, count + 1):
        part, align = tmp_path / f"part{index}.nbest", tmp_path / f"part{index}.align"
        assert run(*command, "-o", part, "--alignments", align, "--shard", f"{index}/{count}") == 0
        parts.append(part)
        alignments.append(align)
    assert run("merge-shards", *parts, "-o", tmp_path / "merged.nbest") == 0
    assert run("merge-shards", *alignments, "-o", tmp_path / "merged.align") == 0
    assert (tmp_path / "merged.nbest").read_bytes() == (tmp_path / "whole.nbest").read_bytes()
    assert (tmp_path / "merged.align").read_bytes() == (tmp_path / "whole.align").read_bytes()
    assert run("merge-shards", *parts[:-1], alignments[-1], "-o", tmp_path / "mixed") == 2  # not the same output


def test_translate_1best_shards(multi30k_slice: dict[str, Path], translation_model: Path, tmp_path: Path) -> None:
    source = tmp_path / "val.en.gz"
    source.write_bytes(gzip.compress(multi30k_slice["val_source"].read_bytes()))
    command: list[object] = ["translate", "--model", translation_model, "-i", source, "--beam", 2, "--threads", 1,
                             "--batch-size", 3]
    assert run(*command, "-o", tmp_path / "whole.out") == 0
    parts = sharded(tmp_path, 2, command, "part.#")
    assert run("merge-shards", *parts, "-o", tmp_path / "merged.out") == 0
    assert (tmp_path / "merged.out").read_bytes() == (tmp_path / "whole.out").read_bytes()


# ------------------------------------------------------------------------------------------------ refusals

@pytest.fixture
def nbest_parts(multi30k_slice: dict[str, Path], tmp_path: Path) -> tuple[list[object], list[Path]]:
    command: list[object] = ["score-nbest", multi30k_slice["val_nbest"], "--word-penalty", "--batch-sentences", 2]
    parts = sorted(sharded(tmp_path, 3, command, "part.#"))
    assert all(part.stat().st_size > 0 for part in parts)
    return command, parts


def refused(capsys: pytest.CaptureFixture[str], *argv: object) -> str:
    assert run(*argv) == 2
    return capsys.readouterr().err


def test_a_missing_shard_is_named(nbest_parts: tuple[list[object], list[Path]], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, parts = nbest_parts
    err = refused(capsys, "merge-shards", parts[0], parts[2], "-o", tmp_path / "merged")
    assert "shard 2/3 missing: 2 of 3 shard outputs given" in err
    assert not (tmp_path / "merged").exists()


def test_an_unfinished_shard_is_named(nbest_parts: tuple[list[object], list[Path]], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    _, parts = nbest_parts
    shards.manifest_path(parts[1]).unlink()  # its run stopped after writing the output (or before)
    err = refused(capsys, "merge-shards", *parts, "-o", tmp_path / "merged")
    assert f"{parts[1]}: no manifest part.2-of-3.shard.yaml beside it: its shard did not finish" in err


def test_a_changed_shard_is_named(nbest_parts: tuple[list[object], list[Path]], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, parts = nbest_parts
    parts[2].write_bytes(parts[2].read_bytes()[:-10])  # cut short, by a copy that failed
    err = refused(capsys, "merge-shards", *parts, "-o", tmp_path / "merged")
    assert f"{parts[2]} is not the file its manifest describes" in err and "run shard 3/3 again" in err


def test_a_foreign_shard_is_named(nbest_parts: tuple[list[object], list[Path]], multi30k_slice: dict[str, Path],
                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command, parts = nbest_parts
    other = tmp_path / "other.2-of-3"
    assert run("score-nbest", multi30k_slice["nbest"], "--word-penalty", "--batch-sentences", 2, "-o", other,
               "--shard", "2/3") == 0
    err = refused(capsys, "merge-shards", parts[0], other, parts[2], "-o", tmp_path / "merged")
    assert f"{other} is a shard of another input" in err and str(multi30k_slice["nbest"]) in err
    four = tmp_path / "four.2-of-4"
    assert run(*command, "-o", four, "--shard", "2/4") == 0
    assert "is shard 2/4" in refused(capsys, "merge-shards", parts[0], four, parts[2], "-o", tmp_path / "merged")
    changed = tmp_path / "lm.2-of-3"
    assert run(*command, "--lm", multi30k_slice["lm"], "-o", changed, "--shard", "2/3") == 0
    err = refused(capsys, "merge-shards", parts[0], changed, parts[2], "-o", tmp_path / "merged")
    assert f"{changed} was made with lm=" in err
    err = refused(capsys, "merge-shards", parts[0], parts[1], parts[1], parts[2], "-o", tmp_path / "merged")
    assert f"{parts[1]} and {parts[1]} are both shard 2/3" in err
    copy = tmp_path / "copy"
    shutil.copy(parts[0], copy)
    shutil.copy(shards.manifest_path(parts[0]), shards.manifest_path(copy))
    assert "are both shard 1/3" in refused(capsys, "merge-shards", *parts, copy, "-o", tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_shards_cut_differently_are_refused(nbest_parts: tuple[list[object], list[Path]], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _, parts = nbest_parts
    manifest = shards.manifest_path(parts[1])
    data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    data["range"]["start"] += 1
    manifest.write_text(yaml.safe_dump(data), encoding="utf-8")
    err = refused(capsys, "merge-shards", *parts, "-o", tmp_path / "merged")
    assert f"{parts[1]}: shard 2/3 starts at byte" in err and "cut differently" in err


@pytest.mark.parametrize("argv, message", [
    (["score-nbest", "-", "--word-penalty", "-o", "{tmp}/out", "--shard", "1/2"], "stdin cannot be cut into shards"),
    (["score-nbest", "{nbest}", "--word-penalty", "--shard", "1/2"], "give every output a file name"),
    (["translate", "--model", "{tmp}", "--shard", "1/2", "-o", "{tmp}/out"], "stdin cannot be cut into shards"),
])
def test_stdin_and_stdout_cannot_be_sharded(argv: list[str], message: str, multi30k_slice: dict[str, Path],
                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(tmp=tmp_path, nbest=multi30k_slice["val_nbest"]) for a in argv]
    assert message in refused(capsys, *argv)


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "1/0", "a/b", "-1/3"])
def test_bad_shard_arguments(text: str, multi30k_slice: dict[str, Path], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["score-nbest", str(multi30k_slice["val_nbest"]), "--word-penalty", "-o", str(tmp_path / "out"),
              f"--shard={text}"])
    assert exit_.value.code == 2
    assert "--shard: expected I/N" in capsys.readouterr().err


def test_an_error_in_a_later_shard_names_the_files_line(multi30k_slice: dict[str, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    lines = gzip.decompress(multi30k_slice["val_nbest"].read_bytes()).decode().splitlines(keepends=True)
    lines[1300] = lines[1300].replace("|||", "||", 1)
    nbest = tmp_path / "broken.nbest"
    nbest.write_text("".join(lines), encoding="utf-8")
    for index in (1, 2):
        assert run("score-nbest", nbest, "--word-penalty", "-o", tmp_path / f"part{index}", "--shard",
                   f"{index}/3") == 0
    err = refused(capsys, "score-nbest", nbest, "--word-penalty", "-o", tmp_path / "part3", "--shard", "3/3")
    assert f"{nbest}:1301: expected 4 to 6 fields" in err
    assert not (tmp_path / "part3").exists() and not shards.manifest_path(tmp_path / "part3").exists()
