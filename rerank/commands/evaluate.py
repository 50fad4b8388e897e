"""Score translations: corpus BLEU and chrF (sacrebleu, with signatures) and BLEU by source length.

Each HYP is one system's output, one line per sentence, named by its file name or as NAME=PATH.
Every file must have as many lines as the first HYP. With --source, BLEU is also reported for
buckets of source-sentence length (--buckets 10: 1-10, 11-20, ... words; --buckets quintiles:
five buckets of about equal size), and --plot draws it, one line per system.

A warning where a system's text and the references are tokenized differently (Moses' ``canapé .``,
``l' homme`` against ``canapé.``, ``l'homme``) or differ in Moses' escapes (``&apos;``): BLEU would
compare different tokens (on the shipped sample, --tokenize none gives 41.75 instead of 60.60). A warning too
where one is lowercased and the other cased (Moses' lowercased 1-best of Multi30k's test set against the raw
references: 38.32 instead of 56.12), but with --lowercase; and where the references look unrelated to the
system's text: another set's references, or a file shifted by a line (a hypothesis shares hardly more words
with its own reference line than with other lines').
"""

from __future__ import annotations

import argparse
import os
import sys


def bucket_scheme(text: str) -> str:
    """An argparse type for --buckets."""
    from rerank.evaluation.metrics import check_bucket_scheme

    try:
        return check_bucket_scheme(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("plot", "json")
INPUTS = ("systems", "references", "source")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("systems", nargs="+", metavar="HYP", help="translations, one per line: PATH or NAME=PATH")
    parser.add_argument("-r", "--reference", action="append", required=True, metavar="REF", dest="references",
                        help="reference translations; repeat for several references")
    parser.add_argument("--source", metavar="SRC", help="source text, for BLEU by source length")
    parser.add_argument("--buckets", type=bucket_scheme, default="10", metavar="N|quintiles",
                        help="length buckets: a width in words (default 10), or quartiles, quintiles, deciles")
    parser.add_argument("--tokenize", metavar="TOK",
                        help="sacreBLEU's BLEU tokenizer: none for text that is already tokenized (as Moses' "
                             "output usually is, and as `rerank tune` counts), 13a (the default, for detokenized "
                             "text; unless given, a warning where the text looks tokenized), intl, char, ...")
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU and chrF")
    parser.add_argument("--plot", metavar="FILE.png", help="plot BLEU by source length (needs --source)")
    parser.add_argument("--json", metavar="FILE", help="also write the scores as JSON (- for stdout, instead "
                                                       "of the table)")


def parse_system(text: str) -> tuple[str, str]:
    """``NAME=PATH`` or ``PATH`` (named by its file name) as ``(name, path)``; an existing file wins."""
    name, sep, path = text.partition("=")
    if sep and name and path and not os.path.exists(text):
        return name, path
    return os.path.basename(text) or text, text


def run(args: argparse.Namespace) -> int:
    from rerank.errors import RerankError
    from rerank.evaluation.metrics import evaluate, format_evaluation, write_json
    from rerank.evaluation.plots import plot_bucket_bleu
    from rerank.formats.files import committed_together

    systems = [parse_system(text) for text in args.systems]
    names = [name for name, _ in systems]
    if len(set(names)) < len(names):
        raise RerankError(f"two systems named {max(names, key=names.count)!r}: name them as NAME=PATH")
    if args.plot and not args.source:
        raise RerankError("--plot draws BLEU by source length: give --source")
    evaluation = evaluate(systems, args.references, source=args.source, buckets=args.buckets,
                          tokenize=args.tokenize, lowercase=args.lowercase)
    if args.json != "-":
        sys.stdout.write(format_evaluation(evaluation))
    with committed_together():
        if args.json:
            write_json(evaluation, args.json)
        if args.plot:
            plot_bucket_bleu(evaluation, args.plot)
    return 0
