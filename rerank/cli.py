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
import sys
from collections.abc import Sequence

from rerank import __version__
from rerank.errors import RerankError

COMMANDS = {
    "score-nbest": "rerank.commands.score_nbest",
    "apply": "rerank.commands.apply",
    "evaluate": "rerank.commands.evaluate",
    "train": "rerank.commands.train",
}

EXIT_USER_ERROR = 2


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
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="rerank: %(message)s", stream=sys.stderr, force=True)
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


if __name__ == "__main__":
    sys.exit(main())
