"""How the study runs a step: skipped where its outputs exist, logged to ``commands.sh`` as the command line that
makes the same outputs (a ``rerank`` command, or a Moses program), and timed."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
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


@dataclass(frozen=True)
class Timing:
    """One step's wall time and CPU time (user and system, of rerank and the programs it ran), in seconds, and the
    machine's load average (over a minute) as the step ended, with the CPU cores it has."""

    wall_s: float
    cpu_s: float
    load: float
    cores: int

    @classmethod
    def read(cls, data: Any) -> Timing | None:
        """A record of ``timings.json``; None for one it cannot read (an older file's bare number of seconds)."""
        try:
            return cls(float(data["wall_s"]), float(data["cpu_s"]), float(data["load"]), int(data["cores"]))
        except (TypeError, KeyError, ValueError):
            return None


class Clock:
    """Wall time and the CPU time of this process and of the children it waited for, from its making."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.monotonic(), cpu_seconds()

    def timing(self) -> Timing:
        return Timing(time.monotonic() - self.wall, cpu_seconds() - self.cpu, os.getloadavg()[0], os.cpu_count() or 1)

    def total(self, steps: dict[str, Timing]) -> Timing:
        """The times from the making of the clock, with the load averaged over the steps (weighted by their wall
        time), as the whole run's."""
        now = self.timing()
        wall = sum(t.wall_s for t in steps.values())
        load = sum(t.load * t.wall_s for t in steps.values()) / wall if wall > 0 else now.load
        return replace(now, load=load)


def cpu_seconds() -> float:
    """User and system CPU time of this process (all its threads) and of its children that ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class StepRunner:
    """The study's output directory, its ``commands.sh`` and the times of its steps (``timings.json``): every
    step that ran, by the name it was given or by its command and first output."""

    def __init__(self, output_dir: str | Path, force: bool = False):
        self.out = Path(output_dir)
        make_output_dir(self.out, "output_dir")
        self.force = force
        self.commands = self.out / "commands.sh"
        self.timings_file = self.out / "timings.json"  # kept across runs: a resumed study still reports every step
        self.timings: dict[str, Timing] = {} if force else self._earlier_timings()
        self._directories: set[Path] = {self.out}  # those commands.sh makes before a command writes into them

    def _earlier_timings(self) -> dict[str, Timing]:
        """The times of the steps an earlier run of the study timed (none where it left no readable file)."""
        try:
            data = json.loads(self.timings_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        steps = data.get("steps") if isinstance(data, dict) else None
        if not isinstance(steps, dict):
            return {}
        return {str(name): timing for name, record in steps.items() if (timing := Timing.read(record))}

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
        clock = Clock()
        run(*args)
        self._time(timing or self._name(argv[0], outputs), clock)

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
        clock = Clock()
        with contextlib.ExitStack() as files:  # stdout becomes its file only when the program succeeds
            out = files.enter_context(atomic_binary_output(stdout)) if stdout else subprocess.DEVNULL
            err = files.enter_context(work_file(log)) if log else subprocess.DEVNULL
            status = processes.run(words, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            if status != 0:
                raise RerankError(f"{words[0]} exited with status {status}" + (f"; see {log}" if log else ""))
        self._time(timing or self._name(Path(words[0]).name, [*outputs, *([stdout] if stdout else [])]), clock)

    def _name(self, command: object, outputs: Sequence[Path]) -> str:
        """A step's name where none is given: its command and its first output, in the output directory."""
        if not outputs:
            return str(command)
        first = outputs[0]
        return f"{command} {first.relative_to(self.out) if first.is_relative_to(self.out) else first}"

    def _time(self, name: str, clock: Clock) -> None:
        self.timings[name] = clock.timing()
        self.write_timings()

    def write_timings(self, total: Timing | None = None) -> None:
        """``timings.json``: every step's times, and with ``total``, the whole run's."""
        data: dict[str, Any] = {"steps": {name: asdict(timing) for name, timing in self.timings.items()}}
        if total is not None:
            data["total"] = asdict(total)
        write_file(self.timings_file, json.dumps(data, indent=2) + "\n")

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
