"""Time and peak memory of ``rerank score-nbest`` on the full Multi30k test 100-best list.

Every run is a fresh ``python -m rerank score-nbest ...`` process writing a gzipped n-best list, so
the figures include start-up, loading the language model and the shortlist, reading and writing.
Wall time is measured around the process; its CPU time (user + system) and peak resident memory
(``ru_maxrss``) are what ``os.wait4`` reports for it. On a busy machine, CPU time is the steadier
figure; the load average is printed with the results. Three configurations are run: the word
penalty alone (mostly n-best input and output), the LM alone, and the LM with the word and UNK
penalties.

    python bench/bench_score_nbest.py                 # shared/data beside the repository
    python bench/bench_score_nbest.py --data DIR --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rerank.formats.nbest import read_nbest  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the real data")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration (default 3)")
    args = parser.parse_args(argv)
    moses, tok = args.data / "moses-multi30k", args.data / "multi30k" / "tok"
    nbest = moses / "nbest" / "test_2016_flickr.100best.gz"
    base = [str(nbest), "--source", str(tok / "test_2016_flickr.lc.norm.tok.en")]
    lm = ["--lm", str(moses / "lm" / "train.fr.4.arpa")]
    unk = ["--unk-corpus", str(tok / "train.lc.norm.tok.fr")]
    configurations = {"WP": ["--word-penalty"], "LM": lm, "LM + WP + UNK": [*lm, "--word-penalty", *unk]}
    lines, sentences = count(nbest)
    print(f"rerank score-nbest on {nbest.name} ({lines:,} lines, {sentences:,} sentences), "
          f"{args.repeat} runs each, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'features':<14} {'wall s':>7} {'CPU s':>6} {'lines/s':>8} {'sentences/s':>11} {'peak MiB':>9}"
          "   (medians; lines/s and sentences/s from CPU time)")
    with tempfile.TemporaryDirectory() as directory:
        for name, options in configurations.items():
            out = Path(directory) / "out.gz"
            runs = [run_once([*base, *options, "-o", str(out)]) for _ in range(args.repeat)]
            written = count(out)
            if written != (lines, sentences):
                sys.exit(f"{name}: wrote {written[0]:,} lines of {written[1]:,} sentences, "
                         f"not {lines:,} of {sentences:,}")
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            peak = max(run[2] for run in runs) / 1024
            print(f"{name:<14} {wall:>7.2f} {cpu:>6.2f} {lines / cpu:>8.0f} {sentences / cpu:>11.0f} {peak:>9.0f}")
    print(f"load average after the runs: {os.getloadavg()[0]:.1f}")
    return 0


def count(nbest: Path) -> tuple[int, int]:
    """The lines and the distinct sentence ids of an n-best list."""
    lines, ids = 0, set()
    for entry in read_nbest(nbest):
        lines += 1
        ids.add(entry.sentence_id)
    return lines, len(ids)


def run_once(arguments: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (KiB) of one ``rerank score-nbest`` process."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "rerank", "-q", "score-nbest", *arguments],
                                   stderr=errors, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            sys.exit(f"score-nbest failed ({process.returncode}): {errors.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


if __name__ == "__main__":
    sys.exit(main())
