"""Append feature values (LM, word and UNK penalties, ...) to an n-best list's features field.

Each hypothesis gets "Label= v ..." at the end of field 3 ("LM1= -41.3 WP1= -11 UNK1= 0"); every
other byte of the line stays as it was, so Moses' tools read the result as they read the input.
The features come from a YAML config (--config configs/rescoring/rescore-neural.yaml) and from the flags
below, which add to the config's list (--model DIR: a neural model's ln p(hypothesis | source), labelled
RNN0 or RNNsearch0, or --model-label NAME, one per --model: a list that `rerank translate` wrote holds
RNNsearch0 already). With --source, n-best ids must be below its number of lines.

With --shard I/N only part I of N of the n-best list is scored, into -o and its manifest
-o.shard.yaml; `rerank merge-shards` joins the N parts into the list an unsharded run writes, byte
for byte. A shard holds whole blocks of --batch-sentences sentence ids (0-63, 64-127, ...), which
are scored together, sharded or not: the neural features' float32 values are the same.

Beside -o OUT (a file), OUT.features.yaml records what each feature was computed from: its kind and
options, the SHA-256 of each file it reads (language model, model weights, word list) and of the
source; the features of the input list's own record are carried over. Move or copy it with the list.

With --reuse SCORED (a list of the same source scored with the same features), a hypothesis SCORED has
(same sentence id, same words) takes its values from there instead of being scored again: the union
of Moses' list with RNNsearch's, with Moses' list scored already, scores only RNNsearch's new
hypotheses. SCORED's record must say that each feature it has was computed as now (same source, same
model weights, same LM, same options): a list scored otherwise is refused, before any model loads.
--reuse-unchecked SCORED takes the values of a list without a record (scored by an older rerank) as
they are. A list feature (mbr), whose values depend on the whole list, is computed anew.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from rerank.commands.arguments import StoreOnce, add_shard_argument, positive_int

if TYPE_CHECKING:
    from rerank.features.registry import FeatureSpec

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output",)
INPUTS = ("nbest", "source", "config", "model", "lm", "unk_vocab", "unk_corpus", "reuse", "reuse_unchecked")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nbest", metavar="NBEST", help="Moses n-best list (.gz allowed; - for stdin)")
    parser.add_argument("-o", "--output", default="-", metavar="OUT",
                        help="n-best list with the new features (.gz for gzip; default: stdout)")
    parser.add_argument("--source", action=StoreOnce, metavar="SRC",
                        help="source text, one sentence per line; n-best ids must be below its line count")
    parser.add_argument("--config", action=StoreOnce, metavar="YAML",
                        help="features to add, e.g. configs/rescoring/rescore.yaml")
    parser.add_argument("--batch-sentences", type=positive_int, metavar="N",
                        help="sentences scored together (default from the config: 64)")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="CPU threads of the neural features (default: torch's, all cores; CTranslate2's)")
    parser.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="read, parse and write the list in the thread that scores, between blocks, instead of "
                             "in threads beside it (the output is the same)")
    parser.add_argument("--reuse", action="append", default=[], metavar="SCORED",
                        help="an n-best list of the same source scored with the same features: the hypotheses it "
                             "has take its values, unscored, once its record (SCORED.features.yaml) shows the same "
                             "source, models and options (repeatable)")
    parser.add_argument("--reuse-unchecked", action="append", default=[], metavar="SCORED",
                        help="as --reuse, for a list without a record (scored by an older rerank): its values are "
                             "taken as they are, unchecked (repeatable)")
    add_shard_argument(parser, "sentences", input_option="nbest", same_output=("threads", "overlap"))
    nmt = parser.add_argument_group("neural translation models")
    nmt.add_argument("--model", action="append", default=[], metavar="DIR",
                     help="a model directory written by `rerank train` (examples/models/rnnsearch); adds its "
                          "ln p(hypothesis | source) as RNN0 (encoder-decoder) or RNNsearch0; repeat for several "
                          "models (needs --source)")
    nmt.add_argument("--model-label", action="append", default=[], metavar="LABEL",
                     help="the label of --model's feature instead of its default (RNNsearch0 in a list that `rerank "
                          "translate` wrote already): one per --model, in their order")
    nmt.add_argument("--device", action=StoreOnce, metavar="DEV",
                     help="where --model's models run: cpu (default), cuda, cuda:1, ...")
    nmt.add_argument("--precision", choices=("fp32", "int8"), action=StoreOnce,
                     help="the matrix multiplies of --model's models and of the config's nmt features (over its "
                          "precision key): fp32, or int8 weights quantized per output row, on the CPU")
    nmt.add_argument("--max-tokens", type=positive_int, action=StoreOnce, metavar="N",
                     help="padded target tokens per batch of --model's models and of the config's nmt features "
                          "(over their max_tokens key; default 4096): bounds memory, and fills a GPU")
    lm = parser.add_argument_group("language model (KenLM)")
    lm.add_argument("--lm", action=StoreOnce, metavar="PATH", help="ARPA or KenLM binary model; adds ln p(hypothesis)")
    lm.add_argument("--lm-label", action=StoreOnce, metavar="LABEL", help="its label (default LM1)")
    lm.add_argument("--lm-oov", action="store_true", help="add a second value: the number of OOV words")
    wp = parser.add_argument_group("word penalty")
    wp.add_argument("--word-penalty", action="store_true", help="add -(number of target words), as Moses does")
    wp.add_argument("--wp-label", action=StoreOnce, metavar="LABEL", help="its label (default WP1)")
    unk = parser.add_argument_group("UNK penalty: target words outside a shortlist")
    vocab = unk.add_mutually_exclusive_group()
    vocab.add_argument("--unk-vocab", action=StoreOnce, metavar="FILE",
                       help="the shortlist: one word per line (first column)")
    vocab.add_argument("--unk-corpus", action=StoreOnce, metavar="FILE",
                       help="target text whose most frequent words are the shortlist")
    unk.add_argument("--shortlist", type=positive_int, action=StoreOnce, metavar="N",
                     help="shortlist size with --unk-corpus (default 15000)")
    unk.add_argument("--unk-label", action=StoreOnce, metavar="LABEL", help="its label (default UNK1)")


def flag_features(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Feature specs from the command-line flags; unset options keep the defaults of each feature's Config."""
    from rerank.errors import RerankError

    if args.model_label and len(args.model_label) != len(args.model):
        raise RerankError(f"--model-label: {len(args.model_label)} label(s) for {len(args.model)} --model: give one "
                          "per --model, in their order")
    labels = args.model_label or [None] * len(args.model)
    specs: list[dict[str, Any]] = [_spec("nmt", model=model, name=label, device=args.device)
                                   for model, label in zip(args.model, labels, strict=True)]
    orphans = {"--device": args.device is not None and not args.model,
               "--lm-label": args.lm_label is not None and args.lm is None,
               "--lm-oov": args.lm_oov and args.lm is None,
               "--wp-label": args.wp_label is not None and not args.word_penalty,
               "--unk-label": args.unk_label is not None and args.unk_vocab is None and args.unk_corpus is None,
               "--shortlist": args.shortlist is not None and args.unk_corpus is None}
    for flag, orphan in orphans.items():
        if orphan:
            raise RerankError(f"{flag} needs the feature it configures (--model, --lm, --word-penalty, --unk-vocab "
                              "or --unk-corpus; --shortlist goes with --unk-corpus)")
    if args.lm is not None:
        specs.append(_spec("kenlm", path=args.lm, name=args.lm_label, oov=args.lm_oov or None))
    if args.word_penalty:
        specs.append(_spec("word-penalty", name=args.wp_label))
    if args.unk_vocab is not None or args.unk_corpus is not None:
        specs.append(_spec("unk-penalty", vocab=args.unk_vocab, corpus=args.unk_corpus,
                           shortlist=args.shortlist, name=args.unk_label))
    return specs


# the flag that labels each kind of feature given by flags, named where a label clashes
LABEL_FLAGS = {"nmt": "--model-label", "kenlm": "--lm-label", "word-penalty": "--wp-label",
               "unk-penalty": "--unk-label"}


def _spec(kind: str, **options: Any) -> dict[str, Any]:
    return {"kind": kind, **{key: value for key, value in options.items() if value is not None}}


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from rerank.config import load_config, with_overrides
    from rerank.errors import RerankError
    from rerank.features.registry import read_specs
    from rerank.formats.files import display_name
    from rerank.formats.nbest import read_nbest
    from rerank.formats.shards import nbest_blocks, open_shard, write_manifests
    from rerank.formats.streams import peek
    from rerank.rescore.append import (
        RescoreConfig,
        check_new_labels,
        check_reusable,
        check_sentence_ids,
        check_source_given,
        score_nbest,
    )

    config = with_overrides(load_config(RescoreConfig, args.config) if args.config else RescoreConfig(),
                            {"batch_sentences": args.batch_sentences})
    flags = flag_features(args)
    if not config.features and not flags:
        raise RerankError("no features to add: give --config or at least one of --model, --lm, --word-penalty, "
                          "--unk-vocab, --unk-corpus")
    origin = " and ".join([args.config] * bool(args.config) + ["the command line"] * bool(flags))
    specs = read_specs([*config.features, *flags], source=origin)  # labels, kinds, values: no model loaded yet
    for key in ("precision", "max_tokens", "threads"):  # threads: a CTranslate2 feature's own (torch's below)
        if getattr(args, key) is not None:
            specs = [dataclasses.replace(spec, config=with_overrides(spec.config, {key: getattr(args, key)}))
                     if hasattr(spec.config, key) else spec for spec in specs]
    check_source_given([spec.label for spec in specs if spec.needs_source], args.source)
    record = checked_record(args, specs)
    check_reusable(args.reuse, record, [spec.label for spec in specs if not spec.scores_lists])  # no model loaded
    nbest_name = display_name(args.nbest)
    batch_sentences = config.batch_sentences
    reader = None
    if args.shard is not None:
        reader = open_shard(args, nbest_blocks(batch_sentences))
    with reader.file_line_numbers() if reader is not None else contextlib.nullcontext():
        first, entries = peek(read_nbest(args.nbest, reader))  # a bad first line fails before any model loads
        if first is None:
            if reader is None:
                logger.warning("%s is empty: nothing to score", nbest_name)
        else:
            from_config = len(config.features)  # specs: the config's features, then the flags'
            renames = {spec.label: f"its 'name' in {args.config}" for spec in specs[:from_config]}
            renames.update({spec.label: f"{LABEL_FLAGS[flag['kind']]} NAME"
                            for flag, spec in zip(flags, specs[from_config:], strict=True)})
            check_new_labels(first.layout, [spec.label for spec in specs], nbest_name, renames)
        if args.source is not None and reader is None:
            check_sentence_ids(args.nbest, args.source)
        features = [spec.build() for spec in specs]
        with _threads(args.threads):
            score_nbest(entries, args.output, features, nbest_name=nbest_name, source=args.source,
                        batch_sentences=batch_sentences, overlap=args.overlap, reuse=args.reuse,
                        reuse_unchecked=args.reuse_unchecked, record=record)
    if reader is not None:
        write_manifests(args, reader, {"output": "n-best list"}, batch_sentences=batch_sentences)
        if first is None:
            logger.info("%s: shard %s of %s has no sentences: wrote an empty list", args.output, args.shard,
                        nbest_name)
    return 0


def checked_record(args: argparse.Namespace, specs: list[FeatureSpec]) -> dict[str, dict[str, Any]]:
    """The record of the list -o writes (:func:`rerank.features.registry.scored_record`), its file beside -o
    checked as an output first: never an input."""
    from rerank.features.registry import scored_record
    from rerank.formats.files import check_outputs
    from rerank.formats.scored import has_record, record_path

    if has_record(args.output):
        inputs = [args.nbest, args.source, args.config, *args.model, args.lm, args.unk_vocab, args.unk_corpus,
                  *args.reuse, *args.reuse_unchecked]
        check_outputs([("--output's record", record_path(args.output))], inputs)
    return scored_record(specs, args.source, args.nbest)


def _threads(threads: int | None) -> contextlib.AbstractContextManager[None]:
    """torch's CPU threads for the neural features, set only when asked for (torch is not loaded otherwise)."""
    if not threads:
        return contextlib.nullcontext()
    from rerank.models.device import torch_threads
    return torch_threads(threads)
