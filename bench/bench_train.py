"""Training throughput of the small configs on the real Multi30k data: updates/s and target tokens/s.

For each config it builds the trainer on the full training data (vocabularies, batches and model
as ``rerank train`` builds them), runs a few warm-up updates, then times ``--updates`` updates of
the first epoch's batches, at each thread count. The bar is JoeyNMT's GRU-256 attention model on
this kind of machine, about 2,100 target tokens/s.

    python bench/bench_train.py
    python bench/bench_train.py --configs rnnsearch-small --threads 1 2 --updates 50
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rerank.training.config import load_train_config
from rerank.training.data import bucketed_order
from rerank.training.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]
WARM_UP = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["encdec-small", "rnnsearch-small"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--updates", type=int, default=30)
    args = parser.parse_args()
    os.chdir(REPO)  # the configs' data paths are relative to the repository
    logging.basicConfig(level=logging.WARNING)
    print(f"load average {os.getloadavg()[0]:.2f}; torch {torch.__version__}")
    print(f"{'config':<16} {'threads':>7} {'params':>8} {'updates/s':>10} {'tokens/s':>9} {'s/update':>9}")
    for name in args.configs:
        config = load_train_config(REPO / "configs" / f"{name}.yaml")
        with tempfile.TemporaryDirectory() as out:
            trainer = Trainer(dataclasses.replace(config, output_dir=out))
            batches = bucketed_order(trainer.train_lengths, config.training.batch_size,
                                     config.training.bucket_window, np.random.default_rng(config.training.seed))
            parameters = sum(p.numel() for p in trainer.model.parameters())
            for threads in args.threads:
                torch.set_num_threads(threads)
                for batch in batches[:WARM_UP]:
                    trainer._update(batch)
                started, tokens = time.perf_counter(), 0
                for batch in batches[WARM_UP: WARM_UP + args.updates]:
                    tokens += trainer._update(batch)[1]
                seconds = time.perf_counter() - started
                print(f"{name:<16} {threads:>7} {parameters / 1e6:>7.1f}M {args.updates / seconds:>10.2f} "
                      f"{tokens / seconds:>9.0f} {seconds / args.updates:>9.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
