"""Translate tokenised text with a trained model: batched beam search, 1-best or Moses n-best output.

Reads one sentence per line (stdin by default) and writes one translation per line, or with
--nbest N an n-best list that `rerank score-nbest` and `rerank tune` read as they read Moses':

    0 ||| a man in an orange hat ||| RNNsearch0= -4.21 ||| -4.21

Hypotheses are ranked by ln p divided by the length penalty; the feature is ln p itself, </s>
included, and the total is that feature with weight 1.

With --weights FILE (YAML, `RNNsearch0: 1.0` and `WP0: -0.2`, or a moses.ini [weight] section)
the search ranks by the log-linear score w · ln p + w_WP · WP0, where WP0 = -(number of words) as
Moses' word penalty (a negative weight is a bonus per word); a missing weight is 1 for ln p and 0
for WP0, and ln p's must not be 0. Every n-best line then carries both features and their
weighted total, so that `rerank tune --decoder` (or Moses' mert) can tune them:

    0 ||| a man in an orange hat ||| RNNsearch0= -4.21 WP0= -6 ||| -3.01

With --r2l-model D [E ...] (models trained with reverse_target) the search keeps the beam's K
hypotheses of each sentence and reranks them by (1 - W) ln p / lp + W ln p_R2L / lp, lp the length
penalty of |Y| (words and </s>; 1 for none), W the --r2l-weight chosen on held-out data; the n-best list
gets the right-to-left models' ln p as a second feature (R2L0) and the combined score as its total:

    0 ||| a man in an orange hat ||| RNNsearch0= -4.21 R2L0= -4.80 ||| -0.64

--alignments and --attention write the attention of each sentence's best hypothesis: hard `i-j`
pairs (source-target, 0-based) per line, or the soft weights as JSON lines. Progress goes to stderr.

With --shard I/N only part I of N of the source lines is translated (n-best ids and attention ids
stay those of the whole file), into each output and its manifest OUTPUT.shard.yaml; `rerank
merge-shards` joins the N parts of each output into what an unsharded run writes, byte for byte. A
shard holds whole blocks of 20 x --batch-size lines (1,000 by default), the sentences sorted and
searched together, sharded or not: the float32 scores are the same.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from rerank.commands.arguments import add_shard_argument, finite_float, positive_float, positive_int

if TYPE_CHECKING:
    from rerank.search.beam import SearchConfig
    from rerank.search.right_to_left import RightToLeft

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output", "alignments", "attention")
INPUTS = ("input", "model", "r2l_model", "weights", "dictionary", "phrase_table")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, nargs="+", metavar="DIR",
                        help="model directory written by `rerank train`; several: search with their ensemble "
                             "(the mean of their log-probabilities; they must share their vocabularies)")
    parser.add_argument("-i", "--input", default="-", metavar="SRC",
                        help="tokenised source text, one sentence per line (.gz allowed; default: stdin)")
    parser.add_argument("-o", "--output", default="-", metavar="OUT",
                        help="translations, or the n-best list with --nbest (default: stdout)")
    search = add_search_arguments(parser, nbest="write the N best hypotheses (N <= K) as a Moses n-best list "
                                                "instead of text")
    search.add_argument("--weights", metavar="FILE",
                        help="log-linear weights of the model's ln p (its --label) and of WP0 = -(words), YAML or "
                             "moses.ini: rank by their weighted sum instead of a length penalty (default 1 and 0)")
    search.add_argument("--batch-tokens", type=positive_int, metavar="N",
                        help="instead of --batch-size sentences, as many as fit in N padded source tokens (sentences "
                             "x the longest, </s> included), from the --batch-size x 20 sorted together; fills a GPU")
    add_right_to_left_arguments(parser, "; the n-best list gets their R2L0 feature")
    output = parser.add_argument_group("output")
    output.add_argument("--label", metavar="LABEL",
                        help="feature label of the n-best list (default RNN0 for encdec models, RNNsearch0 for "
                             "rnnsearch, R2L0 for a right-to-left model)")
    output.add_argument("--alignments", metavar="FILE", help="hard alignments of each best hypothesis: i-j per line")
    output.add_argument("--attention", metavar="FILE",
                        help="soft alignments of each best hypothesis: a JSON object per line (id, source, "
                             "target, attention: one row per target word and </s>)")
    unk = parser.add_argument_group("UNK replacement")
    unk.add_argument("--unk-replace", action="store_true",
                     help="replace each <unk> by the source word it attends to most, or its dictionary translation")
    words = unk.add_mutually_exclusive_group()
    words.add_argument("--dictionary", metavar="FILE", help="'source translation' per line")
    words.add_argument("--phrase-table", metavar="FILE",
                       help="Moses phrase table: each one-word source phrase's most probable one-word target by p(e|f)")
    device = parser.add_argument_group("device")
    device.add_argument("--device", default="cpu", help="torch device (default cpu)")
    device.add_argument("--threads", type=positive_int, metavar="N", help="CPU threads (default: torch's)")
    device.add_argument("--precision", choices=("fp32", "int8"), default="fp32",
                        help="the models' matrix multiplies: fp32 (default), or int8 weights quantized per output "
                             "row, on the CPU")
    device.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="format and write the outputs in the thread that searches, between batches, instead of "
                             "in a thread beside it (the output is the same)")
    add_shard_argument(parser, "lines", "the lines before it are counted, for the sentence ids", input_option="input",
                       same_output=("threads", "overlap"))


def add_search_arguments(parser: argparse.ArgumentParser, nbest: str) -> argparse._ArgumentGroup:
    """The beam search's options (read by :func:`search_config`), ``nbest`` the help of --nbest; their group."""
    search = parser.add_argument_group("search")
    search.add_argument("--beam", type=positive_int, metavar="K", help="beam size; 1 is greedy (default 10)")
    search.add_argument("--nbest", type=positive_int, metavar="N", help=nbest)
    search.add_argument("--length-penalty", choices=["none", "average", "wu"],
                        help="rank by ln p (none), ln p per word (average) or ln p / lp with "
                             "lp = ((5 + |Y|) / 6)^alpha (wu, Wu et al. 2016) (default none)")
    search.add_argument("--alpha", type=positive_float, help="alpha of the wu length penalty (default 0.6)")
    search.add_argument("--max-ratio", type=positive_float, metavar="R",
                        help="at most ceil(R x source words) output words (default 2.0)")
    search.add_argument("--batch-size", type=positive_int, metavar="B",
                        help="sentences searched together (default 50)")
    parser.set_defaults(weights=None)
    return search


def add_right_to_left_arguments(parser: argparse.ArgumentParser, outputs: str = "") -> None:
    """--r2l-model and --r2l-weight (read by :func:`right_to_left_models`); ``outputs`` ends --r2l-model's help."""
    both = parser.add_argument_group("right-to-left reranking")
    both.add_argument("--r2l-model", nargs="+", metavar="DIR",
                      help="right-to-left models (reverse_target): rerank each sentence's K hypotheses by (1 - W) "
                           f"ln p / lp + W ln p_R2L / lp, lp the length penalty (their ensemble's mean ln p{outputs})")
    both.add_argument("--r2l-weight", type=finite_float, metavar="W",
                      help="the right-to-left models' weight W, from 0 to 1, chosen on held-out data (default 0.5)")


def search_config(args: argparse.Namespace) -> SearchConfig:
    """The search options given on the command line, over :class:`~rerank.search.beam.SearchConfig`'s defaults."""
    from rerank.config import with_overrides
    from rerank.errors import RerankError
    from rerank.search.beam import SearchConfig

    if args.alpha is not None and args.length_penalty != "wu":
        raise RerankError("--alpha is the parameter of --length-penalty wu")
    if args.weights and args.length_penalty not in (None, "none"):
        raise RerankError(f"--weights and --length-penalty {args.length_penalty} do not combine: "
                          "the weight of the word penalty WP0 takes the length penalty's place")
    beam = args.beam or SearchConfig().beam_size
    if args.nbest is not None and args.nbest > beam:
        raise RerankError(f"--nbest {args.nbest} needs a beam at least as wide, not {beam}: give --beam {args.nbest}")
    return with_overrides(SearchConfig(), {"beam_size": args.beam, "nbest": args.nbest, "max_ratio": args.max_ratio,
                                           "length_penalty.kind": args.length_penalty,
                                           "length_penalty.alpha": args.alpha})


def check_options(args: argparse.Namespace) -> None:
    from rerank.errors import RerankError

    if (args.dictionary or args.phrase_table) and not args.unk_replace:
        raise RerankError("--dictionary and --phrase-table are for --unk-replace")
    if args.r2l_model and args.weights:
        raise RerankError("--r2l-model with --weights: the right-to-left models rerank by the length penalty's "
                          "score; give --length-penalty instead of --weights")


def right_to_left_models(args: argparse.Namespace) -> RightToLeft | None:
    """The --r2l-model models and their weight; every --model must read left to right and every --r2l-model right
    to left (read from their configs, before any model is loaded)."""
    from rerank.errors import RerankError
    from rerank.features.nmt import NeuralTranslationModel
    from rerank.search.right_to_left import DEFAULT_WEIGHT, RightToLeft, check_directions, check_weight

    if args.r2l_weight is not None and not args.r2l_model:
        raise RerankError("--r2l-weight is the weight of the --r2l-model models")
    if not args.r2l_model:
        return None
    weight = DEFAULT_WEIGHT if args.r2l_weight is None else args.r2l_weight
    try:
        check_weight(weight)
    except ValueError as e:
        raise RerankError(f"--r2l-weight: {e}") from None
    check_directions(args.model, args.r2l_model)
    config = NeuralTranslationModel.Config(model=tuple(args.r2l_model), device=args.device, precision=args.precision)
    return RightToLeft(NeuralTranslationModel(config), NeuralTranslationModel.label(config), weight)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from rerank.errors import RerankError
    from rerank.formats.dictionaries import phrase_table_dictionary, read_dictionary
    from rerank.formats.files import committed_together, display_name, read_lines
    from rerank.formats.nbest import check_label
    from rerank.formats.shards import line_blocks, open_shard, write_manifests
    from rerank.models.checkpoint import load_model
    from rerank.models.config import default_label
    from rerank.models.device import torch_device, torch_threads
    from rerank.models.ensemble import ensemble
    from rerank.search.alignment import require_attention_for
    from rerank.search.translate import (
        BATCH_SIZE,
        SORT_WINDOW,
        TranslationOutputs,
        check_source_lengths,
        read_feature_weights,
        translate_file,
    )

    config = search_config(args)
    check_options(args)
    right_to_left = right_to_left_models(args)
    if right_to_left is not None:  # every hypothesis of the beam, reranked
        config = dataclasses.replace(config, nbest=config.beam_size)
    try:
        label = check_label(args.label) if args.label is not None else None
    except ValueError as e:
        raise RerankError(f"--label: {e}") from None
    first_id = 0  # of the first sentence
    if args.shard is None:
        sentences = [line.split() for _, line in read_lines(args.input)]
    else:
        # whole blocks of the sentences translated together (batch size x SORT_WINDOW), as an unsharded run has them
        block = (args.batch_size or BATCH_SIZE) * SORT_WINDOW
        reader = open_shard(args, line_blocks(block), numbered=True)
        with reader.file_line_numbers():
            sentences = [line.split() for _, line in reader.lines()]
        first_id = reader.lines_before() if sentences else 0
    device = torch_device(args.device)
    loaded = ensemble([load_model(directory, device, precision=args.precision) for directory in args.model])
    label = label or default_label(loaded.config)
    if args.weights:
        config = dataclasses.replace(config, weights=read_feature_weights(args.weights, label))
    require_attention_for(loaded.model, alignments=bool(args.alignments), attention=bool(args.attention),
                          unk_replace=args.unk_replace)
    check_source_lengths(sentences, loaded.model, args.input, first_line=first_id + 1)
    dictionary = None  # no UNK replacement
    if args.unk_replace:
        dictionary = read_dictionary(args.dictionary) if args.dictionary else \
            phrase_table_dictionary(args.phrase_table) if args.phrase_table else {}
    if not sentences and args.shard is None:
        logger.warning("%s is empty: nothing to translate", display_name(args.input))
    elif not sentences:
        logger.info("shard %s of %s has no lines: nothing to translate", args.shard, display_name(args.input))
    batch_size = args.batch_size or BATCH_SIZE
    ranking = (f"{label} weight {config.weights.model:g}, WP0 weight {config.weights.word_penalty:g}"
               if config.weights else f"{config.length_penalty.kind} length penalty")
    if right_to_left is not None:
        ranking += f", reranked with {' + '.join(args.r2l_model)} (weight {right_to_left.weight:g})"
    batches = f"batches of {batch_size}" if args.batch_tokens is None else \
        f"batches of {args.batch_tokens} source tokens (sorted {batch_size * SORT_WINDOW} together)"
    logger.info("translating %d sentences with %s: beam %d, %s, %s", len(sentences), " + ".join(args.model),
                config.beam_size, ranking, batches)
    outputs = TranslationOutputs(args.output, nbest=bool(args.nbest), alignments=args.alignments,
                                 attention=args.attention,
                                 nbest_size=None if right_to_left is None else args.nbest or 1)
    with torch_threads(args.threads), committed_together():  # the outputs appear together
        translate_file(loaded, sentences, outputs, config, label=label, dictionary=dictionary,
                       batch_size=batch_size, device=args.device, first_id=first_id, batch_tokens=args.batch_tokens,
                       show_progress=not args.quiet, overlap=args.overlap, right_to_left=right_to_left)
    if args.shard is not None:
        write_manifests(args, reader, {"output": "n-best list" if args.nbest else "translations",
                                       "alignments": "alignments", "attention": "attention"}, batch_size=batch_size)
    return 0
