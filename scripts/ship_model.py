"""Make a shippable model directory from a trained run: its config, vocabularies and best weights in float16.

    .venv/bin/python scripts/ship_model.py runs/recipe/recipe-words examples/models/rnnsearch

writes OUT/config.yaml, OUT/vocab.src.txt, OUT/vocab.trg.txt and OUT/model.pt, the layout that
``rerank.models.checkpoint.load_model`` reads; the run's checkpoint.pt (optimiser state, for
resuming) is left out. Floating-point weights are stored as float16, which halves the file (tied
embeddings stay one tensor); ``load_model`` copies them into the model's float32 parameters. The
script then loads OUT with ``load_model`` and compares its ln p(target | source) with the float32 run's on the first
``--check`` pairs of the run's validation data (or of ``--source``/``--target``), and fails if
any score differs by more than ``--tolerance``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch

from rerank.config import load_yaml
from rerank.models.checkpoint import (
    CONFIG,
    SRC_VOCAB,
    TRG_VOCAB,
    WEIGHTS,
    float16_weights,
    load_model,
    load_state,
    save_state,
)
from rerank.scoring.pairs import Scorer


def ship(run: Path, out: Path) -> None:
    for name in (CONFIG, SRC_VOCAB, TRG_VOCAB, WEIGHTS):
        if not (run / name).is_file():
            sys.exit(f"ship_model: {run / name}: no such file (is {run} a finished training run?)")
    out.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG, SRC_VOCAB, TRG_VOCAB):
        shutil.copyfile(run / name, out / name)
    weights = load_state(run / WEIGHTS)["model"]
    save_state({"model": float16_weights(weights)}, out / WEIGHTS)


def read_pairs(source: Path, target: Path, n: int) -> list[tuple[list[str], list[str]]]:
    with open(source, encoding="utf-8") as s, open(target, encoding="utf-8") as t:
        return [(a.split(), b.split()) for a, b, _ in zip(s, t, range(n), strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="trained model directory (rerank train's output_dir)")
    parser.add_argument("out", type=Path, help="directory to write")
    parser.add_argument("--check", type=int, default=20, help="pairs to compare (default 20; 0: none)")
    parser.add_argument("--source", type=Path, help="source text for the check (default: the run's valid data)")
    parser.add_argument("--target", type=Path, help="target text for the check")
    parser.add_argument("--tolerance", type=float, default=1e-2, help="largest ln p difference allowed")
    args = parser.parse_args()
    torch.set_num_threads(1)

    ship(args.run, args.out)
    shipped = load_model(args.out)  # as rerank reads it: torch.load(weights_only=True), float32 parameters
    size = (args.out / WEIGHTS).stat().st_size
    params = sum(p.numel() for p in shipped.model.parameters())
    print(f"{args.out}: {shipped.architecture}, {params:,} parameters, {WEIGHTS} {size:,} bytes (float16)")
    if args.check <= 0:
        return
    if args.source and args.target:
        source, target = args.source, args.target
    else:
        valid = load_yaml(args.run / CONFIG)["data"]["valid"]
        source, target = Path(valid["source"]), Path(valid["target"])
    pairs = read_pairs(source, target, args.check)
    full = list(Scorer.load(args.run).score(pairs))
    half = list(Scorer.from_loaded(shipped).score(pairs))
    diff = max(abs(a - b) for a, b in zip(full, half, strict=True))
    words = sum(len(t) + 1 for _, t in pairs)
    print(f"ln p of {len(pairs)} pairs of {source}: float32 {sum(full):.4f}, float16 {sum(half):.4f} "
          f"({words} target tokens); largest difference per sentence {diff:.2e}")
    if diff > args.tolerance:
        sys.exit(f"ship_model: float16 scores differ by {diff:.3g} > {args.tolerance}")


if __name__ == "__main__":
    main()
