"""``torch.compile`` of RNNsearch's decoder step against the straightforward step, in the same run.

The step of Bahdanau's decoder with additive global attention
(:func:`rerank.models.rnnsearch.fused_step`: the [W_h; W_a] projection, the attention, the GRU
update) is compiled by inductor with dynamic shapes (the rows of a search shrink as sentences end,
the sources' lengths vary from batch to batch) and used in place of the eager one for beam search on
the first ``--sentences`` sentences of val and for scoring the first ``--pairs`` lines of the
phrase table, the two taking turns ``--repeat`` times. Printed: the time the first compiled pass
took (compilation included), sentences/s and pairs/s of both by the wall clock and per CPU second,
their ratios, and whether the outputs are the same. fp32 only.

    python bench/bench_compile.py --model examples/models/rnnsearch --threads 1
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from quick import parse_args

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import rerank.models.rnnsearch as rnnsearch  # noqa: E402
from rerank.formats.phrase_table import read_phrase_table  # noqa: E402
from rerank.models.checkpoint import load_model  # noqa: E402
from rerank.scoring.pairs import Scorer  # noqa: E402
from rerank.search.beam import SearchConfig  # noqa: E402
from rerank.search.translate import translate  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "models" / "rnnsearch")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the real data")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--beam", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, {"sentences": 4, "pairs": 50, "beam": 2, "repeat": 1})
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    if not (isinstance(loaded.model, rnnsearch.RNNSearch) and loaded.model._fused_attention()):
        parser.error(f"{args.model}: not an RNNsearch with additive global attention")
    source = args.data / "multi30k" / "tok" / "val.lc.norm.tok.en"
    sentences = [line.split() for line in source.read_text(encoding="utf-8").splitlines()[: args.sentences]]
    table = args.data / "moses-multi30k" / "model" / "phrase-table.gz"
    pairs = [(e.source.split(), e.target.split()) for e in itertools.islice(read_phrase_table(table), args.pairs)]
    config = SearchConfig(beam_size=args.beam)
    scorer = Scorer.from_loaded(loaded)

    def decode() -> list[Any]:
        return [h[0].tokens for h in translate(loaded.model, loaded.src_vocab, sentences, config, 50, "cpu")]

    def score() -> list[Any]:
        return list(scorer.score(pairs))

    eager = rnnsearch.fused_step
    compiled = torch.compile(eager, dynamic=True)
    print(f"torch {torch.__version__}, {args.threads} thread(s); {args.model}; beam {args.beam} on "
          f"{len(sentences)} val sentences, {len(pairs):,} phrase pairs; runs in turn, {args.repeat} each")
    for name, work, count in (("decoding", decode, len(sentences)), ("phrase-table scoring", score, len(pairs))):
        rnnsearch.fused_step = compiled
        start = time.perf_counter()
        work()
        print(f"{name}: first compiled pass (compilation included) {time.perf_counter() - start:.1f} s")
        runs: dict[str, list[tuple[float, float]]] = {"eager": [], "compiled": []}
        outputs = {}
        for _ in range(args.repeat):
            for path, step in (("eager", eager), ("compiled", compiled)):
                rnnsearch.fused_step = step
                outputs[path], timing = timed(work)
                runs[path].append(timing)
        rnnsearch.fused_step = eager
        for path, timings in runs.items():
            print(f"  {path}: {count / min(t[0] for t in timings):,.1f}/s best by the wall clock, "
                  f"{statistics.median(count / t[1] for t in timings):,.1f} per CPU second (median)")
        ratio = [e[1] / c[1] for e, c in zip(runs["eager"], runs["compiled"], strict=True)]
        same = outputs["eager"] == outputs["compiled"] if name == "decoding" else max(
            abs(a - b) for a, b in zip(outputs["eager"], outputs["compiled"], strict=True))
        print(f"  compiled/eager by CPU time: median {statistics.median(ratio):.2f}x (runs "
              f"{', '.join(f'{r:.2f}' for r in ratio)}); "
              + (f"same translations: {same}" if name == "decoding" else f"largest |difference of ln p| {same:.1e}"),
              flush=True)
    return 0


def timed(work: Callable[[], list[Any]]) -> tuple[list[Any], tuple[float, float]]:
    start, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, (time.perf_counter() - start, time.process_time() - cpu)


if __name__ == "__main__":
    sys.exit(main())
