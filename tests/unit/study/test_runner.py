"""CPU time: timings.json of a study (every step that ran, named or not, with its wall and CPU time and the
load)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rerank.study.runner import Clock, StepRunner, cpu_seconds, write_file

TOY = Path(__file__).resolve().parents[2] / "data"


def busy(seconds: float) -> None:
    """Work until this process has spent ``seconds`` of CPU time."""
    start = cpu_seconds()
    while cpu_seconds() - start < seconds:
        sum(range(1000))


def test_every_step_is_timed_with_cpu_and_load(tmp_path: Path) -> None:
    steps = StepRunner(tmp_path / "run")
    first, second = steps.out / "a.txt", steps.out / "sub" / "b.txt"
    steps.rerank(["tune", "x"], [first], lambda: (busy(0.2), write_file(first, "a\n")), timing="the first")
    steps.rerank(["apply", "y"], [second], lambda: write_file(second, "b\n"), quiet=True)
    steps.program([sys.executable, "-c", "sum(range(3_000_000))"], [], stdout=steps.out / "c.txt")
    clock = Clock()
    steps.write_timings(clock.total(steps.timings))
    data = json.loads((steps.out / "timings.json").read_text())
    assert list(data["steps"]) == ["the first", "apply sub/b.txt", f"{Path(sys.executable).name} c.txt"]
    timed = data["steps"]["the first"]
    assert timed["cpu_s"] >= 0.2 and timed["wall_s"] > 0 and timed["cores"] >= 1 and timed["load"] >= 0
    assert data["steps"][f"{Path(sys.executable).name} c.txt"]["cpu_s"] > 0  # a program's CPU time counts too
    assert set(data["total"]) == {"wall_s", "cpu_s", "load", "cores"}
    # a resumed study keeps the earlier steps' times
    assert list(StepRunner(tmp_path / "run").timings) == list(data["steps"])
