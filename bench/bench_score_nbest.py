"""Time and peak memory of ``rerank score-nbest`` on the full Multi30k test 100-best list.

Every run is a fresh ``python -m rerank score-nbest ...`` process writing a gzipped n-best list, so
the figures include start-up, loading the language model and the shortlist, reading and writing.
Wall time is measured around the process; its CPU time (user + system) and peak resident memory
(``ru_maxrss``) are what ``os.wait4`` reports for it. On a busy machine, CPU time is the steadier
figure; the load average is printed with the results. Three configurations are run: the word
penalty alone (mostly n-best input and output), the LM alone, and the LM with the word and UNK
penalties. With ``--model DIR`` the neural feature of that model is timed instead, at fp32 and with
``--precision int8``, the runs taken in turn; the distribution of the int8 values' differences from
the fp32 ones is printed beside them. ``--split val`` takes the val list, ``--sentences N`` its
first N sentences.

    python bench/bench_score_nbest.py                 # shared/data beside the repository
    python bench/bench_score_nbest.py --data DIR --repeat 5
    python bench/bench_score_nbest.py --split val --sentences 100 --model examples/models/rnnsearch
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

import numpy as np  # noqa: E402
from quick import first_sentences, parse_args  # noqa: E402

from rerank.formats.nbest import read_nbest  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the real data")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration (default 3)")
    parser.add_argument("--split", choices=["test_2016_flickr", "val"], default="test_2016_flickr",
                        help="whose 100-best list (default: %(default)s)")
    parser.add_argument("--sentences", type=int, help="only the first N sentences of the list")
    parser.add_argument("--model", type=Path, help="time this model's nmt feature at fp32 and int8 instead")
    parser.add_argument("--threads", type=int, help="score-nbest --threads")
    args = parse_args(parser, {"repeat": 1, "sentences": 2}, argv)
    moses, tok = args.data / "moses-multi30k", args.data / "multi30k" / "tok"
    lm = ["--lm", str(moses / "lm" / "train.fr.4.arpa")]
    unk = ["--unk-corpus", str(tok / "train.lc.norm.tok.fr")]
    configurations = {"WP": ["--word-penalty"], "LM": lm, "LM + WP + UNK": [*lm, "--word-penalty", *unk]}
    if args.model:
        model = ["--model", str(args.model)]
        configurations = {"NMT fp32": model, "NMT int8": [*model, "--precision", "int8"]}
    threads = ["--threads", str(args.threads)] if args.threads else []
    with tempfile.TemporaryDirectory() as directory:
        nbest = moses / "nbest" / f"{args.split}.100best.gz"
        if args.sentences is not None:
            nbest = first_sentences(nbest, args.sentences, Path(directory) / f"{args.split}.head.gz")
        base = [str(nbest), "--source", str(tok / f"{args.split}.lc.norm.tok.en"), *threads]
        lines, sentences = count(nbest)
        print(f"rerank score-nbest on {nbest.name} ({lines:,} lines, {sentences:,} sentences), "
              f"{args.repeat} runs each, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        print(f"{'features':<14} {'wall s':>7} {'CPU s':>6} {'lines/s':>8} {'sentences/s':>11} {'peak MiB':>9}"
              "   (medians; lines/s and sentences/s from CPU time)")
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in configurations}
        values: dict[str, np.ndarray] = {}
        for _ in range(args.repeat):  # the configurations in turn
            for name, options in configurations.items():
                out = Path(directory) / "out.gz"
                runs[name].append(run_once([*base, *options, "-o", str(out)]))
                written = count(out)
                if written != (lines, sentences):
                    sys.exit(f"{name}: wrote {written[0]:,} lines of {written[1]:,} sentences, "
                             f"not {lines:,} of {sentences:,}")
                values[name] = np.array([entry.dense[-1] for entry in read_nbest(out)])  # the added value
        for name in configurations:
            wall = statistics.median(run[0] for run in runs[name])
            cpu = statistics.median(run[1] for run in runs[name])
            peak = max(run[2] for run in runs[name]) / 1024
            print(f"{name:<14} {wall:>7.2f} {cpu:>6.2f} {lines / cpu:>8.0f} {sentences / cpu:>11.0f} {peak:>9.0f}")
        if args.model:
            fp32, int8 = runs["NMT fp32"], runs["NMT int8"]
            ratio = [f[0] / i[0] for f, i in zip(fp32, int8, strict=True)]
            cpu_ratio = [f[1] / i[1] for f, i in zip(fp32, int8, strict=True)]
            difference = values["NMT int8"] - values["NMT fp32"]
            quantiles = np.quantile(np.abs(difference), [0.5, 0.9, 0.99, 1.0])
            print(f"int8/fp32: {statistics.median(ratio):.2f}x by the wall clock (runs "
                  f"{', '.join(f'{r:.2f}' for r in ratio)}), {statistics.median(cpu_ratio):.2f}x by CPU time "
                  f"(start-up and loading included)\nln p int8 - fp32 per hypothesis: mean {difference.mean():+.4f}, "
                  f"|difference| median {quantiles[0]:.4f}, 90% {quantiles[1]:.4f}, 99% {quantiles[2]:.4f}, "
                  f"max {quantiles[3]:.4f}")
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
