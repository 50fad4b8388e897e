"""A command stopped by SIGTERM (kill, a scheduler's time limit) leaves no partial output behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

LINE = "{} ||| a b c ||| d= 0 lm= -3.5 ||| -1.2\n"


def test_sigterm_removes_the_temporary_output(tmp_path: Path) -> None:
    out = tmp_path / "out.1best"
    process = subprocess.Popen([sys.executable, "-m", "rerank", "apply", "-", "--weight", "d=1", "--weight", "lm=1",
                                "-o", str(out)], stdin=subprocess.PIPE, text=True)
    try:
        process.stdin.write("".join(LINE.format(i) for i in range(100)))
        process.stdin.flush()  # stdin stays open: the command waits for more, its output half written
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".out.1best.*.tmp")):
            assert time.monotonic() < deadline and process.poll() is None, "the temporary output never appeared"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        process.kill()
    assert list(tmp_path.iterdir()) == []
