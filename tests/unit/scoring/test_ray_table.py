"""score-table --ray without a cluster: the rows the read task makes (the windows one process scores, segment by
segment, with their line numbers) scored by the worker class in this process give the single-process table byte for
byte; a bad line or a cut gzip file is an error with its line; the worker pool's size, the cluster's settings and
the user's error found inside Ray's wrappers. (tests/integration/test_ray.py runs the whole on a local cluster.)"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import content

from rerank.errors import FormatError, RerankError
from rerank.formats.phrase_table import read_phrase_table
from rerank.formats.shards import TABLE_SEGMENT
from rerank.scoring.pairs import Scorer, ScoringConfig
from rerank.scoring.ray_table import (
    GroupScorer,
    RayCluster,
    RayRun,
    default_workers,
    not_restarted,
    read_windows,
    user_error,
)
from rerank.scoring.table import score_phrase_table

SCORING = ScoringConfig(window=50, max_tokens=64)


@pytest.fixture(scope="module")
def table(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 300-line slice of the real table, gzipped, with 40 lines of a segment-starting source after line 140."""
    lines = content(multi30k_slice["phrase_table"]).decode().splitlines(keepends=True)
    source = next(f"a dog {i}" for i in range(1_000_000) if zlib.crc32(f"a dog {i}".encode()) % TABLE_SEGMENT == 0)
    inserted = [f"{source} |||{line.split('|||', 1)[1]}" for line in lines[:40]]
    path = tmp_path_factory.mktemp("table") / "table.gz"
    path.write_bytes(gzip.compress("".join(lines[:140] + inserted + lines[140:]).encode(), mtime=0))
    return path


def rows(table: Path) -> list[tuple[int, bytes]]:
    """The read task's rows: the first line's number and the lines' bytes."""
    return [(int(row["first_line"][0]), bytes(row["text"][0]))
            for row in read_windows({"path": np.array([str(table)])}, SCORING, "utf-8")]


def worker(slice_table_model: Path, table: str = "table.gz") -> GroupScorer:
    return GroupScorer(str(slice_table_model), "cpu", 1, SCORING, table, "utf-8", 4)


def test_the_rows_are_one_process_windows_segment_by_segment(table: Path) -> None:
    read = rows(table)
    assert b"".join(text for _, text in read) == content(table)
    sizes = [text.count(b"\n") for _, text in read]
    # 140 lines, a segment of 40 + 160 lines: windows of 50 pairs, cut afresh where the segment starts
    assert sizes == [50, 50, 40, 50, 50, 50, 50]
    assert [first for first, _ in read] == [1, 51, 101, 141, 191, 241, 291]


def test_workers_in_this_process_write_the_single_process_table(table: Path, slice_table_model: Path,
                                                                tmp_path: Path) -> None:
    scorer = worker(slice_table_model)
    batch = {"first_line": np.array([first for first, _ in rows(table)]),
             "text": np.array([text for _, text in rows(table)], dtype=object)}
    out = scorer(batch)
    assert out["lines"].tolist() == [50, 50, 40, 50, 50, 50, 50] and out["floored"].sum() == 0
    assert np.all(out["cpu"] >= 0)
    plain = tmp_path / "plain.txt"
    score_phrase_table(read_phrase_table(table), Scorer.load(slice_table_model, config=SCORING), table=table,
                       output=plain, show_progress=False)
    assert "".join(out["text"]).encode() == plain.read_bytes()


def test_a_bad_line_is_an_error_at_its_line_in_the_table(slice_table_model: Path) -> None:
    scorer = worker(slice_table_model)
    text = "un ||| a ||| 0.1 0.2 0.3 0.4\nun ||| b ||| 0.1 x 0.3 0.4\n"
    with pytest.raises(FormatError) as error:
        scorer.score_group(61, text.encode())
    assert str(error.value) == "table.gz:62: expected numbers in the scores field (field 3), got ' 0.1 x 0.3 0.4'"
    batch = {"first_line": np.array([7]), "text": np.array([b"un ||| a ||| 0.1 0.2 0.3\n"], dtype=object)}
    with pytest.raises(RerankError) as plain:
        scorer(batch)
    assert type(plain.value) is RerankError  # crosses Ray's process boundary intact
    assert str(plain.value) == "table.gz:7: expected 4 scores, as on the first line, got ' 0.1 0.2 0.3'"
    with pytest.raises(FormatError, match=r"^table\.gz:3: expected UTF-8 text, got 'byte 0xe9 at column 8 "):
        scorer.score_group(2, "un ||| a ||| 1 2 3 4\nun ||| \xe9 ||| 1 2 3 4\n".encode("latin-1"))


def test_a_cut_gzip_table_is_an_error_at_the_line_it_stops(table: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gz"
    cut.write_bytes(table.read_bytes()[: len(table.read_bytes()) // 2])
    whole_lines = zlib.decompressobj(31).decompress(cut.read_bytes()).count(b"\n")  # what the cut file still holds
    with pytest.raises(RerankError) as error:
        rows(cut)
    assert str(error.value) == (f"{cut}:{whole_lines + 1}: expected a complete gzip stream, got 'a stream that ends "
                                "early (a cut file?)'")


def test_the_cluster_settings_are_checked() -> None:
    assert (RayCluster().threads, RayCluster().device) == (1, "cpu")
    assert (RayCluster(cpus=2.5, gpus=0.5).threads, RayCluster(gpus=0.5).device) == (2, "cuda")
    assert RayCluster(cpus=0.5).threads == 1
    with pytest.raises(RerankError, match=r"^--ray-workers must be at least 1, got 0$"):
        RayCluster(workers=0)
    with pytest.raises(RerankError, match=r"^a worker needs more than 0 CPUs and at least 0 GPUs, got 0 and 0$"):
        RayCluster(cpus=0)
    with pytest.raises(RerankError, match=r"got 1 and -1$"):
        RayCluster(gpus=-1)


def test_the_default_pool_fills_the_clusters_cpus_or_gpus() -> None:
    assert default_workers({"CPU": 7.0, "GPU": 2.0}, RayCluster(cpus=2)) == 3
    assert default_workers({"CPU": 7.0, "GPU": 2.0}, RayCluster(gpus=0.5)) == 4
    assert default_workers({"CPU": 1.0}, RayCluster(cpus=4)) == 1  # at least one
    assert default_workers({"CPU": 16.0}, RayCluster(gpus=1)) == 1  # no GPU: one, which Ray will wait for


def test_the_runs_pairs_per_cpu_second() -> None:
    assert RayRun(2, pairs=300, cpu_seconds=1.5).pairs_per_cpu_second == 200
    assert math.isnan(RayRun(2).pairs_per_cpu_second)


def test_the_users_error_is_found_inside_wrappers() -> None:
    class TaskError(Exception):  # as Ray's RayTaskError keeps the worker's exception
        def __init__(self, cause: BaseException):
            super().__init__("task failed")
            self.cause = cause

    original = FormatError("t.gz", 3, "4 scores", got="2")
    found = user_error(TaskError(RuntimeError("wrapped")).with_traceback(None))
    assert found is None
    wrapped = TaskError(RerankError(f"{original}\nTraceback (most recent call last): ..."))
    found = user_error(wrapped)
    assert type(found) is RerankError and str(found) == "t.gz:3: expected 4 scores, got '2'"
    try:
        try:
            raise original
        except FormatError as e:
            raise RuntimeError("Ray Data failed") from e
    except RuntimeError as e:
        assert str(user_error(e)) == str(original)
    looping = RuntimeError("a")
    looping.__context__ = RuntimeError("b")
    looping.__context__.__context__ = looping
    assert user_error(looping) is None


def test_the_users_error_inside_rays_own_task_error() -> None:
    exceptions = pytest.importorskip("ray.exceptions", reason="Ray is not installed: the ray extra")
    error = exceptions.RayTaskError("GroupScorer", "Traceback ...", RerankError("table.gz:9: expected a number"))
    assert str(user_error(error)) == "table.gz:9: expected a number"
    assert str(user_error(error.as_instanceof_cause())) == "table.gz:9: expected a number"


def test_workers_are_not_restarted_where_ray_data_still_takes_the_option() -> None:
    def takes_remote_arguments(fn: object, *, batch_size: int = 1, **ray_remote_args: object) -> None: ...

    def takes_named_ones_only(fn: object, *, batch_size: int = 1) -> None: ...

    assert not_restarted(takes_remote_arguments) == {"max_restarts": 0}
    assert not_restarted(takes_named_ones_only) == {}
