"""What int8 neural features cost in BLEU: the all-features rescoring row with fp32 and with int8 features.

Scores the Moses 100-best lists of ``val`` and ``test_2016_flickr`` (``moses-multi30k/nbest``) with
the five features of ``configs/rescoring/rescore-multi30k-shipped.yaml`` (the shipped encoder-decoder ``RNN0``
and RNNsearch ``RNNsearch0``, the 4-gram ``LM1``, ``WP1``, ``UNK1``) twice, ``rerank score-nbest
--precision fp32`` and ``--precision int8``; tunes the 13 weights (Moses' 8 and the 5) with MERT on
``val`` from the shipped ``moses.ini``, seeds 1, 2, 3, once on the fp32 lists and once on the int8
ones; and prints BLEU (``rerank apply`` then ``rerank evaluate --tokenize none``, as ``rerank tune``
counts it), mean ± sd over the seeds, of:

* the fp32 weights on the fp32 features (the row as before),
* the same fp32 weights on the int8 features (int8 swapped in under tuned weights),
* the weights tuned on the int8 features, on the int8 features;

each on ``val`` and on ``test_2016_flickr``, and the distribution over every hypothesis of the full
``val`` list of the int8 − fp32 difference of each neural feature. Every step whose output exists
is skipped, so a stopped run picks up where it was (outputs in ``--work``, default
``runs/int8-rescoring``).

    python bench/bench_int8_rescoring.py                      # ../shared beside the repository
    python bench/bench_int8_rescoring.py --shared DIR --threads 2 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from quick import first_sentences, parse_args  # noqa: E402

from rerank.formats.nbest import read_nbest  # noqa: E402

SPLITS = ("val", "test_2016_flickr")
PRECISIONS = ("fp32", "int8")
NEURAL = ("RNN0", "RNNsearch0")
CONFIG = REPO / "configs" / "rescoring" / "rescore-multi30k-shipped.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                        help="the folder holding data/ (default: %(default)s)")
    parser.add_argument("--work", type=Path, default=REPO / "runs" / "int8-rescoring")
    parser.add_argument("--threads", type=int, default=1, help="score-nbest's threads (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sentences", type=int, help="the lists' first N sentences only (default: all)")
    args = parse_args(parser, {"seeds": [1], "sentences": 3}, argv)
    data = args.shared / "data"
    moses, tok = data / "moses-multi30k", data / "multi30k" / "tok"
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    nbest = {split: moses / "nbest" / f"{split}.100best.gz" for split in SPLITS}
    text = {(split, lang): tok / f"{split}.lc.norm.tok.{lang}" for split in SPLITS for lang in ("en", "fr")}
    if args.sentences is not None:  # the lists, sources and references cut to their first sentences
        for split in SPLITS:
            nbest[split] = first_sentences(nbest[split], args.sentences, work / f"{split}.100best.gz")
            for lang in ("en", "fr"):
                cut = work / text[split, lang].name
                lines = text[split, lang].read_text(encoding="utf-8").splitlines(keepends=True)[:args.sentences]
                cut.write_text("".join(lines), encoding="utf-8")
                text[split, lang] = cut
    rerank = [sys.executable, "-m", "rerank"]

    def run(step: str, output: Path, command: list[str]) -> None:
        if output.exists():
            return
        start = time.monotonic()
        with open(work / "log.txt", "a", encoding="utf-8") as log:  # the commands' own output
            log.write(f"== {step}: {' '.join(command)}\n")
            log.flush()
            done = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)  # paths relative to REPO
        if done.returncode:
            sys.exit(f"{step} failed (status {done.returncode}); see {work / 'log.txt'}")
        line = f"{step}: {time.monotonic() - start:.0f} s wall, load average {os.getloadavg()[0]:.1f}"
        with open(work / "times.txt", "a", encoding="utf-8") as times:
            times.write(line + "\n")
        if not step.startswith(("apply", "evaluate")):
            print(line, flush=True)

    for split in SPLITS:
        for precision in PRECISIONS:
            run(f"score-nbest {split} {precision}", work / f"{split}.{precision}.gz",
                [*rerank, "score-nbest", str(nbest[split]), "--source", str(text[split, "en"]), "--config", str(CONFIG),
                 "--precision", precision, "--threads", str(args.threads), "-o", str(work / f"{split}.{precision}.gz")])
    for precision in PRECISIONS:
        for seed in args.seeds:
            run(f"tune {precision} seed {seed}", work / f"weights.{precision}.{seed}.yaml",
                [*rerank, "tune", "--nbest", str(work / f"val.{precision}.gz"), "-r", str(text["val", "fr"]),
                 "--init", str(moses / "model" / "moses.ini"), "--optimizer", "mert", "--seed", str(seed),
                 "-o", str(work / f"weights.{precision}.{seed}.yaml")])

    rows = {"fp32 weights, fp32 features": ("fp32", "fp32"),
            "fp32 weights, int8 features": ("fp32", "int8"),
            "int8 weights, int8 features": ("int8", "int8")}
    print(f"\nMERT on val, seeds {' '.join(map(str, args.seeds))}; BLEU mean ± sd "
          f"(rerank evaluate --tokenize none)")
    print(f"{'':<30} {'val (each seed)':>30} {'test_2016_flickr (each seed)':>30}")
    signature = ""
    means: dict[tuple[str, str], float] = {}
    for name, (weights, features) in rows.items():
        cells = []
        for split in SPLITS:
            scores = []
            for seed in args.seeds:
                best = work / f"{split}.{features}-features.{weights}-weights.{seed}.1best"
                run(f"apply {best.name}", best,
                    [*rerank, "apply", str(work / f"{split}.{features}.gz"), "--weights",
                     str(work / f"weights.{weights}.{seed}.yaml"), "--source", str(text[split, "en"]),
                     "-o", str(best)])
                report = best.with_suffix(".json")
                run(f"evaluate {best.name}", report,
                    [*rerank, "evaluate", "--tokenize", "none", "-r", str(text[split, "fr"]),
                     str(best), "--json", str(report)])
                result = json.loads(report.read_text(encoding="utf-8"))
                scores.append(result["systems"][0]["bleu"])
                signature = result["bleu_signature"]
            spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
            means[name, split] = statistics.mean(scores)
            cells.append(f"{statistics.mean(scores):.2f} ± {spread:.2f} ({' '.join(f'{x:.2f}' for x in scores)})")
        print(f"{name:<30} {cells[0]:>30} {cells[1]:>30}")
    print(f"BLEU signature: {signature}")
    baseline = "fp32 weights, fp32 features"
    for name in list(rows)[1:]:
        print(f"{name} - {baseline}: " + ", ".join(
            f"{split} {means[name, split] - means[baseline, split]:+.3f}" for split in SPLITS))
    for split in SPLITS:
        same = [sum(a == b for a, b in zip(*(
            (work / f"{split}.{features}-features.fp32-weights.{seed}.1best").read_text(encoding="utf-8").splitlines()
            for features in PRECISIONS), strict=True)) for seed in args.seeds]
        print(f"{split}: 1-best with the fp32 weights the same on int8 as on fp32 features for "
              f"{', '.join(map(str, same))} sentences (seeds {' '.join(map(str, args.seeds))})")

    fp32, int8 = (feature_values(work / f"val.{precision}.gz") for precision in PRECISIONS)
    print(f"\nint8 − fp32 per hypothesis, val 100-best ({len(fp32[NEURAL[0]]):,} hypotheses), nats:")
    for label in NEURAL:
        difference = int8[label] - fp32[label]
        quantiles = np.quantile(np.abs(difference), [0.5, 0.9, 0.99, 1.0])
        print(f"{label:<11} mean {difference.mean():+.4f}, |difference| median {quantiles[0]:.4f}, "
              f"90% {quantiles[1]:.4f}, 99% {quantiles[2]:.4f}, max {quantiles[3]:.4f}; "
              f"fp32 values: mean {fp32[label].mean():.2f}")
    return 0


def feature_values(nbest: Path) -> dict[str, np.ndarray]:
    """The values of the neural features of every hypothesis of ``nbest``, in file order."""
    values: dict[str, list[float]] = {label: [] for label in NEURAL}
    offsets = None
    for entry in read_nbest(nbest):
        if offsets is None:
            offsets = entry.layout.offsets()
        for label in NEURAL:
            values[label].append(entry.dense[offsets[label]][0])
    return {label: np.array(column) for label, column in values.items()}


if __name__ == "__main__":
    sys.exit(main())
