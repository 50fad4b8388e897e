"""rerank train under torchrun: target tokens/s of 1 and 2 processes (one thread each) on the real Multi30k data.

The config is configs/training/recipe/encdec-2014.yaml with its global batch of 64 pairs (each of 2 processes
takes 32 of them), stopped after ``--updates`` updates and logging every ``--log-every``; the rate is
that of the log lines after the first (start-up and the first updates left out). The processes share
the machine with whatever else runs on it, so the load average is printed, and the CPU time of the
whole run (all processes, start-up and the final validation included).

    python bench/bench_distributed.py
    python bench/bench_distributed.py --processes 1 2 --updates 120 --log-every 20
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from quick import parse_args

from rerank.config import load_yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "training" / "recipe" / "encdec-2014.yaml"
LOG_LINE = re.compile(r"update (\d+): loss [\d.]+/token, ([\d.]+) updates/s, (\d+) target tokens/s")


def train(config_path: Path, processes: int, updates: int, log_every: int,
          work: Path) -> tuple[float, float, float, float]:
    """Updates/s and target tokens/s after the first log line, and the wall and CPU time of the whole run."""
    config = load_yaml(config_path)
    config["training"].update({"max_updates": updates, "log_every": log_every, "valid_every": 10**6,
                               "max_minutes": None, "threads": 1})
    config["output_dir"] = str(work / f"run{processes}")
    path = work / f"{config_path.stem}-{processes}.yaml"
    path.write_text(yaml.safe_dump(config))
    torchrun = Path(sys.executable).with_name("torchrun")
    started, children = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", str(processes), "-m", "rerank",
                             "train", "--config", str(path)], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if result.returncode != 0:
        raise SystemExit(f"torchrun with {processes} processes failed:\n{result.stderr[-3000:]}")
    windows = [(float(rate), float(tokens)) for _, rate, tokens in LOG_LINE.findall(result.stderr)][1:]
    if not windows:
        raise SystemExit(f"no log lines after the first in:\n{result.stderr[-3000:]}")
    seconds = [log_every / rate for rate, _ in windows]
    return (len(windows) * log_every / sum(seconds),
            sum(tokens * s for (_, tokens), s in zip(windows, seconds, strict=True)) / sum(seconds), wall, cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--updates", type=int, default=120)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--config", type=Path, default=CONFIG, help="the training config (default: %(default)s)")
    args = parse_args(parser, {"processes": [1], "updates": 6, "log_every": 2})
    config = args.config.resolve()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {config.relative_to(REPO)}, "
          f"{args.updates} updates, one thread per process")
    print(f"{'processes':>9} {'updates/s':>10} {'tokens/s':>9} {'speed-up':>9} {'wall s':>7} {'CPU s':>6}")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for processes in args.processes:
            updates_s, tokens_s, wall, cpu = train(config, processes, args.updates, args.log_every, Path(tmp))
            base = base or tokens_s
            print(f"{processes:>9} {updates_s:>10.2f} {tokens_s:>9.0f} {tokens_s / base:>8.2f}x {wall:>7.0f} "
                  f"{cpu:>6.0f}", flush=True)
    print(f"load average after the runs: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
