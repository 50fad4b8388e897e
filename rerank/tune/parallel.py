"""The decoder of the tuning loop run on parts of the tuning source at once (``rerank tune --jobs N``).

As ``moses-parallel.pl`` does: the source is cut into N contiguous parts of nearly equal line counts
(``source.partK-of-N`` in the work directory), the decoder command runs on every part at the same time,
and the parts' n-best lists are joined, each sentence id shifted by the number of lines before its part,
into the n-best list one run on the whole source would write.

Each part's run is a small shell script, ``runI.partK.sh``: it changes to the directory ``rerank tune``
runs in, runs the decoder command with the part's ``{source}`` and ``{nbest}`` (or its stdin and stdout)
and sends the decoder's stderr to ``runI.partK.decoder.log``. Without a submit template the scripts run
as local processes. With one (``--submit``), each part is the shell command the template gives with
``{command}`` replaced by ``sh runI.partK.sh`` (its absolute path), e.g.

``qsub -sync y -b y -cwd -o /dev/null -e /dev/null {command}`` (SGE), ``srun -n1 -c2 {command}`` (Slurm)

Every value is quoted for the shell and the processes run in groups of their own, ended with rerank
(see :mod:`rerank.tune.templates`). The submit command must wait for the job and exit with its status
(``qsub -sync y``, ``srun``, ``bsub -K``); its own output goes to ``runI.partK.submit.log``. The
script's last act is to write the decoder's exit status to ``runI.partK.status``, so that a job that
did not finish (a submit command that returned at once) is never taken for a finished one. A part that
fails is an error naming it, with the end of its log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rerank.errors import FormatError, RerankError
from rerank.formats.files import atomic_output, display_name, read_lines, read_text, work_file
from rerank.processes import end_group, start
from rerank.tune.templates import Template

logger = logging.getLogger(__name__)

COMMAND = "{command}"  # the placeholder of a submit template
LOG_TAIL = 5  # lines of a failed part's log in the error
POLL_SECONDS = 0.2  # between looks at the parts' processes


@dataclass(frozen=True)
class Jobs:
    """How the decoder runs: on ``count`` parts of the source at once, locally or through ``submit``."""

    count: int = 1
    submit: str | None = None  # a shell command template with {command}

    def __post_init__(self) -> None:
        if self.count < 1:
            raise RerankError(f"--jobs must be at least 1, got {self.count}")
        if self.submit is not None and "command" not in Template(self.submit, "--submit", ("command",)).names:
            raise RerankError(f"--submit: the template must hold {COMMAND}, where the part's command goes "
                              f"(e.g. \"qsub -sync y -b y -cwd {COMMAND}\"), got {self.submit!r}")

    @property
    def parallel(self) -> bool:
        """Whether the decoder runs in parts (or through the submit command) rather than as one local process."""
        return self.count > 1 or self.submit is not None


@dataclass(frozen=True)
class Part:
    """Lines ``[first, first + lines)`` of the tuning source, as part ``index`` (1-based) of ``count``."""

    index: int
    count: int
    first: int
    lines: int
    source: Path

    def __str__(self) -> str:
        return f"part {self.index} of {self.count} (sentences {self.first}-{self.first + self.lines - 1})"


def split_source(source: Path, jobs: int, work_dir: Path) -> list[Part]:
    """The source cut into ``min(jobs, lines)`` contiguous parts of nearly equal line counts, each written
    (atomically) to ``work_dir/source.partK-of-N``."""
    lines = read_text(source)
    count = max(1, min(jobs, len(lines)))
    parts = []
    for k in range(count):
        first, end = len(lines) * k // count, len(lines) * (k + 1) // count
        path = work_dir / f"source.part{k + 1}-of-{count}"
        text = "".join(line + "\n" for line in lines[first:end])
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            with atomic_output(path) as out:
                out.write(text)
        parts.append(Part(k + 1, count, first, end - first, path))
    return parts


@dataclass(frozen=True)
class PartRun:
    """The files of one part's decoder run in iteration ``number``."""

    part: Part
    script: Path
    nbest: Path   # the part's n-best list
    stdout: Path  # the decoder's stdout: the n-best list, or runI.partK.out when it writes {nbest}
    log: Path     # its stderr
    submit_log: Path
    status: Path  # the decoder's exit status, written last


def prepare(command: str, part: Part, number: int, work_dir: Path, writes_nbest_file: bool,
            reads_stdin: bool) -> PartRun:
    """Write the script of one part's run (``command`` already has the part's placeholders filled in)."""
    stem = work_dir / f"run{number}.part{part.index}"
    nbest = Path(f"{stem}.nbest")
    run = PartRun(part, Path(f"{stem}.sh"), nbest, Path(f"{stem}.out") if writes_nbest_file else nbest,
                  Path(f"{stem}.decoder.log"), Path(f"{stem}.submit.log"), Path(f"{stem}.status"))
    stdin = shlex.quote(str(part.source.resolve())) if reads_stdin else "/dev/null"
    status = shlex.quote(str(run.status.resolve()))
    script = (f"#!/bin/sh\n# {part} of the tuning source, iteration {number}\n"
              f"cd {shlex.quote(os.getcwd())} || exit 1\n"
              f"(\n{command}\n) < {stdin} > {shlex.quote(str(run.stdout.resolve()))} "
              f"2> {shlex.quote(str(run.log.resolve()))}\n"
              f"status=$?\necho $status > {status}.tmp && mv {status}.tmp {status}\nexit $status\n")
    with atomic_output(run.script) as out:
        out.write(script)
    return run


SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # what shlex.quote leaves as it is


def check_submitted_path(script: Path) -> None:
    """A submitted part's script must have a path that reads the same to any number of shells: a submit
    command may hand ``{command}`` to a shell again (``echo {command} | qsub``, ``ssh host {command}``), which
    would run a ``$(...)`` in the work directory's name."""
    if not SHELL_SAFE.fullmatch(str(script)):
        bad = "".join(sorted({c for c in str(script) if not SHELL_SAFE.fullmatch(c)}))
        raise RerankError(f"--submit: the part's script {script} has characters a second shell would read "
                          f"({bad!r}): a submit command may give {COMMAND} to a shell again (echo {COMMAND} | qsub); "
                          "give the work directory a path of letters, digits and -_.,/+=:@%")


def run_parts(runs: Sequence[PartRun], submit: str | None, number: int) -> None:
    """Start every part's script at once (locally, or through ``submit``) and wait for all; the first part that
    fails is an error naming it, and the local processes still running are stopped (on a signal too)."""
    if submit is not None:
        for run in runs:
            check_submitted_path(run.script.resolve())
    processes: list[subprocess.Popen[bytes]] = []
    failed: tuple[PartRun, int] | None = None
    try:
        with contextlib.ExitStack() as files:
            for run in runs:
                for stale in (run.nbest, run.stdout, run.status):
                    with contextlib.suppress(FileNotFoundError):
                        stale.unlink()
                argv = ["sh", str(run.script.resolve())]
                if submit is None:
                    processes.append(start(shlex.join(argv), stdin=subprocess.DEVNULL))
                else:
                    log = files.enter_context(work_file(run.submit_log))
                    line = Template(submit, "--submit", ("command",)).render({"command": argv})
                    logger.debug("iteration %d, %s: %s", number, run.part, line)
                    processes.append(start(line, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
            pending = dict(enumerate(processes))
            while pending and failed is None:
                for i, process in list(pending.items()):
                    code = process.poll()
                    if code is None:
                        continue
                    del pending[i]
                    if code != 0:
                        failed = runs[i], code
                        break
                else:
                    time.sleep(POLL_SECONDS)
    finally:
        for process in processes:
            end_group(process)
    if failed is None:  # the submit commands all said 0: did every job finish, and well?
        for run in runs:
            if not run.status.exists():
                raise RerankError(f"the decoder's job on {run.part} in iteration {number} ended without finishing "
                                  f"({run.status} was not written): the submit command must wait for the job "
                                  "(qsub -sync y, bsub -K)")
        failed = next(((run, code) for run in runs if (code := _written_status(run)) != 0), None)
    if failed is not None:
        run, status = failed
        logs = [run.log] + ([run.submit_log] if submit is not None else [])
        tail = [line for log in logs if log.exists()
                for line in log.read_bytes().decode("utf-8", "replace").splitlines()[-LOG_TAIL:]]
        raise RerankError(f"the decoder failed with exit status {status} on {run.part} in iteration {number}: "
                          f"{run.script}" + "".join(f"\n  {line}" for line in tail)
                          + f"\n  (all of its stderr: {', '.join(map(str, logs))})")
    for run in runs:
        if not run.nbest.exists() or run.nbest.stat().st_size == 0:
            raise RerankError(f"the decoder wrote no n-best list to {run.nbest} on {run.part} in iteration "
                              f"{number}: {run.script}")


def _written_status(run: PartRun) -> int:
    """The decoder's exit status as its script wrote it: a scheduler may not pass it on."""
    text = run.status.read_text(encoding="utf-8").strip()
    return int(text) if text.lstrip("-").isdigit() else 1


def shifted_lines(run: PartRun) -> Iterator[str]:
    """The lines of a part's n-best list with its sentence ids made the whole source's."""
    name = display_name(run.nbest)
    for lineno, line in read_lines(run.nbest):
        head, separator, rest = line.partition("|||")
        text = head.strip()
        if not separator or not (text.isascii() and text.isdigit()):
            raise FormatError(name, lineno, "an n-best line: a sentence id, then '|||'", got=line)
        sentence = int(text)
        if sentence >= run.part.lines:
            raise FormatError(name, lineno, f"a sentence id below {run.part.lines}, the number of lines of "
                              f"{run.part} ({run.part.source.name}): ids count from 0 in each part", got=text)
        start = head.index(text)
        yield f"{head[:start]}{sentence + run.part.first}{head[start + len(text):]}{separator}{rest}"


def join_nbest(runs: Sequence[PartRun], output: Path) -> None:
    """The parts' n-best lists, in order, as one n-best list of the whole source (written atomically); the
    parts' own lists are removed afterwards."""
    with atomic_output(output) as out:
        for run in runs:
            for line in shifted_lines(run):
                out.write(line + "\n")
    for run in runs:
        run.nbest.unlink()
        run.status.unlink()


def decode_in_parts(template: Mapping[str, str], render: Callable[[Mapping[str, str]], str], parts: Sequence[Part],
                    jobs: Jobs, number: int, work_dir: Path, output: Path, *, writes_nbest_file: bool,
                    reads_stdin: bool) -> None:
    """Run the decoder on every part and join their n-best lists into ``output``.

    ``render(values)`` gives the decoder command with the placeholders in ``values`` filled in; ``template``
    holds those that are the same for every part (the weights); each part adds its ``source`` and ``nbest``.
    """
    runs = []
    for part in parts:
        stem = (work_dir / f"run{number}.part{part.index}").resolve()
        values = {**template, "source": str(part.source.resolve()), "nbest": f"{stem}.nbest"}
        runs.append(prepare(render(values), part, number, work_dir, writes_nbest_file, reads_stdin))
    where = "locally" if jobs.submit is None else f"through {jobs.submit!r}"
    logger.info("iteration %d: the decoder on %d parts of the source at once, %s", number, len(runs), where)
    run_parts(runs, jobs.submit, number)
    join_nbest(runs, output)
