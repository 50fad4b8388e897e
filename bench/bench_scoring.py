"""Throughput of batched forced-decoding scores on the real Multi30k Moses files: the fast path against
the reference one in the same run, a naive loop, and this machine's own fp32 matrix-multiply rate.

For each small config (``configs/training/encdec-small.yaml``, ``configs/training/rnnsearch-small.yaml``), with a
trained model directory (``--model``) or else random weights and the vocabulary sizes of the config on the real
training data (throughput does not depend on the weights), it prints:

* phrase pairs/s of :class:`rerank.scoring.pairs.Scorer` on the first ``--pairs`` lines of the real phrase table;
* n-best hypotheses/s on the whole test_2016_flickr 100-best list (64,736 hypotheses, 1,000 sources);
  each by the fast path (each distinct target prefix of a source decoded once, the output layer at real
  positions, block by block) and by the reference path (:func:`rerank.models.seq2seq.reference_path`,
  ``share_prefixes: false``: every pair decoded whole, logits at every position), taking turns after
  each path has scored ``WARM_UP_PAIRS`` pairs untimed, with the largest difference of their ln p
  (the benchmark exits with status 1 if it is above ``TOLERANCE``, 1e-3);
* pairs/s of a naive loop that encodes and scores one pair at a time (reference path), on a sample;
* the achieved FLOP rate, as a share of the fp32 ``torch.mm`` rate (1024 x 1024) measured just before
  and just after each timed run (the higher of the two). FLOPs are the matrix-multiply FLOPs each path needs, as
  ``torch.utils.flop_counter.FlopCounterMode`` counts them, without padding: an encoder pass per
  distinct source of a window, then a decoder pass per pair (reference) or a decoder step per
  distinct prefix (fast), at their own lengths;
* with ``--precisions fp32 int8`` (the default on the CPU; fp32 alone on a GPU), the fast path in fp32 and
  with int8 weights (:meth:`rerank.models.seq2seq.Seq2Seq.set_precision`), timed in turn, their ratio, and the
  distribution of the int8 scores' differences from the fp32 ones;
* peak resident memory of this process;
* with ``--profile``, where the fast path's time went, by torch operator (see ``OpProfile`` in
  ``bench/machine.py``): the matrix multiplies' time and rate, the largest other operators, the time
  outside them, and the rate the matrix multiplies alone would allow.

With ``--full-table`` it also runs ``rerank score-table`` on the whole table (1,219,049 lines) in a
process of its own, reports its time and peak memory, and checks that every input line is in the
output, byte-identical but for the added value. The machine is shared: each run is repeated
(``--repeat``) and the load average is printed. ``--workloads`` with no kind and ``--naive 0`` leave
only the whole table.

With ``--device cuda`` the model is on the GPU (and ``score-table --device cuda`` scores the whole
table), the clocks are read after synchronising, the share is of the GPU's fp32 ``torch.mm`` rate on
4096 x 4096 matrices (no TF32, torch's default for fp32; the TF32 and bf16 rates are printed once),
the peak GPU memory of each run replaces the per-CPU-second figures, and the thread counts are
ignored (one run).

    python bench/bench_scoring.py
    python bench/bench_scoring.py --threads 1 2 --repeat 3
    python bench/bench_scoring.py --configs encdec-small --model runs/encdec-small --full-table
    python bench/bench_scoring.py --model examples/models/rnnsearch --configs rnnsearch-small --threads 1
    python bench/bench_scoring.py --model examples/models/rnnsearch --configs rnnsearch-small --threads 2 \
        --workloads table --pairs 5000 --naive 0 --no-reference --repeat 3
    python bench/bench_scoring.py --device cuda --configs rnnsearch-small --workloads \
        --naive 0 --full-table
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from machine import (
    add_device_argument,
    add_precisions_argument,
    add_profile_argument,
    check_profile,
    describe_gpu,
    device_of,
    flop_counter,
    is_gpu,
    matmul_rate,
    mib,
    precisions_of,
    profile_ops,
    sync,
)
from quick import parse_args

from rerank.formats.files import read_text
from rerank.formats.nbest import read_nbest
from rerank.formats.phrase_table import read_phrase_table
from rerank.formats.tokens import Pair
from rerank.models.architectures import build_model
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model, save_model
from rerank.models.seq2seq import Seq2Seq, reference_path
from rerank.models.vocab import EOS_ID, Vocabulary
from rerank.scoring.pairs import PrefixTrie, Scorer, ScoringConfig, source_tries
from rerank.training.config import load_train_config

REPO = Path(__file__).resolve().parents[1]
SEPARATOR = b"|||"
SHARED_DATA = "../shared/data/"  # how the configs name the shared data folder
WARM_UP_PAIRS = 2_000  # scored by each path before the clock starts
TOLERANCE = 1e-3  # largest |difference of ln p| (nats) allowed between the fast and the reference path (float32)


@dataclass
class Workload:
    name: str
    unit: str
    pairs: list[Pair]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the real data")
    parser.add_argument("--configs", nargs="+", default=["encdec-small", "rnnsearch-small"],
                        help="names of configs/training/*.yaml")
    parser.add_argument("--model", type=Path, help="a trained model directory (one config only)")
    parser.add_argument("--pairs", type=int, default=50_000, help="phrase-table lines timed (0: all)")
    parser.add_argument("--naive", type=int, default=300, help="pairs in the naive loop's sample (0: none)")
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per figure")
    parser.add_argument("--workloads", nargs="*", choices=["table", "nbest"], default=["table", "nbest"])
    parser.add_argument("--nbest-sentences", type=int, help="the n-best list's first N sentences only (default: all)")
    parser.add_argument("--full-table", action="store_true", help="also rerank score-table on the whole table")
    parser.add_argument("--no-reference", action="store_true", help="time the fast path only")
    add_precisions_argument(parser, "the fast path (the reference path runs fp32)")
    add_profile_argument(parser, "the fast path")
    add_device_argument(parser)
    args = parse_args(parser, {"pairs": 100, "naive": 3, "repeat": 1, "nbest_sentences": 2}, argv)
    device = device_of(args.device)
    gpu = is_gpu(device)
    check_profile(parser, args.profile, device)
    on = device if gpu else None  # where the timed work runs, for synchronising
    thread_counts = [0] if gpu else args.threads  # one run on a GPU
    if args.model and len(args.configs) != 1:
        parser.error("--model goes with one config")
    table = args.data / "moses-multi30k" / "model" / "phrase-table.gz"
    nbest_part = f", first {args.nbest_sentences} sentences" if args.nbest_sentences else ""
    workloads = [Workload(f"phrase table, first {args.pairs or 'all'} lines", "pairs", table_pairs(table, args.pairs))
                 if kind == "table" else Workload(f"n-best, test_2016_flickr 100-best{nbest_part}", "hyps",
                                 nbest_pairs(args.data, args.nbest_sentences))
                 for kind in args.workloads]
    print(f"{os.cpu_count()} CPUs, torch {torch.__version__}, threads {args.threads}, "
          f"load average {os.getloadavg()[0]:.1f}")
    if gpu:
        print(f"{describe_gpu(device)}; CPU threads do not matter here: one run, no thread loop")
    disagreements: list[str] = []
    precisions = precisions_of(parser, args.precisions, device)
    for name in args.configs:
        scorer = make_scorer(name, args.model, device, args.data)
        reference = Scorer(scorer.model, scorer.src_vocab, scorer.trg_vocab, ScoringConfig(share_prefixes=False))
        print(f"\n== {name}: {scorer.model.config.architecture}, vocabularies {len(scorer.src_vocab)} / "
              f"{len(scorer.trg_vocab)}, {'weights of ' + str(args.model) if args.model else 'random weights'}")
        cost = FlopModel.calibrate(scorer.model)
        with reference_path(scorer.model):
            reference_cost = FlopModel.calibrate(scorer.model)
        for workload in workloads:
            flops = {"fast": cost.prefix_flops(scorer, workload.pairs),
                     "reference": reference_cost.useful_flops(scorer, workload.pairs)}
            print(f"{workload.name}: {len(workload.pairs):,} {workload.unit}; MFLOP per {workload.unit[:-1]}: "
                  f"{flops['fast'] / len(workload.pairs) / 1e6:.1f} fast, "
                  f"{flops['reference'] / len(workload.pairs) / 1e6:.1f} reference")
            for threads in thread_counts:
                where = f"on {device}" if gpu else f"{threads} thread(s)"
                if not gpu:
                    torch.set_num_threads(threads)
                paths = [*(fast_path(p) for p in precisions), *["reference"] * (not args.no_reference)]
                runs: dict[str, list[tuple[float, float, float]]] = {path: [] for path in paths}
                memory = dict.fromkeys(runs, 0)
                scores = {}
                for path in paths:  # warm-up, untimed
                    scorer.model.set_precision("int8" if path == "fast int8" else "fp32")
                    work = reference if path == "reference" else scorer
                    with reference_path(scorer.model, path == "reference"):
                        score_all(work, workload.pairs[:WARM_UP_PAIRS])
                for _ in range(args.repeat):
                    for path in paths:
                        scorer.model.set_precision("int8" if path == "fast int8" else "fp32")
                        work = reference if path == "reference" else scorer
                        with reference_path(scorer.model, path == "reference"):
                            scores[path], timing, peak = timed(functools.partial(score_all, work, workload.pairs), on)
                        runs[path].append(timing)
                        memory[path] = max(memory[path], peak)
                scorer.model.set_precision("fp32")
                for path in paths:
                    report(f"  {path}, {where}", workload.unit, len(workload.pairs), flops[path.split()[0]],
                           runs[path], memory[path] if gpu else None)
                if "fast int8" in runs and "fast" in runs:
                    compare_int8(runs["fast"], runs["fast int8"], scores["fast"], scores["fast int8"], where)
                if "fast" not in runs or "reference" not in runs:
                    continue
                ratio = [r[1] / f[1] for f, r in zip(runs["fast"], runs["reference"], strict=True)]
                ratio_cpu = [r[2] / f[2] for f, r in zip(runs["fast"], runs["reference"], strict=True)]
                difference = np.abs(np.array(scores["fast"]) - np.array(scores["reference"])).max()
                by_cpu = "" if gpu else f"{statistics.median(ratio_cpu):.2f}x by CPU time; "
                print(f"  fast/reference, {where}: {statistics.median(ratio):.2f}x by the wall clock, "
                      f"{by_cpu}largest |difference of ln p| {difference:.1e}", flush=True)
                if not difference <= TOLERANCE:
                    disagreements.append(f"{name}, {workload.name}, {where}: the fast and the reference path's "
                                         f"ln p differ by up to {difference:.1e}")
                if args.profile:
                    _, profile = profile_ops(functools.partial(score_all, scorer, workload.pairs))
                    print(f"  fast, {where}, " + profile.describe(flops["fast"], max(mm for mm, _, _ in runs["fast"]),
                                                                  len(workload.pairs), workload.unit, "  "), flush=True)
        sample = table_sample(table_pairs(table, args.pairs), args.naive) if args.naive else []
        for threads in thread_counts if sample else []:
            where = f"on {device}" if gpu else f"{threads} thread(s)"
            if not gpu:
                torch.set_num_threads(threads)
            with reference_path(scorer.model):
                naive = [timed(functools.partial(naive_scores, scorer, sample), on) for _ in range(args.repeat)]
            report(f"  naive loop (reference path), {where}, {len(sample)} sampled phrase pairs", "pairs",
                   len(sample), reference_cost.useful_flops(scorer, sample, window=1), [t for _, t, _ in naive],
                   max(m for _, _, m in naive) if gpu else None)
        print(f"  peak resident memory of this process so far: {peak_rss_mib():,.0f} MiB")
        if args.full_table:
            full_table_run(scorer, table, args.model, args.threads[-1], device)
    print(f"\nload average after the runs: {os.getloadavg()[0]:.1f}")
    if disagreements:
        print("\n".join(disagreements) + f" (more than {TOLERANCE:g} allowed)", file=sys.stderr)
        return 1
    return 0


def fast_path(precision: str) -> str:
    return "fast" if precision == "fp32" else f"fast {precision}"


def compare_int8(fp32: list[tuple[float, float, float]], int8: list[tuple[float, float, float]],
                 fp32_scores: list[float], int8_scores: list[float], where: str) -> None:
    """The int8 fast path's speed-up over the fp32 one (runs taken in turn), and how far its ln p moved."""
    ratio = [f[1] / i[1] for f, i in zip(fp32, int8, strict=True)]
    difference = np.array(int8_scores) - np.array(fp32_scores)
    quantiles = np.quantile(np.abs(difference), [0.5, 0.9, 0.99, 1.0])
    print(f"  int8/fp32 (fast path), {where}: {statistics.median(ratio):.2f}x by the wall clock "
          f"(runs {', '.join(f'{r:.2f}' for r in ratio)}); ln p int8 - fp32: mean {difference.mean():+.4f}, "
          f"|difference| median {quantiles[0]:.4f}, 90% {quantiles[1]:.4f}, 99% {quantiles[2]:.4f}, "
          f"max {quantiles[3]:.4f}", flush=True)


def make_scorer(name: str, model_dir: Path | None, device: torch.device | None = None,
                shared: Path | None = None) -> Scorer:
    """The trained model in ``model_dir``, or the config's architecture with random weights and the
    vocabulary sizes the config gives on its real training data (read from ``shared`` in place of the
    config's ``../shared/data``), on ``device``."""
    device = device or torch.device("cpu")
    if model_dir is not None:
        return Scorer.from_loaded(load_model(model_dir, device))
    config = load_train_config(REPO / "configs" / "training" / f"{name}.yaml")
    data = config.data

    def path(name: str) -> Path:
        if shared is not None and name.startswith(SHARED_DATA):
            return shared / name.removeprefix(SHARED_DATA)
        return REPO / name

    sources = (line.split() for line in read_text(path(data.train.source)))
    targets = (line.split() for line in read_text(path(data.train.target)))
    src_vocab = Vocabulary.build(sources, data.src_vocab_size)
    trg_vocab = Vocabulary.build(targets, data.trg_vocab_size)
    torch.manual_seed(0)
    return Scorer(build_model(config.model, len(src_vocab), len(trg_vocab)).to(device), src_vocab, trg_vocab)


def table_pairs(path: Path, lines: int) -> list[Pair]:
    entries = read_phrase_table(path)
    return [(e.source.split(), e.target.split()) for e in (itertools.islice(entries, lines) if lines else entries)]


def nbest_pairs(data: Path, sentences: int | None = None) -> list[Pair]:
    """The test 100-best list's (source, hypothesis) pairs, of its first ``sentences`` sentences (default: all)."""
    sources = read_text(data / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.en")
    nbest = data / "moses-multi30k" / "nbest" / "test_2016_flickr.100best.gz"
    entries = read_nbest(nbest)
    if sentences is not None:
        entries = itertools.takewhile(lambda e: e.sentence_id < sentences, entries)
    return [(sources[e.sentence_id].split(), e.tokens) for e in entries]


def table_sample(pairs: list[Pair], size: int) -> list[Pair]:
    """Every k-th pair, so that the sample has the slice's mix of lengths."""
    return pairs[:: max(1, len(pairs) // size)][:size]


def timed(work: Callable[[], list[float]],
          device: torch.device | None = None) -> tuple[list[float], tuple[float, float, float], int]:
    """What ``work`` returns; the fp32 matmul rate (FLOP/s), the higher of those measured just before and just
    after (another job may hold the core during one of them), the seconds and the CPU seconds it takes; and on
    a GPU (``device``) the peak GPU memory of ``work`` (0 on the CPU), the clocks read after synchronising."""
    rate = matmul_rate(device=device)
    sync(device)
    if is_gpu(device):
        torch.cuda.reset_peak_memory_stats(device)
    start, cpu = time.perf_counter(), time.process_time()
    result = work()
    sync(device)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = torch.cuda.max_memory_allocated(device) if is_gpu(device) else 0
    return result, (max(rate, matmul_rate(device=device)), seconds, cpu), peak


def report(label: str, unit: str, count: int, flops: float, runs: list[tuple[float, float, float]],
           gpu_memory: int | None = None) -> None:
    """Median and best of the runs: items/s, achieved GFLOP/s, and its share of the matmul rate of that run,
    by the wall clock; and items per CPU second with the share the CPU time gives (the time the job had
    the cores, spread over torch's threads), or on a GPU the peak GPU memory (``gpu_memory``) instead."""
    threads = torch.get_num_threads()
    rates = [count / seconds for _, seconds, _ in runs]
    shares = [flops / seconds / mm for mm, seconds, _ in runs]
    cpu_rates = [count / cpu for _, _, cpu in runs]
    cpu_shares = [flops / (cpu / threads) / mm for mm, _, cpu in runs]
    best = int(np.argmax(rates))
    digits = 0 if gpu_memory is None else 1  # a GPU's shares are small
    rest = (f"per CPU second {statistics.median(cpu_rates):,.0f} {unit}, share "
            f"{100 * statistics.median(cpu_shares):.0f}%" if gpu_memory is None else
            f"peak GPU memory {mib(gpu_memory)}")
    print(f"{label}: {unit}/s median {statistics.median(rates):,.0f}, best {rates[best]:,.0f}; "
          f"{flops / runs[best][1] / 1e9:.1f} GFLOP/s at best = {100 * shares[best]:.{digits}f}% of the matmul rate "
          f"({runs[best][0] / 1e9:.0f} GFLOP/s; median share {100 * statistics.median(shares):.{digits}f}%, "
          f"matmul rates {', '.join(f'{mm / 1e9:.0f}' for mm, _, _ in runs)}); {rest}")


def naive_scores(scorer: Scorer, pairs: list[Pair]) -> list[float]:
    """One pair at a time: encode its source, force-decode its target."""
    model, scores, device = scorer.model, [], scorer.device
    with torch.inference_mode():
        for source, target in pairs:
            src, src_len = pad(to_ids([source], scorer.src_vocab))
            trg, _ = pad(to_ids([target], scorer.trg_vocab))
            scores.append(float(model.score(model.encode(src.to(device), src_len.to(device)), trg.to(device))))
    return scores


@dataclass
class FlopModel:
    """Matrix-multiply FLOPs of a model as functions of the source length S and target length T (with </s>):
    encoder a + b S, decoder c + d S + e T + f S T (attention costs S per target step); exact for these models."""

    encoder: np.ndarray  # (a, b)
    decoder: np.ndarray  # (c, d, e, f)
    step: np.ndarray  # (g, h): one decoding step of one row, g + h S (model.step: what a trie node costs)
    source_trie: np.ndarray | None  # (i, j): a source's decoder start, an encoder node (reads_source_prefixes)

    @classmethod
    def calibrate(cls, model: Seq2Seq) -> FlopModel:
        encoder = np.linalg.solve([[1, 1], [1, 2]], [encoder_flops(model, s) for s in (1, 2)])
        points = [(1, 1), (2, 1), (1, 2), (2, 2)]
        decoder = np.linalg.solve([[1, s, t, s * t] for s, t in points],
                                  [decoder_flops(model, s, t) for s, t in points])
        step_flops(model, 1)  # the first step computes the word tables, once per model
        step = np.linalg.solve([[1, 1], [1, 2]], [step_flops(model, s) for s in (1, 2)])
        source_trie = np.array(source_trie_flops(model)) if model.reads_source_prefixes else None
        result = cls(encoder, decoder, step, source_trie)
        assert result.encoder_cost(7) == encoder_flops(model, 7)
        assert result.decoder_cost(5, 9) == decoder_flops(model, 5, 9)
        assert float(result.step @ [1, 7]) == step_flops(model, 7)
        return result

    def encoder_cost(self, length: int) -> float:
        return float(self.encoder @ [1, length])

    def decoder_cost(self, source: int, target: int) -> float:
        return float(self.decoder @ [1, source, target, source * target])

    def prefix_flops(self, scorer: Scorer, pairs: list[Pair]) -> float:
        """The FLOPs of scoring with shared prefixes: an encoder pass per distinct source of each window and a
        decoder step (``model.step``) per node of each trie, as the scorer cuts them."""
        total = 0.0
        for part in scorer.windows(pairs):
            sources = {tuple(s): i for i, s in enumerate(dict.fromkeys(tuple(s) for s, _ in part))}
            if self.source_trie is None:
                total += sum(self.encoder_cost(len(s) + 1) for s in sources)
            else:  # a decoder start per source, an encoder step per node of each trie but its root
                tries = list(source_tries(to_ids(list(sources), scorer.src_vocab), scorer.config.max_tokens))
                total += float(self.source_trie @ [len(sources), sum(trie.first[-1] - 1 for _, trie in tries)])
            rows = np.array([sources[tuple(s)] for s, _ in part])
            source_len = np.array([len(s) + 1 for s in sources])[rows]
            targets, lengths = (x.numpy() for x in pad(to_ids([t for _, t in part], scorer.trg_vocab)))
            order = np.lexsort((*targets.T[::-1], rows))
            for batch in PrefixTrie.batches(targets[order], lengths[order], rows[order], scorer.config.max_tokens):
                chosen = order[batch]
                trie = PrefixTrie(targets[chosen], lengths[chosen], rows[chosen])
                nodes = trie.new.sum(1)  # the nodes each target adds, at its source's length
                total += float((self.step[0] + self.step[1] * source_len[chosen]) @ nodes)
        return total

    def useful_flops(self, scorer: Scorer, pairs: list[Pair], window: int | None = None) -> float:
        """The FLOPs the scorer needs: an encoder pass per distinct source of each window, a decoder pass per pair."""
        total = 0.0
        windows = scorer.windows(pairs) if window is None else \
            (pairs[i: i + window] for i in range(0, len(pairs), window))
        for part in windows:
            total += sum(self.encoder_cost(len(s) + 1) for s in {tuple(s) for s, _ in part})
            total += sum(self.decoder_cost(len(s) + 1, len(t) + 1) for s, t in part)
        return total


def on_model(model: Seq2Seq, *tensors: torch.Tensor) -> list[torch.Tensor]:
    device = next(model.parameters()).device
    return [t.to(device) for t in tensors]


def encoder_flops(model: Seq2Seq, length: int) -> int:
    src, src_len = on_model(model, *pad([[4] * (length - 1) + [EOS_ID]]))
    with torch.inference_mode(), flop_counter() as counter:
        model.encode(src, src_len)
    return counter.get_total_flops()


def decoder_flops(model: Seq2Seq, source: int, target: int) -> int:
    src, src_len = on_model(model, *pad([[4] * (source - 1) + [EOS_ID]]))
    trg, = on_model(model, pad([[4] * (target - 1) + [EOS_ID]])[0])
    with torch.inference_mode():
        state = model.encode(src, src_len)
        with flop_counter() as counter:
            model.score(state, trg)  # the fast path, or the reference one (teacher_forced and token_log_probs)
    return counter.get_total_flops()


def source_trie_flops(model: Seq2Seq) -> tuple[int, int]:
    """A source's decoder start from its encoder state, and one encoder step of a source trie's node."""
    with torch.inference_mode():
        nodes = model.encode_trie([])
        with flop_counter() as start:
            model.decoder_start(nodes, torch.ones(1, dtype=torch.int64, device=nodes.device))
        with flop_counter() as node:
            model.encode_trie([(torch.zeros(1, dtype=torch.int64, device=nodes.device),) * 2])
    return start.get_total_flops(), node.get_total_flops()


def step_flops(model: Seq2Seq, source: int) -> int:
    """One decoding step of one row whose source has ``source`` positions: features and output layer."""
    src, src_len = on_model(model, *pad([[4] * (source - 1) + [EOS_ID]]))
    with torch.inference_mode():
        state = model.encode(src, src_len)
        with flop_counter() as counter:
            model.step(torch.tensor([4], device=src.device), state)
    return counter.get_total_flops()


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def full_table_run(scorer: Scorer, table: Path, model_dir: Path | None, threads: int,
                   device: torch.device | None = None) -> None:
    """``rerank score-table`` on the whole table in a process of its own (on ``device``, a GPU, with
    ``--device``; its peak GPU memory written by the process at its end); then a line-by-line check."""
    gpu = is_gpu(device)
    with tempfile.TemporaryDirectory() as directory:
        if model_dir is None:
            model_dir = save_model(Path(directory) / "model", scorer.model, scorer.src_vocab, scorer.trg_vocab)
        out = Path(directory) / "scored.gz"
        arguments = ["-q", "score-table", str(table), "-o", str(out), "--model", str(model_dir)]
        peak_file = Path(directory) / "gpu-memory"
        if gpu:
            child = ("import sys, torch; from rerank.cli import main; status = main(sys.argv[2:]); "
                     "open(sys.argv[1], 'w').write(str(torch.cuda.max_memory_allocated())); sys.exit(status)")
            command = [sys.executable, "-c", child, str(peak_file), *arguments, "--device", str(device)]
        else:
            command = [sys.executable, "-m", "rerank", *arguments, "--threads", str(threads)]
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"score-table failed: {' '.join(command)}")
        lines = check_appended(table, out)
        where = f"--device {device}" if gpu else f"{threads} thread(s)"
        memory = f"peak GPU memory {mib(int(peak_file.read_text()))}, " if gpu else ""
        print(f"  rerank score-table, whole table, {where}: {lines:,} lines in {wall:.0f} s "
              f"({lines / wall:,.0f} pairs/s, start-up and gzip included), "
              f"CPU {usage.ru_utime + usage.ru_stime:.0f} s, {memory}"
              f"peak resident memory {usage.ru_maxrss / 1024:,.0f} MiB; every line identical but for the added value",
              flush=True)


def check_appended(table: Path, out: Path) -> int:
    """The number of lines; exits if a line of ``out`` is not its line of ``table`` plus one value in field 3."""
    with gzip.open(table, "rb") as before, gzip.open(out, "rb") as after:
        count = 0
        for count, (old, new) in enumerate(itertools.zip_longest(before, after), 1):
            if old is None or new is None:
                sys.exit(f"{out}: line {count}: the output has {'more' if old is None else 'fewer'} lines")
            old_fields, new_fields = old.split(SEPARATOR), new.split(SEPARATOR)
            body = old_fields[2].rstrip(b" ")
            trailing = old_fields[2][len(body):]
            added = new_fields[2][len(body) + 1: len(new_fields[2]) - len(trailing)]
            if (len(new_fields) != len(old_fields) or new_fields[:2] != old_fields[:2]
                    or new_fields[3:] != old_fields[3:] or new_fields[2] != body + b" " + added + trailing
                    or not added or b" " in added or not 0 < float(added) <= 1):
                sys.exit(f"{out}: line {count} differs from the input by more than one value: {new[:200]!r}")
    return count


def score_all(scorer: Scorer, pairs: list[Pair]) -> list[float]:
    return list(scorer.score(pairs))


if __name__ == "__main__":
    sys.exit(main())

