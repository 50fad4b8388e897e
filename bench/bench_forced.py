"""Forced decoding of Moses' own n-best list on the real Multi30k system: does it give back Moses'
feature values, and how long does it take?

Every hypothesis of Moses' shipped 100-best list (``val`` by default, or its first ``--sentences``) is
forced-decoded with the tuned ``moses.ini`` (paths substituted) in one Moses process, as
``rerank merge-nbest --moses-ini`` does. A hypothesis *matches* when every feature is within 1e-3 of
the list's value. The others are classed by the model score (field 4) of the two derivations:

* forced higher: the list kept a worse derivation of the same words. ``distinct`` n-best lists keep,
  for each string, the best derivation the beam search found; the forced search, which keeps only
  that string's prefixes on its stacks, finds a better one (a search error of the free search);
* forced lower: the forced search lost the list's derivation (pruning);
* same score: another derivation with the same score (a tie).

The fixed cost (filtering the tables to the list's sources with ``filter-model-given-input.pl``
unless ``--no-filter``, and Moses loading them) is measured on its own, and the time per 1,000
hypotheses is given with and without it. ``--details FILE`` writes each hypothesis that does not
match: the list's line, then the forced derivation's line (or ``unreachable``).

    python bench/bench_forced.py                        # the whole val 100-best, 2 Moses threads
    python bench/bench_forced.py --list test --sentences 100 --no-filter
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from quick import parse_args  # noqa: E402

from rerank.formats.nbest import read_nbest  # noqa: E402
from rerank.rescore.forced import ForcedDecoding, filtered_ini, force_decode  # noqa: E402

LISTS = {"val": ("val.100best.gz", "val.lc.norm.tok.en"),
         "test": ("test_2016_flickr.100best.gz", "test_2016_flickr.lc.norm.tok.en")}
TOLERANCE = 1e-3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the real data")
    parser.add_argument("--moses-dir", type=Path, default=REPO.parent / "shared" / "tools" / "moses",
                        help="Moses' bin/ and scripts/")
    parser.add_argument("--list", choices=sorted(LISTS), default="val", help="which shipped 100-best list")
    parser.add_argument("--sentences", type=int, help="only the first N sentences (default: all)")
    parser.add_argument("--threads", type=int, default=2, help="Moses' threads (default 2)")
    parser.add_argument("--no-filter", action="store_true", help="load the whole phrase table")
    parser.add_argument("--details", type=Path, help="write the hypotheses that do not match here")
    args = parse_args(parser, {"list": "test", "sentences": 2, "threads": 1}, argv)

    system = args.data / "moses-multi30k"
    nbest_name, source_name = LISTS[args.list]
    sources = (args.data / "multi30k" / "tok" / source_name).read_text(encoding="utf-8").splitlines()
    entries = [e for e in read_nbest(system / "nbest" / nbest_name)
               if args.sentences is None or e.sentence_id < args.sentences]
    sentences = len({e.sentence_id for e in entries})
    pairs = [(e.sentence_id, tuple(e.tokens)) for e in entries]
    filter_script = None if args.no_filter else \
        str(args.moses_dir / "scripts" / "training" / "filter-model-given-input.pl")
    with tempfile.TemporaryDirectory() as directory:
        ini = Path(directory) / "moses.ini"
        ini.write_text((system / "model" / "moses.ini").read_text(encoding="utf-8")
                       .replace("MODEL_DIR", str(system / "model")).replace("LM_DIR", str(system / "lm")),
                       encoding="utf-8")
        settings = ForcedDecoding(str(args.moses_dir / "bin" / "moses"), str(ini), threads=args.threads,
                                  filter_script=filter_script)
        print(f"forced decoding of Moses' {nbest_name}: {len(entries):,} hypotheses of {sentences:,} sentences, "
              f"{args.threads} Moses threads, tables {'filtered' if filter_script else 'loaded whole'}; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        fixed = fixed_cost(settings, sources, sorted({e.sentence_id for e in entries}), Path(directory))
        start = time.perf_counter()
        result = force_decode(settings, sources, pairs)
        seconds = time.perf_counter() - start

    match = higher = lower = tie = 0
    gains = []
    details = []
    for entry, forced in zip(entries, result.derivations, strict=True):
        if forced is None:
            details += [entry.line(), "unreachable", ""]
            continue
        assert forced.tokens == entry.tokens
        if all(abs(a - b) <= TOLERANCE for a, b in zip(entry.dense, forced.dense, strict=True)):
            match += 1
            continue
        details += [entry.line(), forced.line(), ""]
        if forced.total > entry.total + 1e-4:
            higher += 1
            gains.append(forced.total - entry.total)
        elif forced.total < entry.total - 1e-4:
            lower += 1
        else:
            tie += 1
    n = len(entries)
    print(f"reachable:               {result.reachable:,} of {n:,} ({100 * result.reachable / n:.2f}%)")
    print(f"features within {TOLERANCE:g}:    {match:,} ({100 * match / n:.2f}%)")
    print(f"forced score higher:     {higher:,} ({100 * higher / n:.2f}%): the list kept a worse derivation "
          f"(search error), mean gain {sum(gains) / max(len(gains), 1):.3f}, max {max(gains, default=0):.3f}")
    print(f"forced score lower:      {lower:,} ({100 * lower / n:.2f}%): the forced search lost the list's "
          "derivation")
    print(f"same score, other values: {tie:,}")
    print(f"unreachable:             {result.unreachable:,}")
    per_k = 1000 * seconds / n
    print(f"time: {seconds:.1f} s wall, of which about {fixed:.1f} s fixed (filtering and loading the tables); "
          f"{per_k:.2f} s per 1,000 hypotheses ({1000 * (seconds - fixed) / n:.2f} s without the fixed cost), "
          f"{1000 * seconds / sentences:.1f} s per 1,000 sentences of this list; "
          f"load average now {os.getloadavg()[0]:.1f}")
    if args.details is not None:
        args.details.write_text("\n".join(details), encoding="utf-8")
    return 0


def fixed_cost(settings: ForcedDecoding, sources: list[str], ids: list[int], directory: Path) -> float:
    """Seconds to filter the tables to the sentences ``ids`` (when filtering) and to load them in Moses
    (a run on one hypothesis, whose filtering and decoding take a fraction of a second)."""
    start = time.perf_counter()
    if settings.filter_script is not None:
        (directory / "fixed").mkdir()
        filtered_ini(settings.filter_script, settings.moses_ini, [sources[i] for i in ids], directory / "fixed")
    filtering = time.perf_counter() - start
    start = time.perf_counter()
    force_decode(settings, sources, [(ids[0], ("a",))])
    return filtering + time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
