"""Run the end-to-end study from a YAML config: train, score, rescore, tune, decode, report.

  rerank experiment configs/experiments/multi30k.yaml

Writes results.md (the results tables with sacreBLEU's signature), results.json, BLEU by source
length (bleu-by-length.png) and commands.sh, the command line of every step (rerank's and Moses'),
which remakes each output, into the config's output_dir. Steps whose outputs exist are skipped: run
it again to resume. The study configs of the results pages are in configs/experiments/ (see
docs/guide/experiments.md).
"""

from __future__ import annotations

import argparse

from rerank.config import with_overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="YAML", help="experiment config, e.g. configs/experiments/multi30k.yaml")
    parser.add_argument("--output-dir", metavar="DIR", help="overrides the config's output_dir")
    parser.add_argument("--force", action="store_true", help="run every step again, even those already done")


def run(args: argparse.Namespace) -> int:
    from rerank.study.config import load_experiment
    from rerank.study.experiment import Experiment

    config = with_overrides(load_experiment(args.config), {"output_dir": args.output_dir})
    path = Experiment(config, force=args.force, source=args.config).run()
    print(path.read_text(encoding="utf-8"))
    out = path.parent
    print(f"Outputs in {out}/: results.md (these tables), results.json (every run's BLEU), bleu-by-length.png, "
          f"commands.sh (the command line of every step), tuning/ and decoder-tuning/ (weights and 1-best "
          "outputs), and the scored and merged n-best lists.")
    return 0
