"""The ``rerank`` command: one entry point, one subcommand per module in :mod:`rerank.commands`.

Each command module has a one-line docstring (its help), ``add_arguments(parser)``,
``run(args) -> int``, ``OUTPUTS``, the options that name files it writes, and ``INPUTS``, those
that name files (or model directories) it reads: every output is checked before the command runs
(:func:`~rerank.formats.files.check_outputs`: writable, never one of the inputs, locked against a second run
writing it for as long as the command runs). A command imports
torch only inside ``run``, so that ``rerank apply`` or ``rerank tune`` start fast. :func:`main` sets up
logging and the SIGTERM handler once, for the whole process; a :class:`~rerank.errors.RerankError` (or a
full disk) becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from rerank import __version__
from rerank.commands import (
    align,
    apply,
    average,
    cut_nbest,
    distill,
    evaluate,
    experiment,
    merge_nbest,
    merge_shards,
    oracle,
    prepare,
    score_nbest,
    score_table,
    train,
    translate,
    tune,
)
from rerank.errors import RerankError, did_you_mean, plain
from rerank.formats.files import DISK_ERRORS, check_outputs, discard_stdout, one_run
from rerank.formats.shards import manifest_outputs

COMMANDS: dict[str, ModuleType] = {
    "score-nbest": score_nbest,
    "apply": apply,
    "evaluate": evaluate,
    "prepare": prepare,
    "train": train,
    "distill": distill,
    "tune": tune,
    "score-table": score_table,
    "translate": translate,
    "align": align,
    "merge-nbest": merge_nbest,
    "cut-nbest": cut_nbest,
    "merge-shards": merge_shards,
    "oracle": oracle,
    "average": average,
    "experiment": experiment,
}

EXIT_USER_ERROR = 2
OUR_LOGGERS = ("rerank",)


class Parser(argparse.ArgumentParser):
    """argparse's parser, with the closest name for a mistyped command or choice ("did you mean"), no abbreviated
    options (``--word-penalt`` is an error, not ``--word-penalty``: a script that abbreviates breaks the day an
    option with the same start is added), and an error said first, in one line, with a short usage after it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """``rerank tune: error: MESSAGE`` first, then where the whole usage is, and exit status 2."""
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message}\nusage: {self.prog} [-h] ... "
                                   f"(see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            suggestion = did_you_mean(str(value), map(str, action.choices))
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{suggestion} (choose from {choices})")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rerank", description="Neural and n-gram features for Moses: score, rescore, tune, translate.")
    parser.add_argument("--version", action="version", version=f"rerank {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        summary = " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())  # the first paragraph
        sub = subparsers.add_parser(name, help=summary, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run, outputs=getattr(module, "OUTPUTS", ()), inputs=getattr(module, "INPUTS", ()))
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line's arguments; an unknown option is an error (exit 2) that names the closest known one."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        command: argparse.ArgumentParser = subparsers.choices[args.command]
        options = [o.split("=")[0] for o in unknown if re.match(r"--?[^\W\d]", o)]  # not a negative number
        if options:  # named alone: its value may have been taken for a positional argument
            named = ", ".join(o + did_you_mean(o, command._option_string_actions) for o in options)
            command.error(f"unrecognized option{'s' * (len(options) > 1)} {named}")
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    # torch's CPU threads wait for work asleep, not spinning: on a machine that other jobs share, spinning threads
    # burn many times the CPU time of the work itself (a tiny training's 60 updates: 140 s of CPU instead of 9).
    # Read when torch loads, which no command has done yet; OMP_WAIT_POLICY=ACTIVE in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    args = parse(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    # Our progress and notes at INFO; other libraries' (matplotlib's font cache...) only from WARNING.
    logging.basicConfig(level=logging.WARNING, format="rerank: %(message)s", stream=sys.stderr, force=True)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        # the outputs claimed (checked here, directories made by the command) are locked until it ends
        with one_run(shlex.join(["rerank", *(sys.argv[1:] if argv is None else argv)])):
            check_outputs(command_outputs(args), command_inputs(args))  # before any work starts
            return args.run(args) or 0
    except RerankError as e:
        print(f"rerank: error: {plain(str(e))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as e:
        if e.errno not in DISK_ERRORS:
            raise
        print(f"rerank: error: {e.filename or 'output'}: cannot write: {e.strerror}", file=sys.stderr)
        discard_stdout()  # what stdout still holds cannot be written either
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("rerank: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rerank apply ... | head`
        sys.stderr.close()
        return 0


def command_outputs(args: argparse.Namespace) -> list[tuple[str, str | os.PathLike[str] | None]]:
    """The files the command writes, as ``(option, path)`` pairs (with --shard, each output's manifest too)."""
    outputs = [(f"--{dest.replace('_', '-')}", getattr(args, dest, None)) for dest in args.outputs]
    if getattr(args, "shard", None) is not None:
        outputs += manifest_outputs(outputs)
    return outputs


def command_inputs(args: argparse.Namespace) -> list[str]:
    """The files (and model directories) the command reads; ``NAME=PATH`` values count as ``PATH`` too."""
    paths: list[str] = []
    for dest in args.inputs:
        value = getattr(args, dest, None)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                paths += [item, item.partition("=")[2]] if "=" in item else [item]
    return [path for path in paths if path]


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (a plain kill, a scheduler's time limit) unwinds like an error: no partial outputs stay behind."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
