"""Average a model's kept checkpoints (the last N, or the best N by validation perplexity) into a new model.

The model must have been trained with training.keep_checkpoints: N (its checkpoints/ directory holds
the weights of the last N validations and of the best N). The output directory gets the model's
config, vocabularies (and subword models) and, as model.pt, the element-wise mean of the chosen
checkpoints' weights; it scores, translates and rescores as any model directory does.
"""

from __future__ import annotations

import argparse
import logging

from rerank.commands.arguments import positive_int

INPUTS = ("model",)
logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="model directory trained with training.keep_checkpoints")
    parser.add_argument("output", help="new model directory for the averaged model")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--last", type=positive_int, metavar="N", help="average the last N checkpoints")
    which.add_argument("--best", type=positive_int, metavar="N",
                       help="average the N checkpoints of lowest validation perplexity")


def run(args: argparse.Namespace) -> int:
    from rerank.models.averaging import average_model

    if args.last:
        chosen = average_model(args.model, args.output, args.last, "last")
    else:
        chosen = average_model(args.model, args.output, args.best, "best")
    logger.info("%s: the mean of %d checkpoints of %s (updates %s)", args.output, len(chosen), args.model,
                ", ".join(map(str, chosen)))
    return 0
