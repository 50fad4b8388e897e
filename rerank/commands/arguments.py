"""Argument types and actions shared by the commands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from rerank.errors import RerankError

_Number = TypeVar("_Number", int, float)
_Value = TypeVar("_Value")


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = _parsed(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a number that is not NaN or infinite."""
    value = _parsed(text, float, "a number")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number above 0."""
    value = _parsed(text, float, "a positive number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _parsed(text: str, parse: Callable[[str], _Number], expected: str) -> _Number:
    """``parse(text)``, or the argparse error "expected ``expected``" where the text is not such a number."""
    try:
        return parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


class StoreOnce(argparse.Action):
    """An argparse action for an option given at most once: a repeat is an error, not a silent override."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice")
        setattr(namespace, self.dest, values)


def keyed_once(pairs: Sequence[tuple[str, _Value]], option: str) -> dict[str, _Value]:
    """The ``(KEY, VALUE)`` pairs of a repeatable option (``--tie NAME=...``, ``--choose KEY=...``) as a mapping,
    each KEY given at most once: a repeat is an error, not the last one silently winning."""
    given: dict[str, _Value] = {}
    for key, value in pairs:
        if key in given:
            raise RerankError(f"{option} {key} given twice: give each once (with all its values)")
        given[key] = value
    return given


def check_moses_ini_options(args: argparse.Namespace) -> None:
    """``--moses-ini IN`` (the moses.ini that uses a phrase table) and ``--moses-ini-out OUT`` (where its copy
    with the table's new score goes) come together or not at all."""
    if (args.moses_ini is None) != (args.moses_ini_out is None):
        raise RerankError("give both --moses-ini and --moses-ini-out, or neither")


def add_shard_argument(parser: argparse.ArgumentParser, unit: str, counting: str = "no counting pass", *,
                       input_option: str, same_output: Sequence[str] = ()) -> None:
    """``--shard I/N``: the command does only part I of N of its input (``input_option``, the dest of its
    option; ``unit`` says what the parts hold, ``counting`` what is read before the part). Every other option
    is recorded in the shard manifests, as one that may change the output, but those of ``same_output``
    (threads, say)."""
    parser.add_argument(
        "--shard", type=shard_argument, metavar="I/N",
        help=f"process only part I of N of the input (1-based: 1/8 ... 8/8), a contiguous range of its {unit} "
             f"found from the file's size ({counting}); -o names this part's output, and OUT.shard.yaml "
             "beside it is what `rerank merge-shards` needs to join the parts")
    parser.set_defaults(shard_input=input_option, shard_same_output=tuple(same_output))


def shard_argument(text: str) -> object:
    """An argparse type: a :class:`~rerank.formats.shards.Shard` from ``I/N``."""
    from rerank.formats.shards import Shard

    try:
        return Shard.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
