"""How much of score-table's wall time is the host's (reading, gunzip, parsing, ids, formatting, gzip), with
the host's work in the scoring thread between batches (``--no-overlap``) and in threads beside it.

The model's time is what the scoring thread spends in :meth:`Scorer.score_prepared`; the rest of the wall
time is time the model waited on the host. The runs alternate (serial, overlapped, serial, ...), so that a
load from other jobs falls on both alike, and every output is compared byte for byte.

    python bench/bench_host.py
    python bench/bench_host.py --lines 50000 --model examples/models/encdec --precision int8 --threads 1
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from quick import parse_args

from rerank.formats.files import GZIP_LEVEL
from rerank.formats.phrase_table import read_phrase_table
from rerank.scoring.pairs import PreparedWindow, Scorer, ScoringConfig
from rerank.scoring.table import score_phrase_table

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO.parent / "shared" / "data" / "moses-multi30k" / "model" / "phrase-table.gz"


class TimedScorer(Scorer):
    """A scorer that adds up the seconds its model spends."""

    model_seconds = 0.0

    def score_prepared(self, window: PreparedWindow) -> np.ndarray:
        started = time.perf_counter()
        try:
            return super().score_prepared(window)
        finally:
            self.model_seconds += time.perf_counter() - started


def run(table: Path, model: Path, output: Path, precision: str, overlap: bool) -> dict[str, float]:
    scorer = TimedScorer.load(model, "cpu", ScoringConfig(precision=precision))
    assert isinstance(scorer, TimedScorer)
    started, cpu = time.perf_counter(), time.process_time()
    score_phrase_table(read_phrase_table(table), scorer, table=table, output=output, show_progress=False,
                       overlap=overlap)
    wall = time.perf_counter() - started
    return {"wall": wall, "cpu": time.process_time() - cpu, "model": scorer.model_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "models" / "encdec")
    parser.add_argument("--precision", default="int8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval, seconds (default Python's)")
    args = parse_args(parser, {"lines": 2_000, "repeats": 1})
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "table.gz"
        with gzip.open(args.table, "rb") as src, gzip.open(table, "wb", compresslevel=GZIP_LEVEL) as out:
            out.writelines(itertools.islice(src, args.lines))
        print(f"{args.lines:,} lines of {args.table.name}, {args.model.name} {args.precision}, {args.threads} "
              f"torch thread(s), switch interval {sys.getswitchinterval() * 1000:g} ms, load "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print("| run | pairs/s | wall s | model s | host-only s (share of wall) | process CPU s |")
        print("|---|---|---|---|---|---|")
        outputs = {}
        for repeat in range(args.repeats):
            for overlap in (False, True):
                name = "overlapped" if overlap else "serial"
                output = Path(tmp) / f"{name}.gz"
                r = run(table, args.model, output, args.precision, overlap)
                host = r["wall"] - r["model"]
                print(f"| {name} {repeat + 1} | {args.lines / r['wall']:,.0f} | {r['wall']:.1f} | {r['model']:.1f} | "
                      f"{host:.1f} ({host / r['wall']:.0%}) | {r['cpu']:.1f} |", flush=True)
                outputs[name] = output.read_bytes()
        assert outputs["serial"] == outputs["overlapped"], "the outputs differ"
        print(f"outputs identical ({len(outputs['serial']):,} bytes gzipped); load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
