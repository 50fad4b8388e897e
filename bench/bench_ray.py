"""score-table on Ray workers: phrase pairs/s of one process and of 1 and 2 Ray workers (one CPU each) on the
first lines of the real phrase table, and the I/O rates that bound a big table's run.

Each Ray run scores a short and a long slice; the long one's extra pairs over its extra time is the
steady rate, without Ray's start-up (cluster, then one model load per worker), which the total time
also shows. On a machine that other jobs share, wall-clock rates say as much about the others as about
us (more processes of ours get a larger share of the cores), so each run also gives its pairs per CPU
second: of the one process (reading, scoring, writing), and of the Ray workers (scoring only), the
figure a cluster's cost follows. Every output is compared with the single-process one, byte for byte. The I/O part times
zcat on the whole table, the read task's Python loop (lines cut into windows) and gzip writing at
rerank's level (what the single writer and merge-shards spend per byte).

    python bench/bench_ray.py
    python bench/bench_ray.py --lines 50000 --workers 1 2 --model examples/models/encdec
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import logging
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import torch
from quick import parse_args

from rerank.formats.files import GZIP_LEVEL
from rerank.formats.phrase_table import read_phrase_table
from rerank.scoring.pairs import Scorer, ScoringConfig
from rerank.scoring.ray_table import RayCluster, RayRun, import_ray, read_windows, score_phrase_table_ray
from rerank.scoring.table import score_phrase_table

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO.parent / "shared" / "data" / "moses-multi30k" / "model" / "phrase-table.gz"


def cut(table: Path, lines: int, path: Path) -> Path:
    with gzip.open(table, "rb") as src, gzip.open(path, "wb", compresslevel=GZIP_LEVEL) as out:
        out.writelines(itertools.islice(src, lines))
    return path


def single(table: Path, model: Path, output: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one process on one thread (model loading excluded, as a worker loads it once)."""
    torch.set_num_threads(1)
    scorer = Scorer.load(model, "cpu", ScoringConfig())
    started, cpu = time.perf_counter(), time.process_time()
    score_phrase_table(read_phrase_table(table), scorer, table=table, output=output, show_progress=False)
    return time.perf_counter() - started, time.process_time() - cpu


def on_ray(table: Path, model: Path, output: Path, workers: int) -> tuple[float, RayRun]:
    first = next(iter(read_phrase_table(table)))
    started = time.perf_counter()
    run = score_phrase_table_ray(table, model, output=output, cluster=RayCluster(workers=workers),
                                 num_scores=len(first.scores), show_progress=False)
    return time.perf_counter() - started, run


def io_rates(table: Path) -> None:
    raw_size = 0
    with gzip.open(table, "rb") as f:
        while chunk := f.read(1 << 20):
            raw_size += len(chunk)
    started = time.perf_counter()
    subprocess.run(["zcat", str(table)], stdout=subprocess.DEVNULL, check=True)
    seconds = time.perf_counter() - started
    print(f"zcat: {table.stat().st_size / 1e6:.1f} MB gzip -> {raw_size / 1e6:.1f} MB text in {seconds:.2f} s: "
          f"{raw_size / 1e6 / seconds:.0f} MB/s of text")
    started = time.perf_counter()
    rows = lines = 0
    for row in read_windows({"path": np.array([str(table)])}, ScoringConfig(), "utf-8"):
        rows += 1
        lines += row["text"][0].count(b"\n")
    seconds = time.perf_counter() - started
    print(f"read task (gunzip, segments, windows): {lines:,} lines in {rows} windows, {seconds:.1f} s: "
          f"{lines / seconds:,.0f} lines/s, {raw_size / 1e6 / seconds:.0f} MB/s of text")
    with gzip.open(table, "rb") as f:
        text = f.read()
    started = time.perf_counter()
    compressed = zlib.compress(text, GZIP_LEVEL)
    seconds = time.perf_counter() - started
    print(f"gzip level {GZIP_LEVEL} (the writer, merge-shards): {len(text) / 1e6 / seconds:.0f} MB/s of text in, "
          f"ratio {len(text) / len(compressed):.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "models" / "encdec")
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--short", type=int, default=10_000, help="lines of the slice that measures start-up")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--no-io", action="store_true", help="skip the I/O rates")
    args = parse_args(parser, {"lines": 400, "short": 200, "workers": [1], "no_io": True})
    if not args.table.exists():
        print(f"{args.table} not found: this benchmark needs the real phrase table", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.WARNING)
    ray = import_ray()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}, "
          f"ray {ray.__version__}; model {args.model.name}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        long, short = cut(args.table, args.lines, work / "long.gz"), cut(args.table, args.short, work / "short.gz")
        seconds, cpu = single(long, args.model, work / "single.gz")
        print(f"one process, 1 thread: {args.lines:,} pairs in {seconds:.1f} s: {args.lines / seconds:,.0f} pairs/s; "
              f"{args.lines / cpu:,.0f} pairs per CPU second", flush=True)
        started = time.perf_counter()
        ray.init(num_cpus=max(args.workers), include_dashboard=False, logging_level="ERROR")
        print(f"ray.init (a local instance of {max(args.workers)} CPUs): {time.perf_counter() - started:.1f} s")
        try:
            for workers in args.workers:
                short_s, _ = on_ray(short, args.model, work / "short.out.gz", workers)
                long_s, run = on_ray(long, args.model, work / "long.out.gz", workers)
                same = (work / "long.out.gz").read_bytes() == (work / "single.gz").read_bytes()
                steady = (args.lines - args.short) / (long_s - short_s)
                print(f"Ray, {workers} worker{'s' if workers > 1 else ''}: {args.lines:,} pairs in {long_s:.1f} s "
                      f"({args.lines / long_s:,.0f} pairs/s with start-up; {args.short:,} pairs in {short_s:.1f} s); "
                      f"steady {steady:,.0f} pairs/s; {run.pairs_per_cpu_second:,.0f} pairs per worker CPU second; "
                      f"output {'identical to' if same else 'DIFFERS from'} one process's", flush=True)
        finally:
            ray.shutdown()
    if not args.no_io:
        io_rates(args.table)
    print(f"load average after the runs: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
