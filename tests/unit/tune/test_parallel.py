"""The decoder's parts: the source cut into contiguous parts of nearly equal sizes, each part's script run,
and the parts' n-best lists joined with the whole source's sentence ids."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rerank.errors import FormatError, RerankError
from rerank.tune.parallel import Jobs, join_nbest, prepare, split_source


def test_the_source_is_cut_into_contiguous_parts_of_nearly_equal_sizes(tmp_path: Path) -> None:
    source = tmp_path / "dev.src"
    source.write_text("".join(f"s{i}\n" for i in range(7)))
    parts = split_source(source, 3, tmp_path)
    assert [(p.index, p.count, p.first, p.lines) for p in parts] == [(1, 3, 0, 2), (2, 3, 2, 2), (3, 3, 4, 3)]
    assert [p.source.read_text() for p in parts] == ["s0\ns1\n", "s2\ns3\n", "s4\ns5\ns6\n"]
    assert str(parts[2]) == "part 3 of 3 (sentences 4-6)"
    assert len(split_source(source, 20, tmp_path)) == 7  # never an empty part


def test_the_parts_lists_are_joined_with_the_sources_sentence_ids(tmp_path: Path) -> None:
    source = tmp_path / "dev.src"
    source.write_text("a\nb\nc\n")
    parts = split_source(source, 2, tmp_path)
    runs = [prepare("cat", part, 1, tmp_path, writes_nbest_file=False, reads_stdin=True) for part in parts]
    for run in runs:  # each part's script: the "decoder" (cat) reads its part
        subprocess.run(["sh", str(run.script)], check=True)
        assert run.status.read_text().strip() == "0" and run.nbest.read_text() == run.part.source.read_text()
        lines = run.part.source.read_text().splitlines()  # then the part's n-best list, ids from 0
        run.nbest.write_text("".join(f"{i} ||| {line} ||| F0= 1 ||| 1\n" for i, line in enumerate(lines)))
    join_nbest(runs, tmp_path / "joined")
    assert (tmp_path / "joined").read_text() == "0 ||| a ||| F0= 1 ||| 1\n1 ||| b ||| F0= 1 ||| 1\n" \
                                                "2 ||| c ||| F0= 1 ||| 1\n"
    assert not runs[0].nbest.exists() and not runs[0].status.exists()


def test_an_id_beyond_its_part_is_an_error_at_its_line(tmp_path: Path) -> None:
    source = tmp_path / "dev.src"
    source.write_text("a\nb\nc\n")
    part = split_source(source, 2, tmp_path)[0]  # one line
    run = prepare("cat", part, 1, tmp_path, writes_nbest_file=False, reads_stdin=True)
    run.nbest.write_text("0 ||| a ||| F0= 1 ||| 1\n1 ||| b ||| F0= 1 ||| 1\n")
    with pytest.raises(FormatError, match=r"run1.part1.nbest:2: expected a sentence id below 1, the number of lines"):
        join_nbest([run], tmp_path / "joined")


def test_jobs_need_a_count_and_a_submit_template_with_the_command() -> None:
    assert not Jobs().parallel and Jobs(2).parallel and Jobs(1, "srun {command}").parallel
    with pytest.raises(RerankError, match="--jobs must be at least 1, got 0"):
        Jobs(0)
    with pytest.raises(RerankError, match=r"--submit: the template must hold \{command\}"):
        Jobs(2, "srun sh")
