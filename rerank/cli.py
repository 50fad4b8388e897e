"""The ``rerank`` command: one entry point, one subcommand per module in :mod:`rerank.commands`.

Each command module has a one-line docstring (its help), ``add_arguments(parser)`` and
``run(args) -> int``, and imports torch only inside ``run``, so that ``rerank apply`` or
``rerank tune`` start fast. A :class:`~rerank.errors.RerankError` becomes one line on stderr
and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from rerank import __version__
from rerank.errors import RerankError

COMMANDS = {
    "score-nbest": "rerank.commands.score_nbest",
    "apply": "rerank.commands.apply",
    "evaluate": "rerank.commands.evaluate",
    "train": "rerank.commands.train",
    "tune": "rerank.commands.tune",
    "score-table": "rerank.commands.score_table",
    "translate": "rerank.commands.translate",
    "align": "rerank.commands.align",
    "merge-nbest": "rerank.commands.merge_nbest",
    "experiment": "rerank.commands.experiment",
}

EXIT_USER_ERROR = 2
OUR_LOGGERS = ("rerank", "features")


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


class StoreOnce(argparse.Action):
    """An argparse action for an option given at most once: a repeat is an error, not a silent override."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice")
        setattr(namespace, self.dest, values)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rerank", description="Neural and n-gram features for Moses: score, rescore, tune, translate.")
    parser.add_argument("--version", action="version", version=f"rerank {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        summary = (module.__doc__ or "").strip().splitlines()[0]
        sub = subparsers.add_parser(name, help=summary, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    # Our progress and notes at INFO; other libraries' (matplotlib's font cache...) only from WARNING.
    logging.basicConfig(level=logging.WARNING, format="rerank: %(message)s", stream=sys.stderr, force=True)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        return args.run(args) or 0
    except RerankError as e:
        print(f"rerank: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("rerank: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rerank apply ... | head`
        sys.stderr.close()
        return 0


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (a plain kill, a scheduler's time limit) unwinds like an error: no partial outputs stay behind."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
