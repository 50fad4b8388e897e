"""Draw a model's attention over a sentence pair: source x target, as in Bahdanau et al. 2014, Fig. 3.

The source and target come from the command line or from line N of two files; without a
target, the source is translated by beam search and its translation drawn. Each row is one
target word (and </s>), each column one source word (and </s>); white is weight 1, black 0.
The image format follows the output's suffix (.png, .pdf, .svg ...).
"""

from __future__ import annotations

import argparse
import logging

from rerank.commands.arguments import positive_int

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output",)
INPUTS = ("model", "source_file", "target_file")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="DIR", help="model directory written by `rerank train`")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--source", metavar="TEXT", help="the tokenised source sentence")
    source.add_argument("--source-file", metavar="FILE", help="tokenised source text; its line --line is drawn")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--target", metavar="TEXT", help="the tokenised target sentence (default: translate)")
    target.add_argument("--target-file", metavar="FILE", help="tokenised target text; its line --line is drawn")
    parser.add_argument("--line", type=positive_int, metavar="N", help="line number (1-based) in the files")
    parser.add_argument("--beam", type=positive_int, metavar="K", help="beam size when translating (default 10)")
    parser.add_argument("-o", "--output", required=True, metavar="IMAGE", help="the figure: .png, .pdf, .svg ...")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")


def sentence_from(text: str | None, path: str | None, line: int | None, flag: str) -> list[str] | None:
    """The words of ``text``, or of line ``line`` of the file ``path``."""
    from rerank.errors import FormatError, RerankError
    from rerank.formats.files import display_name, read_lines

    if path is None:
        return None if text is None else text.split()
    if line is None:
        raise RerankError(f"{flag} needs --line: which line of {path} to draw")
    count = 0
    for count, content in read_lines(path):
        if count == line:
            return content.split()
    raise FormatError(display_name(path), None, f"at least {line} lines (--line {line})", got=f"{count} lines")


def run(args: argparse.Namespace) -> int:
    from rerank.errors import RerankError
    from rerank.evaluation.plots import draw_attention, image_format
    from rerank.formats.nbest import format_value
    from rerank.models.checkpoint import load_model
    from rerank.models.device import torch_device
    from rerank.models.vocab import EOS
    from rerank.search.alignment import attention_weights
    from rerank.search.beam import SearchConfig

    image_format(args.output)
    if args.line is not None and args.source_file is None and args.target_file is None:
        raise RerankError("--line goes with --source-file or --target-file")
    source = sentence_from(args.source, args.source_file, args.line, "--source-file")
    target = sentence_from(args.target, args.target_file, args.line, "--target-file")
    assert source is not None  # the argument group requires one of --source, --source-file
    device = torch_device(args.device)
    loaded = load_model(args.model, device)
    search = SearchConfig(beam_size=args.beam) if args.beam else SearchConfig()
    aligned = attention_weights(loaded, source, target, search, device)
    if target is None:
        logger.info("translation: %s", " ".join(aligned.target))
    unknown = [w for w in aligned.target if w not in loaded.trg_vocab] + \
        [w for w in source if w not in loaded.src_vocab]
    if unknown:
        logger.info("outside the model's vocabularies (read as <unk>): %s", " ".join(sorted(set(unknown))))
    logger.info("ln p(target | source) = %s", format_value(aligned.score))
    draw_attention(aligned.weights, [*source, EOS], [*aligned.target, EOS], args.output,
                   title=f"ln p = {format_value(aligned.score)}")
    logger.info("wrote %s", args.output)
    return 0
