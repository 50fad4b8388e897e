"""The child processes rerank starts (a decoder, Moses, a filter script, a submit command): each in a process
group of its own (a new session), ended with everything it started when rerank stops, on an error, SIGTERM
or Ctrl-C (which unwind rerank: see :func:`process_group`).

A command is a list of words, run as it is, or one string of shell text, run by ``sh -c``; shell text is
only ever built by :mod:`rerank.tune.templates`, which quotes every value it puts in.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL when a child's group is ended

Command = str | Sequence[str]  # shell text, or the words of a command


def start(command: Command, **popen: Any) -> subprocess.Popen[bytes]:
    """``command`` started in a process group of its own (shell text through ``sh -c``)."""
    shell = isinstance(command, str)
    return subprocess.Popen(command if shell else list(command), shell=shell, start_new_session=True, **popen)


def end_group(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` and every process of its group (SIGTERM, then SIGKILL after a grace period); of a
    process that has ended, what it left running in its group."""
    if process.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=GRACE_SECONDS)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # what the group's leader left behind
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()


@contextlib.contextmanager
def process_group(command: Command, **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` (:func:`start`); when the block ends, however it ends, the child's whole group is
    ended if it is still running."""
    process = start(command, **popen)
    try:
        yield process
    finally:
        end_group(process)


def run(command: Command, **popen: Any) -> int:
    """Run ``command`` to its end in its own process group; its exit status."""
    with process_group(command, **popen) as process:
        return process.wait()
