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

With --jobs N the decoder runs on N parts of the source at once, locally or, with --submit, as cluster
jobs ("qsub -sync y -b y -cwd {command}", "srun {command}"), and the parts' n-best lists are joined
with the whole source's sentence ids (see rerank.tune.parallel), as moses-parallel.pl does.

The weights are written as YAML and, with --moses-ini (or --output-ini), into a copy of that moses.ini. Settings come
from --config (see configs/tuning/tune.yaml); the flags below override single ones. With --nbest, a warning where
the lists' hypotheses and the references are tokenized or cased differently, or where the references look
unrelated to the lists' 1-best (another set's, shifted by a line), as `rerank evaluate`: BLEU would steer the
weights wrong.

On fixed lists, --cv K also estimates what the weights carry over to unseen sentences: the sentences are dealt into K
folds (seeded), the weights tuned on K-1 folds rerank the held-out one, and one BLEU over every held-out 1-best is
printed beside the tuning set's and written to OUTPUT.cv.json with each fold's (see rerank.tune.crossval). With
--choose pro.l2=0.1,1,10 the setting of the best cross-validated BLEU tunes the weights; --tie NMT=RNNsearch0+R2L0
tunes features as one (their mean under one weight); --average-seeds N averages N runs' weights; --restart-folds K
keeps the MERT run whose starting point does best on held-out folds (see rerank.tune.mert).
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rerank.commands.arguments import keyed_once, positive_int
from rerank.tune.registry import OPTIMIZERS, check_optimizer

if TYPE_CHECKING:
    from rerank.tune.config import TuneConfig
    from rerank.tune.loop import Iteration
    from rerank.tune.tuning import TuneResult

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output", "output_ini", "cv_output")
INPUTS = ("nbest", "source", "ref", "init", "moses_ini", "config")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    inputs = parser.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--nbest", nargs="+", metavar="NBEST", help="n-best lists of the tuning set (.gz allowed)")
    inputs.add_argument("--decoder", metavar="CMD", help="decoder command line, run once per iteration")
    parser.add_argument("--source", metavar="SRC", help="tuning source text, for --decoder")
    parser.add_argument("-r", "--ref", action="append", required=True, metavar="REF",
                        help="reference translations, one line per sentence; repeat for several references")
    add_weights_arguments(parser)
    parser.add_argument("--work-dir", metavar="DIR",
                        help="where --decoder runs keep their n-best lists and logs (default: OUTPUT with the "
                             "suffix .work, beside the weights); a stopped run resumes from it")
    add_tuned_features_arguments(parser)
    parser.add_argument("--config", metavar="YAML", help="tuning settings (defaults: configs/tuning/tune.yaml)")
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), help="overrides optimizer: " + ", ".join(
        f"{name}, {kind.description}" for name, kind in OPTIMIZERS.items()))
    parser.add_argument("--seed", type=int, help="overrides seed")
    parser.add_argument("--restarts", type=positive_int, help="overrides mert.restarts")
    parser.add_argument("--random-directions", type=int, metavar="N", help="overrides mert.random_directions")
    parser.add_argument("--restart-folds", type=fold_count, metavar="K",
                        help="MERT: keep the run of the starting point whose runs on K-1 folds of the sentences do "
                             "best on the held-out one, rather than the run of the best tuning-set BLEU (K+1 times "
                             "the runs); overrides mert.restart_folds")
    parser.add_argument("--activate", type=label_list, metavar="NAME,...",
                        help="tune only these features, or single values as TranslationModel0_4; the others keep "
                             "their starting weights' ratios (mert-moses.pl's --activate-features): a new feature's "
                             "weight tuned beside a tuned system's; sets activate")
    parser.add_argument("--range", action="append", default=[], metavar="LABEL:LOW..HIGH", type=feature_range,
                        help="MERT's random starting weights of feature LABEL in [LOW, HIGH] (repeatable; "
                             "mert-moses.pl's --range); sets mert.feature_bounds")
    parser.add_argument("--standardize", action=argparse.BooleanOptionalAction, default=None,
                        help="PRO and MIRA: optimise on each feature divided by its standard deviation over the "
                             "hypotheses, the weights mapped back to the raw features (default), or on the raw "
                             "features as Moses' pro and kbmira (--no-standardize); sets pro.standardize and "
                             "mira.standardize")
    parser.add_argument("--decoder-flags", metavar="FLAGS", default="",
                        help="extra flags appended to every --decoder command (mert-moses.pl's --decoder-flags), "
                             "e.g. \"-threads 2\"")
    parser.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                        help="run the decoder on N parts of the source at once and join their n-best lists "
                             "(moses-parallel.pl's --jobs); give the decoder one thread each (default: 1)")
    parser.add_argument("--submit", metavar="TEMPLATE",
                        help="run each part through this command instead of locally, {command} standing for the "
                             "part's script; it must wait for the job and exit with its status, e.g. "
                             "\"qsub -sync y -b y -cwd -o /dev/null -e /dev/null {command}\" or \"srun {command}\"")
    parser.add_argument("--iterations", type=positive_int, metavar="N", help="overrides loop.max_iterations")
    parser.add_argument("--nbest-size", type=positive_int, metavar="N", help="overrides loop.nbest_size")
    parser.add_argument("--tokenize", metavar="TOK", help="overrides bleu.tokenize (a sacrebleu tokenizer)")
    parser.add_argument("--lowercase", action="store_true", default=None, help="overrides bleu.lowercase")
    add_cv_arguments(parser)


def add_weights_arguments(parser: argparse.ArgumentParser) -> None:
    """The weights read (--init, --moses-ini) and written (-o, and --output-ini: a copy of a moses.ini)."""
    parser.add_argument("--init", metavar="FILE",
                        help="starting weights: YAML weights file or moses.ini (default: --moses-ini if given, "
                             "else 0 for every feature, which keeps each sentence's first hypothesis)")
    parser.add_argument("--moses-ini", metavar="INI",
                        help="moses.ini to copy with the tuned [weight] section, ready to decode with, to "
                             "--output-ini (also the starting weights unless --init is given)")
    parser.add_argument("-o", "--output", required=True, metavar="YAML", help="tuned weights (YAML)")
    parser.add_argument("--output-ini", metavar="INI",
                        help="where the copy of --moses-ini (or of --init when it is a moses.ini) with the tuned "
                             "weights goes (default with --moses-ini: OUTPUT with the suffix .moses.ini)")


def add_tuned_features_arguments(parser: argparse.ArgumentParser) -> None:
    """Which features are tuned (--features) and which as one (--tie): fixed n-best lists only."""
    parser.add_argument("--features", metavar="LABEL,...",
                        help="tune only these features of the n-best list; the others get weight 0 "
                             "(e.g. to compare feature sets on one scored n-best list)")
    parser.add_argument("--tie", action="append", default=[], type=tied_features, metavar="NAME=LABEL+LABEL...",
                        help="tune these features as one, their mean under one weight (an ensemble's members or a "
                             "model's directions), the weight shared out among them in the output (repeatable)")


def add_cv_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of cross-validation and of weights averaged over seeds (fixed n-best lists)."""
    parser.add_argument("--cv", type=fold_count, metavar="K",
                        help="also k-fold cross-validate the tuning (--nbest): tune on K-1 folds of the sentences, "
                             "choose the held-out fold's 1-bests, rotate; report one BLEU over all held-out 1-bests "
                             "and each fold's; overrides cv.folds")
    parser.add_argument("--cv-seed", type=int, metavar="N", help="overrides cv.seed (which sentences form a fold)")
    parser.add_argument("--choose", action="append", default=[], type=choice_values, metavar="KEY=V1,V2,...",
                        help="choose a setting by the cross-validated BLEU before tuning on all sentences, e.g. "
                             "pro.l2=0.01,0.1,1,10 (repeatable: every combination); sets cv.choose")
    parser.add_argument("--cv-output", metavar="JSON",
                        help="the cross-validation's figures as JSON (default with --cv: OUTPUT with the suffix "
                             ".cv.json)")
    parser.add_argument("--average-seeds", type=positive_int, metavar="N",
                        help="average the L1-normalised weights of N runs (seeds SEED, SEED+1, ...); overrides "
                             "average_seeds")


def resolved_config(args: argparse.Namespace) -> TuneConfig:
    """The configuration file (or the defaults) with the command-line overrides."""
    from rerank.config import load_config, with_overrides
    from rerank.tune.config import TuneConfig

    config = load_config(TuneConfig, args.config) if args.config else TuneConfig()
    check_optimizer(config.optimizer, args.config)  # --optimizer's choices are the registry's
    bounds = {**config.mert.feature_bounds, **keyed_once(args.range, "--range")} if args.range else None
    return with_overrides(config, {
        "optimizer": args.optimizer, "seed": args.seed, "mert.restarts": args.restarts,
        "mert.random_directions": args.random_directions, "mert.restart_folds": args.restart_folds,
        "mert.feature_bounds": bounds,
        "pro.standardize": args.standardize, "mira.standardize": args.standardize,
        "loop.max_iterations": args.iterations, "loop.nbest_size": args.nbest_size,
        "bleu.tokenize": args.tokenize, "bleu.lowercase": args.lowercase, "average_seeds": args.average_seeds,
        "cv.folds": args.cv, "cv.seed": args.cv_seed, "cv.choose": keyed_once(args.choose, "--choose") or None,
        "activate": args.activate})


def run(args: argparse.Namespace) -> int:
    import os

    from rerank.errors import RerankError
    from rerank.formats.files import check_outputs, committed_together
    from rerank.formats.moses_ini import MosesIni
    from rerank.formats.nbest import check_label
    from rerank.formats.weights import ini_weights, read_weights, save_weights
    from rerank.tune.loop import weights_overwrite
    from rerank.tune.parallel import Jobs
    from rerank.tune.tuning import Tuning, write_cv_report, write_moses_ini

    config = resolved_config(args)
    ties = keyed_once(args.tie, "--tie")
    for name in ties:  # the name goes into the weights and a moses.ini as a feature's label
        try:
            check_label(name)
        except ValueError as e:
            raise RerankError(f"--tie {name}: {e}") from None
    if args.decoder and not args.source:
        raise RerankError("--decoder needs --source, the text to translate")
    if args.source and not args.decoder:
        raise RerankError("--source is for --decoder; with --nbest it is not needed")
    if (args.jobs != 1 or args.submit) and not args.decoder:
        raise RerankError("--jobs and --submit are for --decoder: they run the decoder in parts")
    if args.decoder and (args.features or args.tie):
        raise RerankError("--features and --tie are for fixed n-best lists (--nbest); the decoder loop tunes all its "
                          "features")
    if args.decoder and (config.cv.folds or config.average_seeds > 1):
        raise RerankError("cross-validation and --average-seeds are for fixed n-best lists (--nbest)")
    # Each read once (--init <(...) works): the starting weights, and the moses.ini the tuned weights are put in, only
    # when asked for: --moses-ini, or --output-ini beside an --init moses.ini.
    moses_ini = MosesIni.read(args.moses_ini) if args.moses_ini else None
    init = read_weights(args.init) if args.init else ini_weights(moses_ini) if moses_ini else None
    ini = moses_ini or (init.ini if args.output_ini and init is not None else None)
    if args.output_ini and not ini:
        raise RerankError("--output-ini copies a moses.ini with the tuned weights: give --moses-ini (or --init "
                          "with a moses.ini)")
    output_ini = (args.output_ini or _with_suffix(args.output, ".moses.ini")) if ini else None
    work_dir = args.work_dir or _with_suffix(args.output, ".work")
    cv_output = (args.cv_output or _with_suffix(args.output, ".cv.json")) if config.cv.folds else None
    if args.cv_output and not config.cv.folds:
        raise RerankError("--cv-output is written by cross-validation: give --cv K (or cv.folds)")
    inputs = [*(args.nbest or []), args.source, *args.ref, args.init, args.moses_ini, args.config]
    check_outputs([("--output", args.output), ("--output-ini", output_ini), ("--cv-output", cv_output)], inputs)
    if args.decoder and os.path.exists(work_dir) and not os.path.isdir(work_dir):
        raise RerankError(f"--work-dir {work_dir}: it is a file, not a directory")  # before the references are read
    tuning = Tuning(args.ref, config, init=init)
    if args.decoder:
        decoder = f"{args.decoder} {args.decoder_flags}".strip()
        result = tuning.with_decoder(decoder, args.source, work_dir, Jobs(args.jobs, args.submit))
        print_iterations(result.iterations, result.converged, config.loop.max_iterations)
    else:
        features = [label.strip() for label in args.features.split(",") if label.strip()] if args.features else None
        if args.features is not None and not features:
            raise RerankError(f"--features {args.features!r}: expected feature labels separated by commas")
        result = tuning.on_nbest(args.nbest, features, ties or None)
    with committed_together():  # the weights and the moses.ini appear together or not at all
        save_weights(result.weights, args.output)
        if ini and output_ini:  # a moses.ini ready to decode with: the tuned [weight] section in a copy
            write_moses_ini(ini, result.weights, output_ini)
        if cv_output:
            write_cv_report(result, cv_output)
    print(f"tuning set BLEU ({config.optimizer.upper()}, {result.nbest_lists} n-best list(s), "
          f"{result.hypotheses} distinct hypotheses): {result.bleu}")
    print(result.signature)
    print(f"weights (L1-normalised, written to {args.output}): {weights_overwrite(result.weights)}")
    print_cv(result, cv_output)
    return 0


def print_cv(result: TuneResult, path: str | None) -> None:
    """The cross-validated BLEU (and each candidate's, where a setting was chosen) beside the tuning set's."""
    if result.choice is not None:
        for name, score in result.choice.scores.items():
            print(f"{name}: {score.describe()}")
        print(f"chosen: {result.choice.chosen}")
    if result.cross_validated is not None:
        print(f"{result.cross_validated.describe()}; tuning set BLEU {result.bleu.score:.2f} (written to {path})")


def print_iterations(iterations: Sequence[Iteration], converged: bool, limit: int) -> None:
    print("iteration  decoder-BLEU  tuned-BLEU  hypotheses  max-change")
    for it in iterations:
        print(f"{it.number:9d}  {it.decoder_bleu:12.2f}  {it.tuned_bleu:10.2f}  {it.hypotheses:10d}  {it.change:10.3g}")
    print("converged: no weight moved by more than the threshold" if converged
          else f"stopped after {limit} iterations without converging")


def label_list(text: str) -> tuple[str, ...]:
    """An argparse type for ``--activate NAME,...``: names separated by commas."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected feature names separated by commas, got {text!r}")
    return names


def feature_range(text: str) -> tuple[str, tuple[float, float]]:
    """An argparse type for ``--range LABEL:LOW..HIGH``."""
    label, _, bounds = text.partition(":")
    low, sep, high = bounds.partition("..")
    try:
        if not label or not sep:
            raise ValueError
        pair = (float(low), float(high))
        if not all(map(math.isfinite, pair)):
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LABEL:LOW..HIGH with finite bounds, e.g. LM0:-1..1, got {text!r}") from None
    if pair[0] > pair[1]:
        raise argparse.ArgumentTypeError(f"{text}: the low end is above the high end")
    return label, pair


def fold_count(text: str) -> int:
    """An argparse type for ``--cv K``: an integer of at least 2."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 folds, got {value}")
    return value


def tied_features(text: str) -> tuple[str, tuple[str, ...]]:
    """An argparse type for ``--tie NAME=LABEL+LABEL...``."""
    name, _, labels = text.partition("=")
    members = tuple(label.strip() for label in labels.split("+") if label.strip())
    if not name.strip() or len(members) < 2:
        raise argparse.ArgumentTypeError(f"expected NAME=LABEL+LABEL..., at least two labels, e.g. "
                                         f"NMT=RNNsearch0+R2L0, got {text!r}")
    return name.strip(), members


def choice_values(text: str) -> tuple[str, tuple[float, ...]]:
    """An argparse type for ``--choose KEY=V1,V2,...``."""
    key, _, values = text.partition("=")
    try:
        numbers = tuple(float(v) for v in values.split(","))
        if not key or not all(map(math.isfinite, numbers)):
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected KEY=V1,V2,... with finite numbers, e.g. pro.l2=0.1,1,10, got {text!r}") from None
    return key, numbers


def _with_suffix(output: str, suffix: str) -> str:
    """``weights.yaml`` -> ``weights`` + ``suffix``."""
    for known in (".yaml", ".yml"):
        if output.endswith(known):
            return output[: -len(known)] + suffix
    return output + suffix
