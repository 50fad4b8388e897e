"""Tune log-linear weights against BLEU (MERT, PRO or batch MIRA), on n-best lists or with a decoder in the loop.

On fixed n-best lists (--nbest run1.gz run2.gz ...: the lists of several decoder runs are merged)
one optimisation gives the weights. With --decoder "CMD" the decoder is run on --source with the
current weights, its n-best list joins all earlier ones and the weights are optimised again, until
no weight moves by 1e-5 or after 25 runs, as mert-moses.pl (placeholders for CMD: {weights_overwrite},
{weights_file}, {nbest}, {nbest_size}, {source}; see rerank.tune.loop). For Moses:

  rerank tune --source dev.en --ref dev.fr --moses-ini moses.ini -o weights.yaml \\
      --decoder "moses -f moses.ini -n-best-list {nbest} {nbest_size} distinct -weight-overwrite {weights_overwrite}"

For our own decoder, `rerank translate --weights` ranks by ln p (RNNsearch0, or RNN0) and the word
penalty WP0 and writes both to its n-best list; start from an init.yaml of `RNNsearch0: 1` and
`WP0: 0` (plain beam search), with a beam at least as wide as the n-best list:

  rerank tune --source dev.en --ref dev.fr --init init.yaml -o weights.yaml --nbest-size 10 \\
      --decoder "rerank translate --model models/rnnsearch -i {source} -o {nbest} --beam 10 \\
                 --nbest {nbest_size} --weights {weights_file}"

The weights are written as YAML and, with --moses-ini, into a copy of that moses.ini. Settings come
from --config (see configs/tune.yaml); the flags below override single ones.
"""

from __future__ import annotations

import argparse
import logging

from rerank.cli import positive_int

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    inputs = parser.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--nbest", nargs="+", metavar="NBEST", help="n-best lists of the tuning set (.gz allowed)")
    inputs.add_argument("--decoder", metavar="CMD", help="decoder command line, run once per iteration")
    parser.add_argument("--source", metavar="SRC", help="tuning source text, for --decoder")
    parser.add_argument("-r", "--ref", action="append", required=True, metavar="REF",
                        help="reference translations, one line per sentence; repeat for several references")
    parser.add_argument("--init", metavar="FILE",
                        help="starting weights: YAML weights file or moses.ini (default: --moses-ini if given, "
                             "else 0 for every feature, which keeps each sentence's first hypothesis)")
    parser.add_argument("--moses-ini", metavar="INI", help="moses.ini to copy with the tuned [weight] section")
    parser.add_argument("-o", "--output", required=True, metavar="YAML", help="tuned weights (YAML)")
    parser.add_argument("--output-ini", metavar="INI",
                        help="the updated copy of --moses-ini (default: OUTPUT with the suffix .moses.ini)")
    parser.add_argument("--work-dir", default="tune-work", metavar="DIR",
                        help="where --decoder runs keep their n-best lists and logs (default: tune-work)")
    parser.add_argument("--features", metavar="LABEL,...",
                        help="tune only these features of the n-best list; the others get weight 0 "
                             "(e.g. to compare feature sets on one scored n-best list)")
    parser.add_argument("--config", metavar="YAML", help="tuning settings (defaults: configs/tune.yaml)")
    parser.add_argument("--optimizer", choices=("mert", "pro", "mira"), help="overrides optimizer")
    parser.add_argument("--seed", type=int, help="overrides seed")
    parser.add_argument("--restarts", type=positive_int, help="overrides mert.restarts")
    parser.add_argument("--random-directions", type=int, metavar="N", help="overrides mert.random_directions")
    parser.add_argument("--iterations", type=positive_int, metavar="N", help="overrides loop.max_iterations")
    parser.add_argument("--nbest-size", type=positive_int, metavar="N", help="overrides loop.nbest_size")
    parser.add_argument("--tokenize", metavar="TOK", help="overrides bleu.tokenize (a sacrebleu tokenizer)")
    parser.add_argument("--lowercase", action="store_true", default=None, help="overrides bleu.lowercase")


def resolved_config(args: argparse.Namespace):
    """The configuration file (or the defaults) with the command-line overrides."""
    from dataclasses import replace

    from rerank.config import load_config
    from rerank.tune.config import TuneConfig

    config = load_config(TuneConfig, args.config) if args.config else TuneConfig()

    def given(**values):
        return {key: value for key, value in values.items() if value is not None}

    try:
        return replace(
            config, **given(optimizer=args.optimizer, seed=args.seed),
            mert=replace(config.mert, **given(restarts=args.restarts, random_directions=args.random_directions)),
            loop=replace(config.loop, **given(max_iterations=args.iterations, nbest_size=args.nbest_size)),
            bleu=replace(config.bleu, **given(tokenize=args.tokenize, lowercase=args.lowercase)))
    except ValueError as e:
        from rerank.errors import ConfigError
        raise ConfigError(str(e)) from None


def read_references(paths: list[str]) -> list[list[str]]:
    from rerank.errors import FormatError
    from rerank.formats.files import read_text

    references = [read_text(path) for path in paths]
    for path, lines in zip(paths[1:], references[1:], strict=True):
        if len(lines) != len(references[0]):
            raise FormatError(path, min(len(lines), len(references[0])) + 1,
                              f"{len(references[0])} lines, as {paths[0]} has", got=f"{len(lines)} lines")
    return references


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import numpy as np

    from rerank.errors import FormatError, RerankError
    from rerank.formats.files import read_text
    from rerank.formats.moses_ini import MosesIni
    from rerank.tune.data import NBestPool, aligned_weights
    from rerank.tune.loop import DecoderCommand, TuningLoop, weights_overwrite
    from rerank.tune.optimize import optimise
    from rerank.tune.stats import BleuStatistics
    from rerank.weights import as_weights, is_moses_ini, load_weights, save_weights

    config = resolved_config(args)
    if args.decoder and not args.source:
        raise RerankError("--decoder needs --source, the text to translate")
    if args.source and not args.decoder:
        raise RerankError("--source is for --decoder; with --nbest it is not needed")
    references = read_references(args.ref)
    bleu = BleuStatistics(references, tokenize=config.bleu.tokenize, lowercase=config.bleu.lowercase)
    pool = NBestPool(bleu, reference_name=args.ref[0])
    init_path = args.init or args.moses_ini
    initial = load_weights(init_path) if init_path else {}
    from_ini = init_path is not None and is_moses_ini(init_path)

    def align(layout):
        if init_path is None:
            logger.info("starting from weights 0: each sentence's first hypothesis")
            return np.zeros(layout.dims)
        return aligned_weights(initial, layout, init_path, from_moses_ini=from_ini)

    if args.decoder and args.features:
        raise RerankError("--features is for fixed n-best lists (--nbest); the decoder loop tunes all its features")
    if args.decoder:
        if not initial:
            raise RerankError("--decoder needs starting weights: give --moses-ini or --init")
        source_lines = len(read_text(args.source))
        if source_lines != len(references[0]):
            raise FormatError(args.source, None, f"{len(references[0])} lines, as {args.ref[0]} has",
                              got=f"{source_lines} lines")
        loop = TuningLoop(DecoderCommand(args.decoder), Path(args.source), pool, config, Path(args.work_dir))
        result = loop.run(initial, align)
        weights, layout = result.weights, result.layout
        print_iterations(result.iterations, result.converged, config.loop.max_iterations)
    else:
        for path in args.nbest:
            pool.add(path)
        layout = pool.layout
        data = pool.data()
        start = align(layout)
        weights = np.zeros(layout.dims)
        if args.features:
            data, columns = data.select([label.strip() for label in args.features.split(",") if label.strip()])
            start = start[columns]
        else:
            columns = np.arange(layout.dims)
        weights[columns] = optimise(data, start, config, np.random.default_rng(config.seed))
    data = pool.data()
    score = bleu.score(data.corpus_stats(weights))
    tuned = as_weights(weights, layout)
    save_weights(tuned, args.output)
    if args.moses_ini:
        write_moses_ini(MosesIni.read(args.moses_ini), tuned, args.output_ini or _ini_name(args.output))
    print(f"tuning set BLEU ({config.optimizer.upper()}, {len(pool.files)} n-best list(s), "
          f"{pool.size} distinct hypotheses): {score}")
    print(bleu.signature())
    print(f"weights (L1-normalised, written to {args.output}): {weights_overwrite(tuned)}")
    return 0


def write_moses_ini(ini, weights: dict[str, tuple[float, ...]], path: str) -> None:
    """A copy of ``ini`` with the weights of the features it has replaced; the others are only in the YAML."""
    known = ini.weights()
    extra = [label for label in weights if label not in known]
    if extra:
        logger.warning("%s has no weights for %s: they are only in the YAML weights", ini.path, ", ".join(extra))
    ini.with_weights({label: values for label, values in weights.items() if label in known}).write(path)
    logger.info("wrote %s", path)


def print_iterations(iterations, converged: bool, limit: int) -> None:
    print("iteration  decoder-BLEU  tuned-BLEU  hypotheses  max-change")
    for it in iterations:
        print(f"{it.number:9d}  {it.decoder_bleu:12.2f}  {it.tuned_bleu:10.2f}  {it.hypotheses:10d}  {it.change:10.3g}")
    print("converged: no weight moved by more than the threshold" if converged
          else f"stopped after {limit} iterations without converging")


def _ini_name(output: str) -> str:
    for suffix in (".yaml", ".yml"):
        if output.endswith(suffix):
            return output[: -len(suffix)] + ".moses.ini"
    return output + ".moses.ini"
