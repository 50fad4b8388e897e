"""Draw a model's attention over a sentence pair: source x target, as in Bahdanau et al. 2014, Fig. 3.

The source and target come from the command line or from line N of two files; without a
target, the source is translated by beam search and its translation drawn. Each row is one
target word (and </s>), each column one source word (and </s>); white is weight 1, black 0.
The image format follows the output's suffix (.png, .pdf, .svg ...).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rerank.cli import positive_int

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

INCHES_PER_WORD = 0.32


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
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")


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


def draw_attention(weights: np.ndarray, source: Sequence[str], target: Sequence[str], path: str | os.PathLike,
                   title: str = "") -> None:
    """A grey-scale heatmap of ``weights`` (target x source) with the words along the axes, written atomically."""
    from matplotlib.figure import Figure

    from rerank.formats.files import atomic_binary_output

    figure = Figure(figsize=(INCHES_PER_WORD * len(source) + 1.5, INCHES_PER_WORD * len(target) + 1.5))
    axes = figure.add_subplot()
    axes.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
    axes.set_xticks(range(len(source)), labels=source, rotation=90)
    axes.set_yticks(range(len(target)), labels=target)
    axes.xaxis.tick_top()
    if title:
        axes.set_xlabel(title)
    figure.tight_layout()
    with atomic_binary_output(path) as out:
        figure.savefig(out, format=image_format(path), dpi=150)


def image_format(path: str | os.PathLike) -> str:
    """The image format matplotlib will write, from the suffix of ``path``."""
    from matplotlib.figure import Figure

    from rerank.errors import RerankError

    suffix = os.path.splitext(str(path))[1].lstrip(".").lower()
    formats = Figure().canvas.get_supported_filetypes()
    if suffix not in formats:
        raise RerankError(f"{path}: unknown image format {suffix!r}: use one of {', '.join(sorted(formats))}")
    return suffix


def run(args: argparse.Namespace) -> int:
    import torch

    from rerank.data import pad, to_ids
    from rerank.errors import RerankError
    from rerank.formats.nbest import format_value
    from rerank.models.checkpoint import load_model
    from rerank.models.seq2seq import shift_right, token_log_probs
    from rerank.search import SearchConfig, beam_search
    from rerank.translate import require_attention
    from rerank.vocab import EOS

    image_format(args.output)
    if args.line is not None and args.source_file is None and args.target_file is None:
        raise RerankError("--line goes with --source-file or --target-file")
    source = sentence_from(args.source, args.source_file, args.line, "--source-file")
    target = sentence_from(args.target, args.target_file, args.line, "--target-file")
    loaded = load_model(args.model, args.device)
    model = loaded.model
    require_attention(model, "rerank align")
    src, src_len = pad(to_ids([source], loaded.src_vocab))
    src = src.to(args.device)
    with torch.inference_mode():
        if target is None:
            config = SearchConfig(beam_size=args.beam) if args.beam else SearchConfig()
            [[best]] = beam_search(model, src, src_len, config)
            target = [loaded.trg_vocab.tokens[t] for t in best.tokens]
            weights, score = best.attention, best.score
            logger.info("translation: %s", " ".join(target))
        else:
            trg, _ = pad(to_ids([target], loaded.trg_vocab))
            trg = trg.to(args.device)
            logits, attention = model.teacher_forced(model.encode(src, src_len), shift_right(trg))
            weights, score = attention[0], float(token_log_probs(logits, trg).sum())
    unknown = [w for w in target if w not in loaded.trg_vocab] + [w for w in source if w not in loaded.src_vocab]
    if unknown:
        logger.info("outside the model's vocabularies (read as <unk>): %s", " ".join(sorted(set(unknown))))
    logger.info("ln p(target | source) = %s", format_value(score))
    draw_attention(weights.double().cpu().numpy(), [*source, EOS], [*target, EOS], args.output,
                   title=f"ln p = {format_value(score)}")
    logger.info("wrote %s", args.output)
    return 0
