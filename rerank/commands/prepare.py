"""Prepare a training corpus once: vocabularies and token ids in binary shards, for `rerank train` (data.prepared).

One streaming pass over a source and a target file (gzip read too) or over a Moses phrase table (its
distinct phrase pairs, Cho et al.'s way) counts the vocabularies and writes every pair as token ids
into memory-mapped shards with an index of offsets and a manifest (settings, line counts, SHA-256 of
every file). The directory appears only when complete. Then, in a training config:

    data: {prepared: DIR, valid: {source: ..., target: ...}}

`rerank train` given text prepares it itself into the model directory's data/; preparing once
serves several trainings on the same corpus. With --vocabularies the ids are those of a trained model (its
shortlists or subword models), for fine-tuning it on the data (training.init_from).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rerank.commands.arguments import positive_int
from rerank.config import with_overrides
from rerank.errors import RerankError
from rerank.models.config import SubwordConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", nargs="?", help="source-language text, one tokenized sentence a line")
    parser.add_argument("target", nargs="?", help="target-language text, line-aligned with the source")
    parser.add_argument("--phrase-table", help="a Moses phrase table: its distinct phrase pairs (instead of text)")
    parser.add_argument("-o", "--output-dir", required=True, help="the prepared directory (must not exist)")
    parser.add_argument("--src-vocab-size", type=positive_int, default=15000,
                        help="source shortlist: the most frequent words (default: %(default)s)")
    parser.add_argument("--trg-vocab-size", type=positive_int, default=15000,
                        help="target shortlist (default: %(default)s)")
    parser.add_argument("--max-length", type=positive_int, default=50,
                        help="pairs with a side longer than this many words are skipped (default: %(default)s)")
    parser.add_argument("--subwords", choices=["bpe", "unigram"],
                        help="learn sentencepiece subword units of this type in the pass (a model with model.subwords "
                             "of the same settings trains on them); the vocabulary sizes are then unused")
    parser.add_argument("--subword-vocab-size", type=positive_int, default=8000,
                        help="pieces per language with --subwords (default: %(default)s)")
    parser.add_argument("--vocabularies", metavar="MODEL_DIR",
                        help="the vocabularies (or subword models) of this trained model, for fine-tuning it "
                             "(training.init_from), in place of shortlists counted in the pass")
    parser.add_argument("--shard-pairs", type=positive_int, default=1_000_000,
                        help="about this many pairs a shard (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from rerank.training.prepare import PrepareSettings, prepare_parallel, prepare_phrase_table

    subwords = None if args.subwords is None else with_overrides(
        SubwordConfig(type=args.subwords), {"vocab_size": args.subword_vocab_size}, source="--subword-vocab-size")
    if args.vocabularies is not None:
        if subwords is not None:
            raise RerankError("--subwords: the model of --vocabularies has its own subword settings: give one of them")
        from rerank.models.checkpoint import load_vocabularies
        from rerank.models.config import read_model_config

        model = read_model_config(args.vocabularies)
        load_vocabularies(Path(args.vocabularies), model)  # checked before the pass
        subwords = model.subwords
    settings = PrepareSettings(args.src_vocab_size, args.trg_vocab_size, args.max_length, args.shard_pairs, subwords,
                               args.vocabularies)
    if args.phrase_table is not None:
        if args.source is not None:
            raise RerankError("give SOURCE TARGET or --phrase-table, not both")
        manifest = prepare_phrase_table(args.phrase_table, args.output_dir, settings)
    else:
        if args.target is None:
            raise RerankError("give SOURCE and TARGET, or --phrase-table")
        manifest = prepare_parallel(args.source, args.target, args.output_dir, settings)
    print(f"{args.output_dir}: {manifest['pairs']:,} pairs of {manifest['lines']:,} lines "
          f"({manifest['skipped_longer']:,} longer than {settings.max_length} words skipped) "
          f"in {len(manifest['shards'])} shards")
    return 0
