"""rerank.processes: every child, a list of words or shell text, runs in a process group of its own and is
ended with everything it started when the block that runs it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rerank import processes

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def running_in_group(group: int) -> list[int]:
    """The processes of ``group`` that still run (a zombie waiting to be reaped has ended)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                found.append(int(entry))
    return found


def test_a_list_of_words_runs_as_it_is_and_gives_its_exit_status(tmp_path):
    marker = tmp_path / "it ran; $(touch pwned)"
    status = processes.run([sys.executable, "-c", "import sys, pathlib; pathlib.Path(sys.argv[1]).touch(); "
                            "sys.exit(3)", str(marker)], cwd=tmp_path)
    assert status == 3
    assert marker.exists() and not (tmp_path / "pwned").exists()


def test_a_child_has_its_own_process_group():
    with processes.process_group(SLEEPER, stdin=subprocess.DEVNULL) as child:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)


@pytest.mark.parametrize("command", [SLEEPER, "sleep 60 & sleep 60; wait"], ids=["words", "shell"])
def test_an_error_in_the_block_ends_the_child_and_its_group(command):
    with pytest.raises(KeyboardInterrupt), processes.process_group(command, stdin=subprocess.DEVNULL) as child:
        time.sleep(0.2)
        assert running_in_group(child.pid)
        raise KeyboardInterrupt
    assert child.poll() is not None
    deadline = time.monotonic() + 5  # a killed process takes a moment to exit
    while running_in_group(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running_in_group(child.pid) == []
