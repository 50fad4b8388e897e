"""Preparing and training on a large corpus: preparation speed, and peak memory and training speed at
3M pairs against Multi30k's 29k.

The large corpus is Multi30k's training text repeated in shuffled order (each repetition a seeded
permutation of the 29,000 pairs) up to ``--pairs`` pairs. For each corpus, in a fresh process each:

- ``rerank prepare``'s pass (:func:`prepare_parallel`): pairs/s and peak RSS;
- training: the trainer built on the prepared data (its files checked), then ``--updates`` updates of a
  small RNNsearch drawn from the epoch's plan as ``rerank train`` draws them: peak RSS and target
  tokens/s (the first 10 updates not timed, 2 of the paper-size model).

With ``--paper-updates K`` it also times K updates of the paper-size RNNsearch (Bahdanau et al.: 620/1000,
30,000-word vocabularies, batches of 80) on the Multi30k batches, and counts the FLOPs of the matrix
multiplies of one more update per target token, for the projection in docs/guide/scaling.md.

    python bench/bench_prepare.py
    python bench/bench_prepare.py --pairs 3000000 --updates 300 --paper-updates 5 --work /tmp/bench-prepare
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quick import parse_args

REPO = Path(__file__).resolve().parents[1]
MULTI30K = "multi30k/tok/train.lc.norm.tok"
SMALL_MODEL = {"architecture": "rnnsearch", "embedding_size": 128, "hidden_size": 128, "maxout_size": 128,
               "maxout_pool": 2, "decoder": "bahdanau", "attention": {"score": "additive", "window": "global",
                                                                       "hidden_size": 128}, "dropout": 0.3}
PAPER_MODEL = {"architecture": "rnnsearch", "embedding_size": 620, "hidden_size": 1000, "maxout_size": 500,
               "maxout_pool": 2, "decoder": "bahdanau", "attention": {"score": "additive", "window": "global",
                                                                       "hidden_size": 1000}}
WARM_UP = 10


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def repeat_shuffled(source: Path, target: Path, pairs: int, out: Path, seed: int = 1) -> tuple[Path, Path]:
    """``pairs`` pairs: the corpus again and again, each time in another seeded order."""
    import numpy as np

    src_lines = source.read_bytes().splitlines(keepends=True)
    trg_lines = target.read_bytes().splitlines(keepends=True)
    rng = np.random.default_rng(seed)
    paths = out / "big.en", out / "big.fr"
    with open(paths[0], "wb") as src, open(paths[1], "wb") as trg:
        for start in range(0, pairs, len(src_lines)):
            order = rng.permutation(len(src_lines))[: pairs - start]
            src.write(b"".join(src_lines[i] for i in order))
            trg.write(b"".join(trg_lines[i] for i in order))
    return paths


def child_prepare(source: str, target: str, output: str) -> dict[str, float]:
    from rerank.training.prepare import prepare_parallel

    started = time.perf_counter()
    manifest = prepare_parallel(source, target, output)
    seconds = time.perf_counter() - started
    size = sum(f.stat().st_size for f in Path(output).iterdir())
    return {"pairs": manifest["pairs"], "seconds": seconds, "pairs_per_s": manifest["lines"] / seconds,
            "peak_rss_mib": peak_rss_mib(), "disk_mib": size / 2**20}


def child_train(prepared: str, valid: str, updates: int, model: str, threads: int) -> dict[str, float]:
    import torch
    from bench_train import update

    from rerank.config import from_dict
    from rerank.training.config import TrainConfig
    from rerank.training.trainer import Trainer

    paper = model == "paper"
    config = from_dict(TrainConfig, {
        "model": PAPER_MODEL if paper else SMALL_MODEL,
        "data": {"prepared": prepared, "valid": {"source": f"{valid}.en", "target": f"{valid}.fr"}},
        "training": {"optimizer": "adadelta" if paper else "adam", "learning_rate": 1.0 if paper else 0.001,
                     "batch_size": 80 if paper else 64, "threads": threads, "seed": 1234},
    }, "bench")
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(dataclasses.replace(config, output_dir=out))
        if paper:  # the paper's 30,000-word vocabularies (the batches' ids are Multi30k's, fewer)
            from rerank.models.architectures import build_model

            trainer.model = build_model(config.model, 30000, 30000)
            trainer.parallel_model = trainer.model
            trainer.optimizer = trainer._make_optimizer()
        plan = trainer.epoch_plan(0)
        trainer.model.train()
        tokens, started, warm_up = 0, 0.0, 2 if paper else WARM_UP
        for b in range(updates):
            if b == warm_up:
                started, tokens = time.perf_counter(), 0
            tokens += update(trainer, plan[b], b)[1]
        seconds = time.perf_counter() - started
        flops = 0.0
        if paper:  # the matrix multiplies of one more update, forward and backward, per target token
            from torch.utils.flop_counter import FlopCounterMode

            with FlopCounterMode(display=False) as counter:
                counted = update(trainer, plan[updates], updates)[1]
            flops = counter.get_total_flops() / counted
    return {"flops_per_token": flops, "updates": updates - warm_up, "seconds": seconds,
            "tokens_per_s": tokens / seconds, "s_per_update": seconds / (updates - warm_up),
            "peak_rss_mib": peak_rss_mib()}


def run_child(*args: str) -> dict[str, float]:
    result = subprocess.run([sys.executable, __file__, "--child", *args], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")})
    if result.returncode:
        raise SystemExit(f"bench child {args} failed:\n{result.stderr}")
    return dict(json.loads(result.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3_000_000)
    parser.add_argument("--updates", type=int, default=300, help="training updates per corpus (10 warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--paper-updates", type=int, default=0, help="updates of the paper-size RNNsearch to time")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parse_args(parser, {"pairs": 30_000, "updates": WARM_UP + 2, "threads": 1})
    if args.child:
        kind, *rest = args.child
        if kind == "prepare":
            print(json.dumps(child_prepare(*rest)))
        else:
            print(json.dumps(child_train(rest[0], rest[1], int(rest[2]), rest[3], int(rest[4]))))
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-prepare-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        source, target = (args.data / f"{MULTI30K}.{lang}" for lang in ("en", "fr"))
        valid = str(args.data / "multi30k/tok/val.lc.norm.tok")
        started = time.perf_counter()
        big = repeat_shuffled(source, target, args.pairs, work)
        print(f"corpus of {args.pairs:,} pairs: Multi30k train repeated in shuffled orders (seed 1), written in "
              f"{time.perf_counter() - started:.1f} s; {args.threads} threads; cores: {os.cpu_count()}")
        print(f"{'corpus':>10} {'prepare pairs/s':>15} {'prepare RSS MiB':>15} {'disk MiB':>9} "
              f"{'train RSS MiB':>13} {'train tokens/s':>14} {'s/update':>9}")
        rows = {}
        for name, (src, trg) in (("29k", (source, target)), ("big", big)):
            prepared = work / f"prepared-{name}"
            shutil.rmtree(prepared, ignore_errors=True)
            prep = run_child("prepare", str(src), str(trg), str(prepared))
            train = run_child("train", str(prepared), valid, str(args.updates), "small", str(args.threads))
            rows[name] = prep, train
            print(f"{prep['pairs']:>10,} {prep['pairs_per_s']:>15,.0f} {prep['peak_rss_mib']:>15,.0f} "
                  f"{prep['disk_mib']:>9,.1f} {train['peak_rss_mib']:>13,.0f} {train['tokens_per_s']:>14,.0f} "
                  f"{train['s_per_update']:>9.3f}")
        (_, small), (_, large) = rows["29k"], rows["big"]
        print(f"training at {args.pairs:,} pairs against 29k: peak RSS "
              f"{large['peak_rss_mib'] / small['peak_rss_mib']:.3f}x, "
              f"tokens/s {large['tokens_per_s'] / small['tokens_per_s']:.3f}x")
        if args.paper_updates:
            paper = run_child("train", str(work / "prepared-29k"), valid, str(args.paper_updates + 2), "paper",
                              str(args.threads))
            print(f"paper-size RNNsearch (620/1000, 30,000 words, batches of 80): {paper['tokens_per_s']:,.0f} target "
                  f"tokens/s, {paper['s_per_update']:.2f} s/update over {paper['updates']:.0f} updates, peak RSS "
                  f"{paper['peak_rss_mib']:,.0f} MiB; matrix multiplies of an update, forward and backward: "
                  f"{paper['flops_per_token'] / 1e6:,.0f} MFLOP per target token")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
