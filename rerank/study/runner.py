"""How the study runs a step: skipped where its outputs exist, logged to ``commands.sh`` as the command line that
makes the same outputs (a ``rerank`` command, or a Moses program), and timed."""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rerank import processes
from rerank.errors import RerankError
from rerank.formats.files import atomic_binary_output, atomic_output, make_output_dir, work_file, work_text

logger = logging.getLogger(__name__)


def write_file(path: Path, text: str) -> None:
    """``text`` as the file ``path``, atomically: a step stopped half-way leaves no file that looks done."""
    with atomic_output(path) as out:
        out.write(text)


class StepRunner:
    """The study's output directory, its ``commands.sh`` and the wall time of the steps that were timed."""

    def __init__(self, output_dir: str | Path, force: bool = False):
        self.out = Path(output_dir)
        make_output_dir(self.out, "output_dir")
        self.force = force
        self.commands = self.out / "commands.sh"
        self.timings_file = self.out / "timings.json"  # kept across runs: a resumed study still reports every step
        self.timings: dict[str, float] = {} if force else self._earlier_timings()
        self._directories: set[Path] = {self.out}  # those commands.sh makes before a command writes into them

    def _earlier_timings(self) -> dict[str, float]:
        """The wall times of the steps an earlier run of the study timed (none where it left no readable file)."""
        try:
            data = json.loads(self.timings_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) \
            else {}

    def done(self, outputs: Sequence[Path]) -> bool:
        return bool(outputs) and all(p.exists() for p in outputs) and not self.force

    def rerank(self, argv: Sequence[object], outputs: Sequence[Path], run: Callable[..., object], *args: Any,
               timing: str | None = None, quiet: bool = False) -> None:
        """Call ``run(*args)``, the library function of ``rerank ARGV``, unless all ``outputs`` exist; log that
        command line to commands.sh (and to stderr, unless the step is one of many, ``quiet``)."""
        line = "rerank " + shlex.join(str(a) for a in argv)
        if self.done(outputs):
            logger.debug("done already: %s", line)
            return
        self._log(line, outputs, quiet)
        started = time.monotonic()
        run(*args)
        if timing:
            self._time(timing, started)

    def program(self, argv: Sequence[object], outputs: Sequence[Path], *, stdout: Path | None = None,
                log: Path | None = None, timing: str | None = None, quiet: bool = False,
                makes_directory: bool = False) -> None:
        """Run a program (Moses and its scripts) unless all ``outputs`` exist, its standard output to ``stdout``
        (written whole or not at all), its standard error to ``log``; log ``ARGV > STDOUT`` to commands.sh.
        ``makes_directory``: the program makes the directory of its outputs (and refuses one that exists)."""
        words = [str(a) for a in argv]
        line = shlex.join(words) + (f" > {shlex.quote(str(stdout))}" if stdout else "")
        if self.done(outputs):
            logger.debug("done already: %s", line)
            return
        if shutil.which(words[0]) is None:
            raise RerankError(f"{words[0]}: no such program")
        self._log(line, [*([] if makes_directory else outputs), *([stdout] if stdout else [])], quiet)
        started = time.monotonic()
        with contextlib.ExitStack() as files:  # stdout becomes its file only when the program succeeds
            out = files.enter_context(atomic_binary_output(stdout)) if stdout else subprocess.DEVNULL
            err = files.enter_context(work_file(log)) if log else subprocess.DEVNULL
            status = processes.run(words, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            if status != 0:
                raise RerankError(f"{words[0]} exited with status {status}" + (f"; see {log}" if log else ""))
        if timing:
            self._time(timing, started)

    def _time(self, timing: str, started: float) -> None:
        self.timings[timing] = time.monotonic() - started
        write_file(self.timings_file, json.dumps(self.timings, indent=2) + "\n")

    def _log(self, line: str, outputs: Sequence[Path], quiet: bool) -> None:
        """``line`` to commands.sh, after ``mkdir -p`` for each directory of ``outputs`` it has not made yet."""
        logger.log(logging.DEBUG if quiet else logging.INFO, "$ %s", line)
        directories = [p.parent for p in outputs if p.parent not in self._directories]
        with work_text(self.commands, append=True) as log:
            for directory in dict.fromkeys(directories):
                log.write(f"mkdir -p {shlex.quote(str(directory))}\n")
                directory.mkdir(parents=True, exist_ok=True)
                self._directories.add(directory)
            log.write(line + "\n")
