"""Decoding speed: batched beam search by the fast path and by the reference one, and one sentence at a
time, in the same run.

Translates the Multi30k test_2016_flickr source (1,000 sentences) at beams 1, 5 and 10 and
prints sentences per second, batched (``rerank.search.translate.translate``: length-sorted batches)
by the fast path (the model's step stops before the output layer, whose logits are normalised and
searched ``OUTPUT_ROWS`` rows at a time) and by the reference path
(:func:`rerank.models.seq2seq.reference_path`: the whole (rows, V) log-probabilities of every step),
taking turns, by the wall clock and per CPU second; the matrix-multiply FLOPs of the fast search
(``FlopCounterMode``, one untimed pass) and the share of the machine's fp32 matmul rate they reach;
one sentence at a time (``beam_search`` on batches of one) against batched decoding of the same
``--single-sentences`` sentences (the "batching" column); and whether all gave the same
translations. It exits with status 1 when the fast and the reference path give different best
translations for more than ``MAX_DIFFERENT`` (0.5%) of the sentences at any beam. With ``--precisions
fp32 int8`` (the default on the CPU; fp32 alone on a GPU) the fast search also runs with int8 weights
(:meth:`rerank.models.seq2seq.Seq2Seq.set_precision`), in turn with fp32, and prints its rate, the
ratio of each pair of runs and how many best translations are the same as fp32's. Beside them,
the ceiling that batching can reach: how much faster the largest matrix multiply of a decoding
step (the output layer, ``rows × units`` by ``units × vocabulary``) runs per row at batch·beam
rows than at the beam's own rows, since one sentence with a beam of K already multiplies K rows at
a time. Decoding only: the model is loaded and the text read before the clock starts; each figure
is one timed pass after a short warm-up. With ``--profile`` each path runs once more under the torch
profiler (see ``OpProfile`` in ``bench/machine.py``).

    python bench/bench_translate.py --model runs/rnnsearch-small
    python bench/bench_translate.py                  # random weights with the small config's sizes
    python bench/bench_translate.py --model examples/models/rnnsearch --beams 10 --sentences 300 --threads 2 \
        --repeat 3 --no-reference
    python bench/bench_translate.py --model runs/rnnsearch-small --device cuda

With ``--device cuda`` the model and the searches run on the GPU, the clocks are read after
synchronising, the share is of the GPU's fp32 rate (no TF32, torch's default; the TF32 and bf16
rates are printed once), the peak GPU memory of the fast and the reference search replaces the
per-CPU-second columns, and ``--threads`` is ignored.

A random model rarely ends a hypothesis, so its outputs run to the length limit: the figures of
a trained model are the ones to quote. The timings are wall-clock, on whatever else the machine
is running.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import torch
from machine import (
    Timing,
    add_device_argument,
    add_precisions_argument,
    add_profile_argument,
    check_profile,
    describe,
    device_of,
    flop_counter,
    is_gpu,
    mib,
    precisions_of,
    profile_ops,
    share,
    sync,
    timed,
)
from quick import parse_args

from rerank.config import from_dict, load_yaml
from rerank.models.architectures import build_model
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model
from rerank.models.config import ModelConfig
from rerank.models.seq2seq import Seq2Seq, reference_path
from rerank.models.vocab import Vocabulary
from rerank.search.beam import Hypothesis, LengthPenalty, SearchConfig, beam_search
from rerank.search.translate import translate
from rerank.training.data import read_parallel

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
TOK = Path("multi30k") / "tok"
SOURCE = TOK / "test_2016_flickr.lc.norm.tok.en"
SMALL_CONFIG = REPO / "configs" / "training" / "rnnsearch-small.yaml"
MAX_DIFFERENT = 0.005  # share of sentences whose best translation may differ between the paths (float32 ties)


def random_small_model(data_dir: Path = DATA) -> tuple[Seq2Seq, Vocabulary]:
    """The small config's architecture with random weights, and its vocabularies built from the training data."""
    data = load_yaml(SMALL_CONFIG)
    config = from_dict(ModelConfig, data["model"], str(SMALL_CONFIG), prefix="model")
    tok = data_dir / TOK
    corpus = read_parallel(tok / "train.lc.norm.tok.en", tok / "train.lc.norm.tok.fr")
    src_vocab = Vocabulary.build(corpus.sources, data["data"]["src_vocab_size"])
    trg_vocab = Vocabulary.build(corpus.targets, data["data"]["trg_vocab_size"])
    torch.manual_seed(1234)
    return build_model(config, len(src_vocab), len(trg_vocab)).eval(), src_vocab


def one_at_a_time(model: Seq2Seq, src_vocab: Vocabulary, sentences: list[list[str]],
                  config: SearchConfig, device: torch.device | None = None) -> list[list[Hypothesis]]:
    results = []
    for ids in to_ids(sentences, src_vocab):
        src, src_len = pad([ids])
        results += beam_search(model, src if device is None else src.to(device), src_len, config)
    return results


def matmul_ceiling(model: Seq2Seq, batched_rows: int, single_rows: int) -> float:
    """How much faster per row the model's largest linear layer multiplies ``batched_rows`` rows than
    ``single_rows`` (on the model's device)."""
    layer = max((m for m in model.modules() if isinstance(m, torch.nn.Linear)), key=lambda m: m.weight.numel())
    weight = layer.weight.detach().t().contiguous()
    device = weight.device

    def seconds_per_row(rows: int) -> float:
        x = torch.randn(rows, weight.shape[0], device=device)
        repeats = max(5, min(20000 // rows, int(4e9 // (2 * rows * weight.numel()))))  # at most ~4 GFLOP
        for _ in range(3):
            x @ weight
        sync(device)
        start = time.perf_counter()
        for _ in range(repeats):
            x @ weight
        sync(device)
        return (time.perf_counter() - start) / (repeats * rows)

    return seconds_per_row(single_rows) / seconds_per_row(batched_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="model directory (default: random weights, small config)")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (default: %(default)s)")
    parser.add_argument("--source", help=f"tokenised source text (default: DATA/{SOURCE})")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5, 10])
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--sentences", type=int, help="only the first N sentences")
    parser.add_argument("--single-sentences", type=int, default=200,
                        help="time one-at-a-time decoding on the first N sentences only (default: %(default)s)")
    parser.add_argument("--length-penalty", default="none", choices=["none", "average", "wu"])
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    add_profile_argument(parser, "each path")
    parser.add_argument("--repeat", type=int, default=1, help="timed passes per path (the fastest is shown)")
    add_precisions_argument(parser, "the fast search")
    parser.add_argument("--no-reference", action="store_true", help="time the fast path only (and no one-at-a-time)")
    add_device_argument(parser)
    args = parse_args(parser, {"model": str(REPO / "examples" / "models" / "rnnsearch"), "beams": [1, 3],
                                      "sentences": 6, "single_sentences": 2, "batch_size": 3})
    device = device_of(args.device)
    gpu = is_gpu(device)
    check_profile(parser, args.profile, device)
    args.precisions = precisions_of(parser, args.precisions, device)
    on = device if gpu else None  # where the searches' tensors go: the CPU's calls stay as they were
    if args.source is None:
        args.source = str(args.data / SOURCE)

    if args.threads and not gpu:
        torch.set_num_threads(args.threads)
    if args.model:
        loaded = load_model(args.model, device)
        model, src_vocab, name = loaded.model, loaded.src_vocab, args.model
    else:
        model, src_vocab = random_small_model(args.data)
        model.to(device)
        name = f"random weights, {SMALL_CONFIG.name}"
    with open(args.source, encoding="utf-8") as f:
        sentences = [line.split() for line in f][: args.sentences]
    single = sentences[: args.single_sentences]
    print(f"model: {name} ({model.config.architecture}, hidden {model.config.hidden_size}, "
          f"target vocabulary {model.trg_vocab_size})")
    threads = f"on {device}, CPU threads ignored" if gpu else f"{torch.get_num_threads()} threads"
    print(f"source: {args.source}: {len(sentences)} sentences, mean {statistics.mean(map(len, sentences)):.1f} "
          f"words; batches of {args.batch_size}; one at a time on {len(single)}; torch {torch.__version__}, "
          f"{threads}; length penalty {args.length_penalty}")
    if gpu:
        print(f"{describe(device)}\n{'beam':>4}  {'fast sent/s':>11}  {'reference':>9}  {'fast/ref':>8}  "
              f"{'share':>5}  {'peak GPU memory, fast / ref':>27}  {'one at a time':>13}  {'batching':>8}  "
              f"{'matmul ceiling':>14}  {'mean length':>11}  {'same output':>11}")
    else:
        print(f"{describe()}\n{'beam':>4}  {'fast sent/s':>11} {'per CPU-s':>9}  {'reference':>9} {'per CPU-s':>9}  "
              f"{'fast/ref (CPU)':>14}  {'share':>5} {'share (CPU)':>11}  {'one at a time':>13}  {'batching':>8}  "
              f"{'matmul ceiling':>14}  {'mean length':>11}  {'same output':>11}")
    disagreements: list[str] = []
    for beam in args.beams:
        config = SearchConfig(beam_size=beam, length_penalty=LengthPenalty(args.length_penalty))
        for precision in args.precisions:  # warm-up (and the int8 copies made)
            model.set_precision(precision)
            list(translate(model, src_vocab, sentences[:args.batch_size], config, args.batch_size, device))
        model.set_precision("fp32")
        work = functools.partial(translate_all, model, src_vocab, sentences, config, args.batch_size, device)
        with flop_counter() as counter:
            work()
        flops = counter.get_total_flops()
        paths = ["fast", *["fast int8"] * ("int8" in args.precisions), *["reference"] * (not args.no_reference)]
        runs: dict[str, list[Timing]] = {path: [] for path in paths}
        outputs = {}
        for _ in range(args.repeat):
            for path in runs:
                model.set_precision("int8" if path == "fast int8" else "fp32")
                with reference_path(model, path == "reference"):
                    outputs[path], timing = timed(work, device=on)
                runs[path].append(timing)
        model.set_precision("fp32")
        if "fast int8" in runs:
            compare_int8(runs["fast"], runs["fast int8"], outputs["fast"], outputs["fast int8"], beam, len(sentences))
        if args.no_reference:
            continue
        fast, reference = (min(runs[path], key=lambda t: t.wall) for path in ("fast", "reference"))
        alone, single_timing = timed(functools.partial(one_at_a_time, model, src_vocab, single, config, on),
                                     rate=False, device=on)
        # batching against one sentence at a time: the same sentences, the same count, both timed warm
        batched_single, batched_single_timing = timed(
            functools.partial(translate_all, model, src_vocab, single, config, args.batch_size, device),
            rate=False, device=on)
        batching = single_timing.wall / batched_single_timing.wall
        batched = outputs["fast"]
        same = sum(a[0].tokens == b[0].tokens == c[0].tokens
                   for a, b, c in zip(batched_single, outputs["reference"], alone, strict=False))
        same_all = sum(a[0].tokens == b[0].tokens for a, b in zip(batched, outputs["reference"], strict=True))
        if len(sentences) - same_all > MAX_DIFFERENT * len(sentences):
            disagreements.append(f"beam {beam}: the fast and the reference path differ on "
                                 f"{len(sentences) - same_all} of {len(sentences)} best translations")
        length = statistics.mean(len(h[0].tokens) for h in batched)
        ceiling = matmul_ceiling(model, args.batch_size * beam, beam)
        rate = len(sentences) / fast.wall
        if gpu:
            print(f"{beam:>4}  {rate:>11.1f}  {len(sentences) / reference.wall:>9.1f}  "
                  f"{reference.wall / fast.wall:>7.2f}x  {100 * share(flops, fast):>4.1f}%  "
                  f"{mib(fast.memory) + ' / ' + mib(reference.memory):>27}  "
                  f"{len(single) / single_timing.wall:>13.1f}  {batching:>7.1f}x  "
                  f"{ceiling:>13.1f}x  {length:>11.1f}  {same:>5}/{len(single):<5}", flush=True)
        else:
            print(f"{beam:>4}  {rate:>11.1f} {len(sentences) / fast.cpu:>9.1f}  "
                  f"{len(sentences) / reference.wall:>9.1f} "
                  f"{len(sentences) / reference.cpu:>9.1f}  {reference.cpu / fast.cpu:>13.2f}x  "
                  f"{100 * share(flops, fast):>4.0f}% {100 * share(flops, fast, cpu=True):>10.0f}%  "
                  f"{len(single) / single_timing.wall:>13.1f}  {batching:>7.1f}x  "
                  f"{ceiling:>13.1f}x  {length:>11.1f}  {same:>5}/{len(single):<5}", flush=True)
        print(f"      {flops / len(sentences) / 1e6:.0f} MFLOP per sentence; matmul rate "
              f"{fast.matmul / 1e9:.0f} GFLOP/s; fast and reference give the same best translation for "
              f"{same_all}/{len(sentences)} sentences")
        for path in runs if args.profile else []:
            with reference_path(model, path == "reference"):
                _, profile = profile_ops(work)
            print(f"      {path}, " + profile.describe(flops, fast.matmul, len(sentences), "sentences", " " * 6),
                  flush=True)
    if disagreements:
        sys.exit("; ".join(disagreements) + f" (more than {100 * MAX_DIFFERENT:g}% allowed)")


def compare_int8(fp32: list[Timing], int8: list[Timing], fp32_outputs: list[list[Hypothesis]],
                 int8_outputs: list[list[Hypothesis]], beam: int, sentences: int) -> None:
    """The int8 fast search against the fp32 one, runs taken in turn: sentences/s, the ratio, same outputs."""
    ratio = [f.wall / i.wall for f, i in zip(fp32, int8, strict=True)]
    cpu_ratio = [f.cpu / i.cpu for f, i in zip(fp32, int8, strict=True)]
    same = sum(a[0].tokens == b[0].tokens for a, b in zip(fp32_outputs, int8_outputs, strict=True))
    best_fp32, best_int8 = min(fp32, key=lambda t: t.wall), min(int8, key=lambda t: t.wall)
    print(f"beam {beam}: fast fp32 {sentences / best_fp32.wall:.1f} sent/s "
          f"({sentences / best_fp32.cpu:.1f} per CPU-s), "
          f"fast int8 {sentences / best_int8.wall:.1f} sent/s ({sentences / best_int8.cpu:.1f} per CPU-s); "
          f"int8/fp32 median {statistics.median(ratio):.2f}x by the wall clock (runs "
          f"{', '.join(f'{r:.2f}' for r in ratio)}), {statistics.median(cpu_ratio):.2f}x by CPU time; "
          f"same best translation for {same}/{sentences} sentences", flush=True)


def translate_all(model: Seq2Seq, src_vocab: Vocabulary, sentences: list[list[str]], config: SearchConfig,
                  batch_size: int, device: torch.device) -> list[list[Hypothesis]]:
    return list(translate(model, src_vocab, sentences, config, batch_size, device))


if __name__ == "__main__":
    main()

