"""Tuning speed and quality on the Moses Multi30k system: MERT, PRO and batch MIRA.

On ``val.100best.gz`` (1,014 sentences, 65,274 distinct hypotheses, 8 features) it times MERT
with 20 restarts (the first from the weights of Moses' tuned ``moses.ini``), PRO and MIRA, and
prints each one's tuning-set BLEU; then MERT over the five accumulated n-best lists of Moses'
own tuning run (what ``rerank tune --decoder`` optimises in its fifth iteration). Finally every
set of weights reranks the test_2016_flickr 100-best list, next to Moses' tuned weights and the
untuned defaults that Moses' ``train-model.perl`` writes.

    taskset -c 0 python bench/bench_tune.py --repeat 3

Loading (parsing the n-best lists and counting n-grams) is timed apart from the optimisers,
as Moses' ``extractor`` runs apart from ``mert``. BLEU is sacrebleu's on the tokenized text
(``tokenize="none"``), as Moses' ``mert`` computes it. Times are CPU seconds of this process
and wall-clock seconds; on a shared machine the best of ``--repeat`` runs is the fairer figure.
The bar: Moses' C++ ``mert`` with 20 random restarts takes about 17 s on this list and reaches
BLEU 55.65.

With ``--moses DIR`` (Moses' ``bin/``), it first times Moses' ``extractor`` + ``kbmira`` and
``extractor`` + ``pro`` against rerank's MIRA and PRO without standardisation (Moses' algorithms) on
the same list, rerank's time split into reading the list, BLEU statistics and the optimiser; the
children's CPU seconds come from ``getrusage``. It exits with status 1 when rerank's MIRA BLEU is
more than 0.5 below kbmira's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as Moses' mert
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from quick import first_sentences, parse_args

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rerank.formats.files import read_text  # noqa: E402
from rerank.formats.nbest import read_nbest  # noqa: E402
from rerank.formats.weights import load_weights  # noqa: E402
from rerank.tune.config import MiraConfig, ProConfig, TuneConfig  # noqa: E402
from rerank.tune.data import NBestPool, TuningData, aligned_weights  # noqa: E402
from rerank.tune.mert import mert, mert_bounds  # noqa: E402
from rerank.tune.mira import mira  # noqa: E402
from rerank.tune.pro import pro  # noqa: E402
from rerank.tune.stats import BleuStatistics  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
SYSTEM = SHARED / "moses-multi30k"
TOK = SHARED / "multi30k" / "tok"
# the [weight] section train-model.perl writes before tuning
UNTUNED = {"Distortion0": (0.3,), "LM0": (0.5,), "WordPenalty0": (-1.0,), "PhrasePenalty0": (0.2,),
           "TranslationModel0": (0.2, 0.2, 0.2, 0.2)}


def moses_tuning_bleu() -> str:
    """The dev BLEU of the last iteration in Moses' tuning.log, as it is written there."""
    lines = [line for line in read_text(SYSTEM / "model/tuning.log") if line.strip()]
    return f"{100 * float(lines[-1].split()[-1]):.2f}" if lines else "?"


def timed(function, repeat: int):
    """``function()``'s result, and the CPU and wall-clock seconds of each of ``repeat`` calls."""
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        result = function()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return result, cpu, wall


def seconds(cpu: list[float], wall: list[float]) -> str:
    if len(cpu) == 1:
        return f"{cpu[0]:6.2f} s CPU, {wall[0]:6.2f} s wall"
    return (f"{min(cpu):6.2f} s CPU (median {statistics.median(cpu):.2f}), "
            f"{min(wall):6.2f} s wall (median {statistics.median(wall):.2f}) over {len(cpu)} runs")


def load(paths: list[Path], references: Path, sentences: int | None = None) -> tuple[TuningData, BleuStatistics]:
    """The n-best lists ``paths`` (their first ``sentences`` sentences, default all) and their BLEU statistics."""
    bleu = BleuStatistics([read_text(references)[:sentences]])
    pool = NBestPool(bleu, reference_name=str(references))
    with tempfile.TemporaryDirectory() as work:
        for i, path in enumerate(paths):
            pool.add(path if sentences is None else first_sentences(path, sentences, Path(work) / f"{i}.gz"))
    return pool.data(), bleu


def child_seconds(argv: list[str]) -> tuple[float, float]:
    """Run a Moses program; its CPU seconds (user + system, from getrusage) and wall-clock seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def against_moses(moses_bin: Path, config: TuneConfig, repeat: int) -> bool:
    """extractor + kbmira and extractor + pro against rerank's MIRA and PRO (no standardisation) on
    val.100best; True when rerank's MIRA is within 0.5 BLEU of kbmira's (or above)."""
    nbest, reference = SYSTEM / "nbest/val.100best.gz", TOK / "val.lc.norm.tok.fr"
    print(f"== against Moses' extractor + kbmira / pro on {nbest.name} (best of {repeat}) ==")
    with tempfile.TemporaryDirectory() as work:
        plain = Path(work) / "val.nbest"
        plain.write_text("".join(line + "\n" for line in read_text(nbest)), encoding="utf-8")
        scores, features = Path(work) / "scores.dat", Path(work) / "features.dat"
        dev, dev_bleu = load([nbest], reference)
        moses = aligned_weights(load_weights(SYSTEM / "model/moses.ini"), dev.layout, SYSTEM / "model/moses.ini")
        init = Path(work) / "init.dense"
        init.write_text("".join(f"F{i}= {w!r}\n" for i, w in enumerate(moses.tolist())))
        output = Path(work) / "kbmira.weights"
        programs = {
            "extractor": [str(moses_bin / "extractor"), "-r", str(reference), "-n", str(plain), "-S", str(scores),
                          "-F", str(features)],
            "kbmira": [str(moses_bin / "kbmira"), "-J", str(config.mira.epochs), "-r", str(config.seed),
                       "-d", str(init), "-S", str(scores), "-F", str(features), "-o", str(output)],
            "pro": [str(moses_bin / "pro"), "-r", str(config.seed), "-S", str(scores), "-F", str(features),
                    "-o", str(Path(work) / "pairs")]}
        moses_times = {}
        for name, argv in programs.items():
            runs = [child_seconds(argv) for _ in range(repeat)]
            moses_times[name] = (min(c for c, _ in runs), min(w for _, w in runs))
            print(f"{name:10s} {moses_times[name][0]:6.2f} s CPU, {moses_times[name][1]:6.2f} s wall")
        kbmira = np.array([float(line.split()[1]) for line in read_text(output)])
        kbmira_bleu = dev_bleu.score(dev.corpus_stats(kbmira)).score
        for total in ("kbmira", "pro"):
            cpu = moses_times["extractor"][0] + moses_times[total][0]
            wall = moses_times["extractor"][1] + moses_times[total][1]
            print(f"extractor + {total}: {cpu:.2f} s CPU, {wall:.2f} s wall"
                  + (" (without MegaM, which fits pro's pairs)" if total == "pro" else ""))
        _, cpu, wall = timed(lambda: sum(1 for _ in read_nbest(nbest)), repeat)
        print(f"rerank reading the list:          {seconds([min(cpu)], [min(wall)])}")
        _, load_cpu, load_wall = timed(lambda: load([nbest], reference), repeat)
        print(f"rerank reading + BLEU statistics: {seconds([min(load_cpu)], [min(load_wall)])}")
        mira_config = MiraConfig(epochs=config.mira.epochs, standardize=False)
        result, cpu, wall = timed(lambda: mira(dev, moses, mira_config, np.random.default_rng(config.seed)), repeat)
        print(f"rerank MIRA ({mira_config.epochs} epochs, no standardisation): {seconds([min(cpu)], [min(wall)])}; "
              f"BLEU {result.bleu:.2f} (kbmira {kbmira_bleu:.2f}); with reading: {min(load_cpu) + min(cpu):.2f} s CPU")
        mira_bleu = result.bleu
        pro_config = ProConfig(standardize=False)
        pro_result, cpu, wall = timed(lambda: pro(dev, pro_config, np.random.default_rng(config.seed)), repeat)
        print(f"rerank PRO (pairs and regression, no standardisation): {seconds([min(cpu)], [min(wall)])}; "
              f"BLEU {dev_bleu.score(dev.corpus_stats(pro_result.weights)).score:.2f}; with reading: "
              f"{min(load_cpu) + min(cpu):.2f} s CPU\n")
    return mira_bleu >= kbmira_bleu - 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="time each optimiser this many times")
    parser.add_argument("--seed", type=int, default=TuneConfig().seed)
    parser.add_argument("--moses", type=Path, metavar="BIN", help="Moses' bin/ (extractor, kbmira, pro): compare")
    parser.add_argument("--only-moses", action="store_true", help="with --moses: only the comparison")
    parser.add_argument("--sentences", type=int, help="the lists' first N sentences only (default: all)")
    parser.add_argument("--restarts", type=int, default=TuneConfig().mert.restarts,
                        help="MERT's restarts (default: %(default)s)")
    args = parse_args(parser, {"sentences": 20, "restarts": 2})
    if not SYSTEM.is_dir():
        sys.exit(f"needs the Moses Multi30k system at {SYSTEM}")
    config = TuneConfig(seed=args.seed, mert=dataclasses.replace(TuneConfig().mert, restarts=args.restarts))
    agrees = against_moses(args.moses, config, args.repeat) if args.moses is not None else True
    if args.only_moses:
        sys.exit(0 if agrees else "rerank's MIRA is more than 0.5 BLEU below kbmira's")
    results: dict[str, np.ndarray] = {}

    def score(data: TuningData, bleu: BleuStatistics, weights: np.ndarray) -> float:
        return bleu.score(data.corpus_stats(weights)).score

    print("== val.100best.gz: 1 n-best list ==")
    (dev, dev_bleu), cpu, wall = timed(lambda: load([SYSTEM / "nbest/val.100best.gz"],
                                                   TOK / "val.lc.norm.tok.fr", args.sentences), 1)
    print(f"load + BLEU statistics: {seconds(cpu, wall)}; {dev.num_sentences} sentences, "
          f"{int(dev.counts.sum())} distinct hypotheses, {dev.dims} features")
    print(f"signature: {dev_bleu.signature()}")
    moses = aligned_weights(load_weights(SYSTEM / "model/moses.ini"), dev.layout, SYSTEM / "model/moses.ini")
    untuned = aligned_weights(UNTUNED, dev.layout, "train-model.perl defaults")
    print(f"Moses' 1-best (its tuned weights): BLEU {score(dev, dev_bleu, moses):.2f}; "
          f"untuned defaults: BLEU {score(dev, dev_bleu, untuned):.2f}")
    bounds = mert_bounds(dev.layout, config.mert)
    for name, start in (("moses.ini", moses), ("untuned", untuned)):
        result, cpu, wall = timed(lambda start=start: mert(dev, start, config.mert, bounds,
                                                           np.random.default_rng(args.seed)),
                                  args.repeat)
        runs = sum(r.iterations for r in result.runs)
        print(f"MERT, {config.mert.restarts} restarts, from the {name} weights: BLEU {result.bleu:.2f} "
              f"({result.bleu:.4f}); {seconds(cpu, wall)}; {runs} iterations")
        results[f"MERT val.100best from {name}"] = result.weights
    result, cpu, wall = timed(lambda: pro(dev, config.pro, np.random.default_rng(args.seed)), args.repeat)
    print(f"PRO: BLEU {score(dev, dev_bleu, result.weights):.2f}; {seconds(cpu, wall)}; {result.pairs} pairs")
    results["PRO val.100best"] = result.weights
    result, cpu, wall = timed(lambda: mira(dev, moses, config.mira, np.random.default_rng(args.seed)), args.repeat)
    print(f"MIRA, {config.mira.epochs} epochs, from the moses.ini weights: BLEU {result.bleu:.2f} "
          f"(epoch {result.epoch}); {seconds(cpu, wall)}")
    results["MIRA val.100best"] = result.weights

    print("\n== tuning/run1-5.best100.out.gz: the 5 accumulated lists of Moses' tuning ==")
    paths = [SYSTEM / f"tuning/run{i}.best100.out.gz" for i in range(1, 6)]
    (tuning, tuning_bleu), cpu, wall = timed(lambda: load(paths, TOK / "val.lc.norm.tok.fr", args.sentences), 1)
    print(f"load + BLEU statistics: {seconds(cpu, wall)}; {int(tuning.counts.sum())} distinct hypotheses "
          f"(at most {tuning.features.shape[1]} for a sentence)")
    result, cpu, wall = timed(lambda: mert(tuning, moses, config.mert, bounds, np.random.default_rng(args.seed)),
                              args.repeat)
    print(f"MERT, {config.mert.restarts} restarts, from the moses.ini weights: BLEU {result.bleu:.2f} on the 5 lists; "
          f"{seconds(cpu, wall)}; Moses' mert reported {moses_tuning_bleu()} on them (tuning.log, last iteration)")
    results["MERT 5 tuning lists"] = result.weights

    print("\n== val.100best.gz (dev) and test_2016_flickr.100best.gz (test) reranked ==")
    test, test_bleu = load([SYSTEM / "nbest/test_2016_flickr.100best.gz"], TOK / "test_2016_flickr.lc.norm.tok.fr",
                          args.sentences)
    rows = {"untuned (train-model.perl defaults)": untuned, "Moses' tuned weights (moses.ini)": moses, **results}
    for name, weights in rows.items():
        print(f"{name:40s} dev {score(dev, dev_bleu, weights):6.2f}   test {score(test, test_bleu, weights):6.2f}")
    if not agrees:
        sys.exit("rerank's MIRA is more than 0.5 BLEU below kbmira's")


if __name__ == "__main__":
    main()
