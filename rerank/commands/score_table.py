"""Append a neural model's p(target | source) to every phrase pair of a Moses phrase table.

The new value, last in the scores field (field 3), is p(target | source) of the whole phrase pair,
``</s>`` included, by forced decoding with an RNN encoder-decoder or RNNsearch model (Cho et al.
2014, Sec. 4.1). With --channel the model is a target-to-source one (fr->en for an en->fr table) and
the value is p(source | target), the other direction of Moses' own table; with --per-word it is the
probability per scored word, p^(1/(n+1)) for n words and ``</s>``. Moses reads max(ln x, -100) for
each phrase-table score x, so the value is written as exp(ln p) floored at exp(-100) = 3.72008e-44:
Moses reads about -100 for it, as it would have anyway, and the value is never 0, whose log is -inf for
the other tools that read tables. Every other byte of each line stays as it was, and the lines keep
their order. The table is streamed: memory stays flat whatever its size.

With several --model directories the value is the ensemble's p(target | source): exp of the mean of the
models' ln p (the mean of their per-token log-probabilities, as `rerank translate --model A B C` searches
with them).

With --feature YAML in place of --model, the value is a feature's, as score-nbest's configs give it: a
pretrained model's (kind hf or ctranslate2: see docs/guide/pretrained-models.md) or an nmt feature's,
its ln p(target | source) (or, with channel: true, ln p(source | target)), one value.

With --moses-ini, a moses.ini is also written in which the table has one more feature
(num-features), one more weight (--weight) and the new table as its path.

With --shard I/N only part I of N of the table is scored, into -o and its manifest -o.shard.yaml;
`rerank merge-shards` joins the N parts (and writes the moses.ini) into the table an unsharded run
writes, byte for byte. A shard holds whole segments of about 4096 source phrases (cut where a source
phrase's CRC-32 is a multiple of 4096), which the scorer's windows never cross, sharded or not: the
pairs scored together, and so the float32 values, are the same.

With --ray the pairs are scored by a pool of Ray workers (the ray extra), on this machine
(--ray local) or on a running cluster (--ray ADDRESS; the table's path must be readable from every
node), each loading the model once; the output is the same, byte for byte (see docs/guide/scaling.md).
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING

from rerank.commands.arguments import (
    StoreOnce,
    add_shard_argument,
    check_moses_ini_options,
    finite_float,
    positive_float,
    positive_int,
)
from rerank.formats.moses_ini import TRAIN_MODEL_WEIGHT

if TYPE_CHECKING:
    from rerank.scoring.ray_table import RayCluster

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output", "moses_ini_out")
INPUTS = ("input", "model", "feature", "moses_ini")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="TABLE", help="Moses phrase table, text (.gz allowed; - for stdin)")
    parser.add_argument("-o", "--output", required=True, action=StoreOnce, metavar="OUT",
                        help="the table with the added score (.gz for gzip; - for stdout)")
    scorer = parser.add_mutually_exclusive_group(required=True)
    scorer.add_argument("--model", action=StoreOnce, nargs="+", metavar="DIR",
                        help="model directory written by rerank train; several: their ensemble's score, the mean of "
                             "their ln p (their vocabularies may differ; their directions may not)")
    scorer.add_argument("--feature", action=StoreOnce, metavar="YAML",
                        help="a file holding one feature (kind hf, ctranslate2 or nmt, and its keys) whose ln p is "
                             "the value")
    parser.add_argument("--encoding", default="utf-8", help="of the table (default: %(default)s)")
    parser.add_argument("--channel", action="store_true",
                        help="the model translates the table's target language into its source language: the "
                             "new column is p(source | target)")
    parser.add_argument("--per-word", action="store_true",
                        help="the probability per scored word, exp(ln p / (words + 1)), instead of the "
                             "whole phrase's")
    add_shard_argument(parser, "lines", input_option="input", same_output=("threads", "table", "weight", "overlap"))
    add_moses_ini_arguments(parser)
    speed = parser.add_argument_group("speed and memory")
    speed.add_argument("--max-tokens", type=positive_int, action=StoreOnce, metavar="N",
                       help="padded target tokens per batch (default 4096); bounds memory")
    speed.add_argument("--window", type=positive_int, action=StoreOnce, metavar="N",
                       help="phrase pairs sorted and deduplicated together (default 8192)")
    speed.add_argument("--threads", type=positive_int, action=StoreOnce, metavar="N",
                       help="CPU threads (default: all cores)")
    speed.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")
    speed.add_argument("--no-overlap", dest="overlap", action="store_false",
                       help="read, parse and write the table in the thread that scores, between batches, instead "
                            "of in threads beside it (the output is the same)")
    speed.add_argument("--precision", choices=("fp32", "int8"), action=StoreOnce,
                       help="the model's matrix multiplies: fp32 (default), or int8 weights quantized per output "
                            "row, on the CPU (faster, scores within a few hundredths of a nat)")
    ray = parser.add_argument_group("Ray cluster")
    ray.add_argument("--ray", nargs="?", const="", action=StoreOnce, metavar="ADDRESS",
                     help="score on Ray workers: on the cluster at ADDRESS (host:6379, ray://host:10001), 'local' "
                          "for a Ray instance on this machine; without ADDRESS, the cluster RAY_ADDRESS names or a "
                          "local one")
    ray.add_argument("--ray-workers", type=positive_int, action=StoreOnce, metavar="N",
                     help="scoring workers, each loading the model once (default: as many as the cluster's CPUs, "
                          "or GPUs, hold)")
    ray.add_argument("--ray-worker-cpus", type=positive_float, action=StoreOnce, metavar="C",
                     help="CPUs (and torch threads) per worker (default 1)")
    ray.add_argument("--ray-worker-gpus", type=positive_float, action=StoreOnce, metavar="G",
                     help="GPUs per worker, which then scores on its GPU (default: none)")


def add_moses_ini_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the moses.ini written with the table (read by
    :func:`~rerank.scoring.table.table_moses_ini`)."""
    ini = parser.add_argument_group("moses.ini")
    ini.add_argument("--moses-ini", action=StoreOnce, metavar="IN", help="the configuration that uses TABLE")
    ini.add_argument("--moses-ini-out", action=StoreOnce, metavar="OUT", help="where to write it with the new score")
    ini.add_argument("--table", default="TranslationModel0", metavar="NAME",
                     help="the table's feature name in IN (default: %(default)s); in an old-format moses.ini, "
                          "its path as [ttable-file] gives it")
    ini.add_argument("--weight", type=weight_argument, default=TRAIN_MODEL_WEIGHT, metavar="W",
                     help="initial weight of the new score, to be tuned (default: %(default)s, what "
                          "train-model.perl gives each phrase-table score); 'auto': the weight whose "
                          "contribution spreads over the table's lines as much as the table's other scores' do on "
                          "average, mean(|w_i| sd_i) / sd_new")


def weight_argument(text: str) -> float | str:
    """An argparse type: a finite number, or ``auto``."""
    return text if text == "auto" else finite_float(text)


def run(args: argparse.Namespace) -> int:
    import contextlib

    import torch

    from rerank.config import with_overrides
    from rerank.errors import RerankError
    from rerank.formats.files import STDIO, committed_together, display_name, when_written
    from rerank.formats.phrase_table import read_phrase_table
    from rerank.formats.shards import open_shard, table_segments, write_manifests
    from rerank.formats.streams import peek
    from rerank.models.device import torch_device
    from rerank.scoring.pairs import EnsembleScorer, ScoringConfig
    from rerank.scoring.table import Column, Spread, score_phrase_table, starting_weight, table_moses_ini

    check_moses_ini_options(args)
    spec = None  # the feature of --feature, read and checked before anything loads
    if args.feature is not None:
        from rerank.features.phrase_table import read_table_feature

        spec = read_table_feature(args.feature, {"max_tokens": args.max_tokens, "precision": args.precision,
                                                 "threads": args.threads,
                                                 "device": None if args.device == "cpu" else args.device})
        if args.channel or args.per_word:
            raise RerankError(f"--{'channel' if args.channel else 'per-word'} is for --model: with --feature, the "
                              "feature's config says what it scores (channel: true)")
    if args.moses_ini is not None and args.output == STDIO:
        raise RerankError("--moses-ini needs -o to be a file: the new moses.ini points to it")
    cluster = ray_cluster(args)
    reader = None
    if args.shard is not None:
        if args.moses_ini is not None:
            raise RerankError("--moses-ini with --shard: the moses.ini points to the whole table; give "
                              "--moses-ini and --moses-ini-out to `rerank merge-shards`, which writes it")
        reader = open_shard(args, table_segments())
    if args.weight == "auto" and args.moses_ini is None:
        raise RerankError("--weight auto is the new score's weight in the moses.ini: give --moses-ini and "
                          "--moses-ini-out")
    if args.weight == "auto" and cluster is not None:
        raise RerankError("--weight auto with --ray: the spread of the scores is measured where the table is "
                          "scored; give a number")
    table = display_name(args.input)
    column = Column(channel=args.channel, per_word=args.per_word)
    # the table and its moses.ini appear together (a shard's manifest goes after its table)
    with committed_together() if reader is None else contextlib.nullcontext():
        with reader.file_line_numbers() if reader is not None else contextlib.nullcontext():
            # a bad first line fails before loading
            first, entries = peek(read_phrase_table(args.input, args.encoding, reader))
            num_scores = len(first.scores) if first is not None else None
            ini = None
            if args.moses_ini is not None:
                ini = table_moses_ini(args.moses_ini, args.moses_ini_out, args.table, num_scores, args.output,
                                      0.0 if args.weight == "auto" else args.weight)
            if args.threads:
                torch.set_num_threads(args.threads)
            spread = Spread()
            scoring = with_overrides(ScoringConfig(), {"max_tokens": args.max_tokens, "window": args.window,
                                                       "precision": args.precision})
            if spec is not None:
                from rerank.features.phrase_table import FeatureTableScorer

                spread = score_phrase_table(entries, FeatureTableScorer(spec.build(), scoring), table=args.input,
                                            output=args.output, encoding=args.encoding,
                                            show_progress=not args.quiet, count=reader is None, overlap=args.overlap)
            elif cluster is not None and num_scores is not None:
                from rerank.scoring.ray_table import score_phrase_table_ray

                score_phrase_table_ray(args.input, args.model[0], output=args.output, cluster=cluster,
                                       num_scores=num_scores, scoring=scoring, encoding=args.encoding,
                                       show_progress=not args.quiet, column=column)
            else:
                scorer = EnsembleScorer.load_all(args.model, torch_device(args.device), scoring)
                spread = score_phrase_table(entries, scorer, table=args.input, output=args.output,
                                            encoding=args.encoding, show_progress=not args.quiet,
                                            count=reader is None, overlap=args.overlap, column=column)
        if reader is not None:
            write_manifests(args, reader, {"output": "phrase table"})
            if first is None:
                logger.info("%s: shard %s of %s has no lines: wrote an empty table", args.output, args.shard, table)
        elif first is None:
            when_written(args.output, lambda: logger.warning("%s is empty: wrote an empty table", table))
        if ini is not None:
            weight = args.weight
            if weight == "auto":
                weight = starting_weight(args.moses_ini, args.table, spread)
                ini = table_moses_ini(args.moses_ini, args.moses_ini_out, args.table, num_scores, args.output, weight)
            ini.write(args.moses_ini_out)
            scores = num_scores + 1 if num_scores is not None else "one more"
            when_written(args.moses_ini_out, lambda: logger.info(  # once it is there, with the table
                "%s: %s now has %s scores, the last (%s) weighted %g, read from %s", args.moses_ini_out, args.table,
                scores, column.describe() if spec is None else f"{spec.label}'s ln p", weight,
                os.path.abspath(args.output)))
    return 0


def ray_cluster(args: argparse.Namespace) -> RayCluster | None:
    """The Ray workers that --ray and its options ask for (None without --ray), checked."""
    from rerank.errors import RerankError
    from rerank.formats.files import STDIO
    from rerank.scoring.ray_table import RayCluster

    options = [name for name in ("ray_workers", "ray_worker_cpus", "ray_worker_gpus") if getattr(args, name)]
    if args.ray is not None and args.feature is not None:
        raise RerankError("--ray scores with a model of rerank train's (--model), not with --feature")
    if args.ray is None:
        if options:
            raise RerankError(f"--{options[0].replace('_', '-')} is for --ray")
        return None
    if args.shard is not None:
        raise RerankError("--ray with --shard: give one; --ray scores the whole table on the cluster's workers")
    if len(args.model) > 1:
        raise RerankError("--ray scores with one model: give one --model, or score the ensemble without --ray")
    if args.input == STDIO:
        raise RerankError("--ray reads the table in the cluster: give it as a file, at a path every node can read")
    if args.device != "cpu":
        raise RerankError("--device with --ray: give --ray-worker-gpus for workers that score on GPUs")
    return RayCluster(args.ray or None, args.ray_workers, args.ray_worker_cpus or 1.0, args.ray_worker_gpus or 0.0)
