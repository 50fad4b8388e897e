"""Training throughput of the small configs on the real Multi30k data, the fast path against the
reference one in the same run, and the share of the machine's matmul rate each reaches.

For each config it builds the trainer on the full training data (vocabularies, batches and model
as ``rerank train`` builds them), runs a few warm-up updates, then times ``--updates`` updates of
the first epoch's batches at each thread count, the fast path (:meth:`Seq2Seq.forward`) and the
reference path (:func:`rerank.models.seq2seq.reference_path`: logits at every position, then the
log-softmax) taking turns on the same batches. FLOPs are the matrix multiplies of one update,
forward and backward, as ``FlopCounterMode`` counts them for each path on every timed batch (from the
same weights, untimed); the share is the achieved rate over the fp32 matmul rate measured just
before, by the wall clock and by the CPU time. Those untimed updates also give each path's loss from
the same weights and dropout masks (on a GPU, where the paths' masks differ, without dropout): the
benchmark exits with status 1 if they differ by more than ``LOSS_TOLERANCE`` (1e-4, relative) on any batch.

With ``--equal-updates N`` two models start from the same weights and random state and take N
updates on the same batches, one per path: the losses of every update and the validation
perplexity after them are printed side by side (the fast path draws the same dropout masks). In
float32 the paths' different summation orders make them drift apart slowly, as any change of
order would; ``--equal-dtype float64`` shows that nothing else separates them.

With ``--device cuda`` the trainer, its model and batches are on the GPU, the clocks are read after
synchronising, the share is of the GPU's fp32 rate (no TF32, torch's default; the TF32 and bf16 rates
are printed once) and the peak GPU memory of each path's updates replaces the CPU columns; the
thread counts are ignored (one run).

With ``--profile`` the fast path's updates run once more under the torch profiler: the time in matrix
multiplies and the rate they reach, the largest other operators, the time outside them, and the
tokens/s the matrix multiplies alone would allow.

    python bench/bench_train.py
    python bench/bench_train.py --configs rnnsearch-small --threads 1 2 --updates 50 --equal-updates 100
    python bench/bench_train.py --configs rnnsearch-small --threads 1 2 --profile
    python bench/bench_train.py --device cuda --updates 50
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from machine import (
    Timing,
    add_device_argument,
    add_profile_argument,
    check_profile,
    describe,
    device_of,
    flop_counter,
    is_gpu,
    matmul_rate,
    mib,
    profile_ops,
    share,
    timed,
)
from quick import parse_args

from rerank.models.seq2seq import reference_path
from rerank.training.config import TextPair, TrainConfig, load_train_config
from rerank.training.trainer import Trainer, validation_perplexity

REPO = Path(__file__).resolve().parents[1]
WARM_UP = 3
# The relative difference allowed between the two paths' loss of one update from the same weights, on any device.
# On the CPU the paths draw the same dropout masks (rerank.models.layers.dropout_rows) and compute the same
# function; in float32 they differ only by rounding, other orders of the same sums: the output layer's logits block
# by block or all at once, the log-softmax's normaliser by logsumexp over 1,024-row blocks or inside
# gold_log_probs, RNNsearch's [W_h; W_a] products as one matrix or two, the loss summed in other orders. In float64
# they agree to about 1e-12 and better (tests/unit/models/test_fast_paths_against_reference.py; --equal-dtype
# float64 here).
# On a GPU the fast path draws its dropout masks with torch's own dropout at the real positions only (the CPU's way
# of matching nn.Dropout's draws does not carry over to CUDA's generator), so from the same weights the two paths
# drop different units and their losses differ by sampling, not rounding. Measured on one H200 (first batch of
# tests/data/multi30k, fast / reference): with dropout 0.3, 4.5e-3 (rnnsearch-small) and 8.4e-4 (encdec-small)
# relative in float32, and still 2.3e-3 and 4.7e-4 in float64; with dropout off, 7.7e-8 and 0 in float32 (with or
# without cuDNN's TF32) and 0 and 1.4e-16 in float64. So on a GPU the check runs with dropout off (p = 0, still in
# training mode, which cuDNN's GRU backward needs), and the same tolerance holds there.
LOSS_TOLERANCE = 1e-4
PATHS = ("fast", "reference")
SHARED_DATA = "../shared/data/"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["encdec-small", "rnnsearch-small"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--updates", type=int, default=30, help="timed updates per path")
    parser.add_argument("--warm-up", type=int, default=WARM_UP, help="untimed updates first (default: %(default)s)")
    parser.add_argument("--equal-updates", type=int, default=0, metavar="N",
                        help="train N updates on each path from the same start and compare (default: skip)")
    parser.add_argument("--equal-dtype", choices=["float32", "float64"], default="float32",
                        help="the two runs' precision: in float64 they agree to rounding however long they run")
    add_profile_argument(parser, "the fast path's updates at each thread count")
    parser.add_argument("--data", type=Path,
                        help="the shared data folder, in place of the configs' ../shared/data (default: theirs)")
    add_device_argument(parser)
    args = parse_args(parser, {"threads": [1], "updates": 1, "warm_up": 1})
    device = device_of(args.device)
    gpu = is_gpu(device)
    check_profile(parser, args.profile, device)
    data = args.data.resolve() if args.data else None  # before leaving the current directory
    os.chdir(REPO)  # the configs' data paths are relative to the repository
    logging.basicConfig(level=logging.WARNING)
    print(describe(device))
    disagreements: list[str] = []
    for name in args.configs:
        config = with_data(load_train_config(REPO / "configs" / "training" / f"{name}.yaml"), data)
        with tempfile.TemporaryDirectory() as out:
            trainer = Trainer(dataclasses.replace(config, output_dir=out), device=device)
            warm_up = args.warm_up
            batches = first_batches(trainer, warm_up + args.updates)
            timed_batches = batches[warm_up: warm_up + args.updates]
            parameters = sum(p.numel() for p in trainer.model.parameters())
            tokens = sum(int(trainer.corpus.lengths(b)[1].sum()) + len(b) for b in timed_batches)  # with </s>
            # the FLOPs of every timed update, counted on the same batches from the same weights
            counted = {path: [update_flops(trainer, b, warm_up + i, path) for i, b in enumerate(timed_batches)]
                       for path in PATHS}
            flops = {path: sum(f for f, _ in counted[path]) / tokens for path in PATHS}  # per target token
            print(f"\n== {name}: {parameters / 1e6:.1f}M parameters; matrix-multiply FLOPs of an update, forward "
                  f"and backward, per target token: " + ", ".join(f"{path} {flops[path] / 1e6:.1f} MFLOP"
                                                                  for path in PATHS))
            # the paths' losses from the same weights: on a GPU without dropout (see LOSS_TOLERANCE)
            checked = counted if not gpu else {
                path: [update_flops(trainer, b, warm_up + i, path, dropout=False) for i, b in enumerate(timed_batches)]
                for path in PATHS}
            differences = [abs(fast - reference) / abs(reference) for (_, fast), (_, reference)
                           in zip(checked["fast"], checked["reference"], strict=True)]
            with_dropout = [abs(fast - reference) / abs(reference) for (_, fast), (_, reference)
                            in zip(counted["fast"], counted["reference"], strict=True)]
            print(f"the paths' loss of one update from the same weights: largest relative difference "
                  f"{max(differences):.1e}{' without dropout' if gpu else ''} (at most {LOSS_TOLERANCE:g} allowed)"
                  + (f"; {max(with_dropout):.1e} with dropout, whose masks differ between the paths on a GPU"
                     if gpu else ""))
            if not max(differences) <= LOSS_TOLERANCE:
                disagreements.append(f"{name}: the loss of one update from the same weights differs by "
                                     f"{max(differences):.1e} (relative) between the fast and the reference path")
            if gpu:
                print(f"{'device':>7} {'path':<10} {'tokens/s':>9} {'s/update':>9} {'GFLOP/s':>8} {'share':>6} "
                      f"{'fp32 matmul GFLOP/s':>19} {'peak GPU memory':>15}")
            else:
                print(f"{'threads':>7} {'path':<10} {'tokens/s':>9} {'tokens/CPU-s':>12} {'s/update':>9} "
                      f"{'GFLOP/s':>8} {'share (wall)':>12} {'share (CPU)':>11} {'matmul GFLOP/s':>14}")
            for threads in [0] if gpu else args.threads:
                if not gpu:
                    torch.set_num_threads(threads)
                for position, batch in enumerate(batches[:warm_up]):
                    update(trainer, batch, position)
                results = time_paths(trainer, timed_batches, warm_up, device)
                for path in PATHS:
                    count, timing = results[path]
                    total = flops[path] * count  # count: the target tokens of the timed updates
                    if gpu:
                        print(f"{'cuda':>7} {path:<10} {count / timing.wall:>9.0f} {timing.wall / args.updates:>9.4f} "
                              f"{total / timing.wall / 1e9:>8.1f} {100 * share(total, timing):>5.1f}% "
                              f"{timing.matmul / 1e9:>19.0f} {mib(timing.memory):>15}", flush=True)
                        continue
                    print(f"{threads:>7} {path:<10} {count / timing.wall:>9.0f} {count / timing.cpu:>12.0f} "
                          f"{timing.wall / args.updates:>9.3f} {total / timing.wall / 1e9:>8.1f} "
                          f"{100 * share(total, timing):>11.0f}% {100 * share(total, timing, cpu=True):>10.0f}% "
                          f"{timing.matmul / 1e9:>14.0f}", flush=True)
                fast, reference = results["fast"][1], results["reference"][1]
                if gpu:
                    print(f"{'cuda':>7} fast/reference: {reference.wall / fast.wall:.2f}x by the wall clock")
                    continue
                print(f"{threads:>7} fast/reference: {reference.wall / fast.wall:.2f}x by the wall clock, "
                      f"{reference.cpu / fast.cpu:.2f}x by CPU time")
                if args.profile:
                    updates = [functools.partial(update, trainer, b, warm_up + i) for i, b in enumerate(timed_batches)]
                    counts, profile = profile_ops(lambda: [update()[1] for update in updates])  # noqa: B023
                    print(f"{threads:>7} fast, " + profile.describe(flops["fast"] * sum(counts), fast.matmul,
                                                                     sum(counts), "tokens", " " * 8), flush=True)
        if args.equal_updates:
            equal_updates(config, args.equal_updates, min(args.threads), getattr(torch, args.equal_dtype), device)
    print(f"\n{describe()}")  # the load average after the runs
    if disagreements:
        print("\n".join(disagreements) + f" (relative difference above {LOSS_TOLERANCE:g})", file=sys.stderr)
        return 1
    return 0


def with_data(config: TrainConfig, data: Path | None) -> TrainConfig:
    """``config`` reading its files from ``data`` instead of ``../shared/data`` (unchanged without ``data``)."""
    if data is None:
        return config

    def moved(pair: TextPair | None) -> TextPair | None:
        if pair is None:
            return None
        return TextPair(*(str(data / p.removeprefix(SHARED_DATA)) if p.startswith(SHARED_DATA) else p
                          for p in (pair.source, pair.target)))

    return dataclasses.replace(config, data=dataclasses.replace(config.data, train=moved(config.data.train),
                                                                valid=moved(config.data.valid)))


def update(trainer: Trainer, indices: np.ndarray, position: int) -> tuple[float, int]:
    """One optimiser step of ``trainer`` on the pairs ``indices``, the ``position``-th batch of the first epoch,
    made as ``rerank train`` makes it; its summed loss and target tokens."""
    return trainer._update(indices, trainer._batch(indices, (0, position)))


def update_flops(trainer: Trainer, batch: np.ndarray, position: int, path: str,
                 dropout: bool = True) -> tuple[float, float]:
    """Matrix-multiply FLOPs and the loss of one update on ``batch``, with the dropout masks of a fixed seed, or
    without ``dropout`` (the weights, the optimiser and the random state are put back afterwards)."""
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    optimizer = trainer.optimizer.state_dict()
    random_state = torch.get_rng_state()
    gpu_state = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    torch.manual_seed(0)
    layers = [m for m in trainer.model.modules() if isinstance(m, torch.nn.Dropout)]
    rates = [m.p for m in layers]
    for layer in layers if not dropout else []:
        layer.p = 0.0
    with reference_path(trainer.model, path == "reference"), flop_counter() as counter:
        loss, _ = update(trainer, batch, position)
    for layer, rate in zip(layers, rates, strict=True):
        layer.p = rate
    trainer.model.load_state_dict(weights)
    trainer.optimizer.load_state_dict(optimizer)
    torch.set_rng_state(random_state)
    if gpu_state is not None:
        torch.cuda.set_rng_state_all(gpu_state)
    return float(counter.get_total_flops()), loss


def first_batches(trainer: Trainer, count: int) -> list[np.ndarray]:
    """The first ``count`` batches of the first epoch, as training draws them."""
    plan = trainer.epoch_plan(0)
    return [plan[b] for b in range(min(count, len(plan)))]


def time_paths(trainer: Trainer, batches: list[np.ndarray], first: int,
               device: torch.device | None = None) -> dict[str, tuple[int, Timing]]:
    """Target tokens and the total time of each path over ``batches`` (the epoch's from position ``first``), the
    paths taking turns; the matmul
    rate is the highest of those measured before, halfway and after (another job may hold the core
    during one of them); on a GPU, the peak memory of each path's updates."""
    tokens = dict.fromkeys(PATHS, 0)
    totals = {path: Timing(0.0, 0.0, 0.0) for path in PATHS}
    rates = [matmul_rate(device=device)]
    for i, batch in enumerate(batches):
        for path in (PATHS if i % 2 == 0 else PATHS[::-1]):
            with reference_path(trainer.model, path == "reference"):
                (_, count), timing = timed(functools.partial(update, trainer, batch, first + i), rate=False,
                                           device=device)
            tokens[path] += count
            totals[path].wall += timing.wall
            totals[path].cpu += timing.cpu
            totals[path].memory = max(totals[path].memory, timing.memory)
        if i == len(batches) // 2:
            rates.append(matmul_rate(device=device))
    rates.append(matmul_rate(device=device))
    for path in PATHS:
        totals[path].matmul = max(rates)
    return {path: (tokens[path], totals[path]) for path in PATHS}


def equal_updates(config: TrainConfig, updates: int, threads: int, dtype: torch.dtype,
                  device: torch.device | None = None) -> None:
    """Two runs from the same start, ``updates`` updates each, one per path: their losses and perplexities."""
    if not is_gpu(device):
        torch.set_num_threads(threads)
    losses, perplexities = {}, {}
    for path in PATHS:
        with tempfile.TemporaryDirectory() as out:
            # seeds torch: the same weights
            trainer = Trainer(dataclasses.replace(config, output_dir=out), device=device or "cpu")
            if dtype != torch.float32:
                trainer.model.to(dtype)
                trainer.optimizer = trainer._make_optimizer()
            batches = first_batches(trainer, updates)
            trainer.model.train()
            with reference_path(trainer.model, path == "reference"):
                losses[path] = np.array([update(trainer, batch, i)[0] / len(batch)
                                         for i, batch in enumerate(batches[:updates])])
            perplexities[path] = validation_perplexity(trainer.model, trainer.valid_src, trainer.valid_trg)
    difference = np.abs(losses["fast"] - losses["reference"]) / np.abs(losses["reference"])
    print(f"{updates} updates from the same start in {str(dtype).removeprefix('torch.')}: loss per sentence "
          f"{losses['fast'][0]:.3f} -> "
          f"{losses['fast'][-1]:.3f} (fast), {losses['reference'][0]:.3f} -> {losses['reference'][-1]:.3f} "
          f"(reference); largest relative difference of an update's loss {difference.max():.1e}; validation "
          f"perplexity {perplexities['fast']:.4f} (fast), {perplexities['reference']:.4f} (reference)")


if __name__ == "__main__":
    sys.exit(main())
