"""Cut the small sample in ``examples/data/`` from the Multi30k Moses system in ``shared/data``.

For the first ``--sentences`` sentences of ``val`` and ``test_2016_flickr`` it copies Moses' 100-best
lists, 1-best output, the English source and the French reference; it copies the tuned
``moses.ini``; it writes the most frequent words of the French training text (the shortlist of the
UNK penalty), the first ``--train`` lines of the training text (to train small models on), the
phrase pairs of the phrase table that the sample's source sentences can use (as Moses'
``filter-model-given-input.pl`` filters a table, keeping the ``--table-limit`` best targets of a
source phrase by p(e|f), as Moses' ``table-limit`` does); and it writes a filtered copy of the
4-gram language model. For tuning Moses it copies the whole of ``val`` (``tune.en``, ``tune.fr``:
a few hundred sentences are too few to tune Moses' weights on) and the phrase pairs that those
sentences and the sample's ``test`` can use (``phrase-table.tune.gz``). Tuning takes the full language
model: the filtered one scores exactly only the hypotheses of the lists below.

The filtered model keeps the n-grams that occur in the sample's hypotheses (each hypothesis with
``<s>`` and ``</s>`` around it; and ``<unk>``), with their probabilities and back-offs and the
``\\data\\`` counts fixed. Every n-gram and context that KenLM looks up for one of those hypotheses
is a part of it, so each hypothesis gets exactly the full model's score; the script checks that on
every hypothesis. (Keeping every n-gram of the hypotheses' words instead would give that for any
sentence of those words, at seven times the size.) ``--lm-nbest`` names more n-best lists whose
hypotheses the model must score exactly: the shipped RNNsearch's lists, which the main job merges
with Moses' and scores with the LM (``runs/sample/{dev,test}.rnnsearch.nbest.gz``, written by
``rerank experiment configs/experiments/sample.yaml``; they do not depend on the LM).

Run from the repository root::

    python examples/make_sample.py                 # shared/data beside the repository
    python examples/make_sample.py --data DIR --sentences 250 --shortlist 15000 \\
        --lm-nbest runs/sample/dev.rnnsearch.nbest.gz runs/sample/test.rnnsearch.nbest.gz
"""

from __future__ import annotations

import argparse
import collections
import gzip
import itertools
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPLITS = {"val": "val", "test": "test_2016_flickr"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the real data")
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "data", help="where the sample goes")
    parser.add_argument("--sentences", type=int, default=250, help="sentences per split (default 250)")
    parser.add_argument("--shortlist", type=int, default=15000, help="words in the UNK shortlist (default 15000)")
    parser.add_argument("--train", type=int, default=5000, help="lines of training text (default 5000)")
    parser.add_argument("--table-limit", type=int, default=20, help="targets per source phrase (default 20)")
    parser.add_argument("--lm-nbest", type=Path, nargs="*", default=[],
                        help="more n-best lists (gzipped) whose hypotheses the filtered LM scores exactly")
    args = parser.parse_args(argv)
    moses, tok = args.data / "moses-multi30k", args.data / "multi30k" / "tok"
    args.out.mkdir(parents=True, exist_ok=True)
    ngrams = {"<unk>"}
    for short, split in SPLITS.items():
        lines = cut_nbest(moses / "nbest" / f"{split}.100best.gz", args.sentences)
        write_gzip(args.out / f"{short}.100best.gz", lines)
        ngrams.update(ngram for line in lines for ngram in sentence_ngrams(line.split(b"|||")[1].decode().split()))
        copy_head(tok / f"{split}.lc.norm.tok.en", args.out / f"{short}.en", args.sentences)
        copy_head(tok / f"{split}.lc.norm.tok.fr", args.out / f"{short}.fr", args.sentences)
        copy_head(moses / "nbest" / f"{split}.1best", args.out / f"{short}.1best", args.sentences)
    # the tuned moses.ini, less the two comments that name directories of the machine it was tuned on
    ini = (moses / "model" / "moses.ini").read_bytes().splitlines(keepends=True)
    (args.out / "moses.ini").write_bytes(b"".join(line for line in ini if not re.match(rb"# (decoder|BLEU) ", line)))
    write_shortlist(tok / "train.lc.norm.tok.fr", args.out / "shortlist.fr.gz", args.shortlist)
    for lang in ("en", "fr"):
        with open(tok / f"train.lc.norm.tok.{lang}", "rb") as f:
            write_gzip(args.out / f"train.{lang}.gz", itertools.islice(f, args.train))
    sources = [line.split() for s in SPLITS for line in (args.out / f"{s}.en").read_text("utf-8").splitlines()]
    kept = filter_phrase_table(moses / "model" / "phrase-table.gz", args.out / "phrase-table.gz", sources,
                               args.table_limit)
    print(f"{args.out / 'phrase-table.gz'}: {kept} phrase pairs")
    copy_head(tok / "val.lc.norm.tok.en", args.out / "tune.en", sys.maxsize)
    copy_head(tok / "val.lc.norm.tok.fr", args.out / "tune.fr", sys.maxsize)
    tuning = [line.split() for name in ("tune.en", "test.en")
              for line in (args.out / name).read_text("utf-8").splitlines()]
    kept = filter_phrase_table(moses / "model" / "phrase-table.gz", args.out / "phrase-table.tune.gz", tuning,
                               args.table_limit)
    print(f"{args.out / 'phrase-table.tune.gz'}: {kept} phrase pairs")
    lm = args.out / "lm.fr.4.sample.arpa.gz"
    for path in args.lm_nbest:
        with gzip.open(path, "rb") as f:
            ngrams.update(ngram for line in f for ngram in sentence_ngrams(line.split(b"|||")[1].decode().split()))
    counts = filter_arpa(moses / "lm" / "train.fr.4.arpa", lm, ngrams)
    print(f"{lm}: n-grams kept per order: {counts}")
    nbests = [args.out / f"{s}.100best.gz" for s in SPLITS] + args.lm_nbest
    checked = check_same_scores(moses / "lm" / "train.fr.4.arpa", lm, nbests)
    print(f"{lm}: same score as the full model on all {checked} hypotheses of {', '.join(map(str, nbests))}")
    total = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{args.out}: {total / 1e6:.2f} MB")
    return 0


def cut_nbest(path: Path, sentences: int) -> list[bytes]:
    """The lines of the n-best list whose sentence id is below ``sentences``."""
    with gzip.open(path, "rb") as f:
        return list(itertools.takewhile(lambda line: int(line.split(b"|||")[0]) < sentences, f))


def write_gzip(path: Path, lines: Iterable[bytes]) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as out:
        out.writelines(lines)


def copy_head(path: Path, out: Path, lines: int) -> None:
    with open(path, "rb") as f:
        out.write_bytes(b"".join(itertools.islice(f, lines)))


def write_shortlist(corpus: Path, out: Path, size: int) -> None:
    """The ``size`` most frequent words of ``corpus``, one ``word count`` per line, most frequent first."""
    counts: collections.Counter[str] = collections.Counter()
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            counts.update(line.split())
    write_gzip(out, [f"{word} {count}\n".encode() for word, count in counts.most_common(size)])


def filter_phrase_table(path: Path, out: Path, sources: list[list[str]], limit: int, max_length: int = 7) -> int:
    """Write the pairs whose source phrase occurs in ``sources``, at most ``limit`` per source phrase
    (the highest p(e|f), the third score), in table order; returns how many were kept."""
    phrases = {" ".join(s[i:j]) for s in sources for i in range(len(s))
               for j in range(i + 1, min(len(s), i + max_length) + 1)}
    by_source: dict[bytes, list[bytes]] = collections.defaultdict(list)
    with gzip.open(path, "rb") as f:
        for line in f:
            source = line.split(b" ||| ", 1)[0]
            if source.decode("utf-8") in phrases:
                by_source[source].append(line)
    kept = []
    for lines in by_source.values():
        best = sorted(range(len(lines)), key=lambda i: -float(lines[i].split(b" ||| ")[2].split()[2]))[:limit]
        kept += [lines[i] for i in sorted(best)]
    write_gzip(out, kept)
    return len(kept)


def sentence_ngrams(words: list[str], order: int = 4) -> Iterator[str]:
    """The n-grams, up to ``order`` words, of a sentence with ``<s>`` and ``</s>`` around it."""
    padded = ["<s>", *words, "</s>"]
    for start in range(len(padded)):
        for end in range(start + 1, min(len(padded), start + order) + 1):
            yield " ".join(padded[start:end])


def filter_arpa(path: Path, out: Path, ngrams: set[str]) -> list[int]:
    """Write the n-grams of an ARPA file that are in ``ngrams``; returns the counts kept per order."""
    kept: dict[int, list[str]] = collections.defaultdict(list)
    for order, line in arpa_ngrams(path):
        if line.split("\t")[1] in ngrams:
            kept[order].append(line)
    orders = sorted(kept)
    with open(out, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as binary:
        text = "\\data\\\n" + "".join(f"ngram {n}={len(kept[n])}\n" for n in orders)
        for n in orders:
            text += f"\n\\{n}-grams:\n" + "\n".join(kept[n]) + "\n"
        binary.write((text + "\n\\end\\\n").encode("utf-8"))
    return [len(kept[n]) for n in orders]


def arpa_ngrams(path: Path) -> Iterator[tuple[int, str]]:
    """``(order, line)`` for every n-gram line of an ARPA file."""
    order = 0
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            header = re.fullmatch(r"\\(\d+)-grams:", line)
            if header:
                order = int(header.group(1))
            elif line == "\\end\\":
                return
            elif order and line:
                yield order, line


def check_same_scores(full: Path, sample: Path, nbests: list[Path]) -> int:
    """Check that both models give every hypothesis of the sample the same score; returns the count."""
    import kenlm

    options = kenlm.Config()
    options.show_progress = False
    models = kenlm.Model(str(full), options), kenlm.Model(str(sample), options)
    count = 0
    for path in nbests:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                hypothesis = " ".join(line.split("|||")[1].split())
                scores = [model.score(hypothesis, bos=True, eos=True) for model in models]
                if scores[0] != scores[1]:
                    sys.exit(f"{path}: {hypothesis!r}: full model {scores[0]}, sample model {scores[1]}")
                count += 1
    return count


if __name__ == "__main__":
    sys.exit(main())
