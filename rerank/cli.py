"""The ``rerank`` command: one entry point, one subcommand per module in :mod:`rerank.commands`.

Each command module has a one-line docstring (its help), ``add_arguments(parser)``,
``run(args) -> int`` and ``OUTPUTS``, the options that name files it writes (checked before it
runs), and imports torch only inside ``run``, so that ``rerank apply`` or
``rerank tune`` start fast. :func:`main` sets up logging and the SIGTERM handler once, for the
whole process; a :class:`~rerank.errors.RerankError` becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import ModuleType

from rerank import __version__
from rerank.commands import (
    align,
    apply,
    cut_nbest,
    evaluate,
    experiment,
    merge_nbest,
    merge_shards,
    oracle,
    score_nbest,
    score_table,
    train,
    translate,
    tune,
)
from rerank.errors import RerankError, plain
from rerank.formats.files import STDIO, check_writable

COMMANDS: dict[str, ModuleType] = {
    "score-nbest": score_nbest,
    "apply": apply,
    "evaluate": evaluate,
    "train": train,
    "tune": tune,
    "score-table": score_table,
    "translate": translate,
    "align": align,
    "merge-nbest": merge_nbest,
    "cut-nbest": cut_nbest,
    "merge-shards": merge_shards,
    "oracle": oracle,
    "experiment": experiment,
}

EXIT_USER_ERROR = 2
OUR_LOGGERS = ("rerank",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rerank", description="Neural and n-gram features for Moses: score, rescore, tune, translate.")
    parser.add_argument("--version", action="version", version=f"rerank {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        summary = (module.__doc__ or "").strip().splitlines()[0]
        sub = subparsers.add_parser(name, help=summary, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run, outputs=getattr(module, "OUTPUTS", ()))
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
        for dest in args.outputs:  # every output is checked before any work starts
            if getattr(args, dest, None) not in (None, STDIO):
                check_writable(getattr(args, dest))
        return args.run(args) or 0
    except RerankError as e:
        print(f"rerank: error: {plain(str(e))}", file=sys.stderr)
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
