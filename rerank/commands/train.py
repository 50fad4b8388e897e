"""Train an RNN encoder-decoder or RNNsearch model from a YAML config (resumes a stopped run)."""

from __future__ import annotations

import argparse
import dataclasses


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="training config (see configs/*.yaml)")
    parser.add_argument("--output-dir", help="model directory (overrides output_dir of the config)")
    parser.add_argument("--threads", type=int, help="CPU threads (overrides training.threads)")


def run(args: argparse.Namespace) -> int:
    from rerank.training.config import load_train_config
    from rerank.training.trainer import Trainer

    config = load_train_config(args.config)
    if args.output_dir:
        config = dataclasses.replace(config, output_dir=args.output_dir)
    if args.threads:
        config = dataclasses.replace(config, training=dataclasses.replace(config.training, threads=args.threads))
    progress = Trainer(config).train()
    print(f"{config.output_dir}: best validation perplexity {progress.best_ppl:.2f} after {progress.updates} "
          f"updates ({progress.finished})")
    return 0
