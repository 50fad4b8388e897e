"""Plain helpers for the tests: reading and writing files, finding what an atomic write left behind, a tiny
language model and a truncated one, hypotheses without their source, hand-made and random tuning lists, a scored
list edited with its record, and another run holding an output's lock."""

from __future__ import annotations

import collections
import contextlib
import gzip
import hashlib
import math
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from rerank.formats.nbest import FeatureLayout
from rerank.tune.data import TuningData
from rerank.tune.stats import NUM_STATS


def content(path: Path) -> bytes:
    """A file's bytes, gunzipped when it ends in .gz."""
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def leftovers(directory: Path) -> list[str]:
    """Temporary files an atomic write would leave behind in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def cut_in_unigrams(arpa: bytes) -> bytes:
    """An ARPA file cut off after a line halfway through its 1-grams, as a failed copy leaves it."""
    start, end = arpa.index(b"\\1-grams:"), arpa.index(b"\\2-grams:")
    return arpa[:arpa.index(b"\n", (start + end) // 2) + 1]


def write(tmp_path: Path, name: str, text: str) -> Path:
    """``text`` written to ``tmp_path / name``."""
    path = tmp_path / name
    path.write_text(text)
    return path


# YAML whose aliases repeat 9^10 values: a "billion laughs"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))


def nbest_pairs(nbest: Path, source: Path, per_sentence: int = 3, count: int = 12) -> list[tuple[list[str], list[str]]]:
    """The first ``count`` (source, hypothesis) pairs of an n-best list, ``per_sentence`` hypotheses of each
    sentence, as Moses wrote them (tokenized, escaped)."""
    from rerank.formats.nbest import read_nbest

    sources = source.read_text(encoding="utf-8").splitlines()
    pairs: list[tuple[list[str], list[str]]] = []
    taken: collections.Counter[int] = collections.Counter()
    for entry in read_nbest(nbest):
        taken[entry.sentence_id] += 1
        if taken[entry.sentence_id] <= per_sentence:
            pairs.append((sources[entry.sentence_id].split(), list(entry.tokens)))
    return pairs[:count]


def hypothesis_pairs(sentences: list[str]) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each sentence as a hypothesis without a source, as a target-side feature scores it."""
    return [((), s.split()) for s in sentences]


# the sentences of the tiny language model below (and of the CSLM trained in the tests)
TINY_LM_TEXT = """a dog runs in the park
a man runs in the street
the dog plays with a ball
a woman walks in the park
two men play with a dog
the man walks the dog in the street
a girl plays in the park with a ball
the woman runs
""".splitlines()


def write_arpa(path: Path, sentences: list[str], order: int = 3, discount: float = 0.5) -> None:
    """A back-off ARPA model normalised by construction: add-one unigrams over the words, ``</s>`` and
    ``<unk>``; higher orders absolutely discounted, each context's back-off weight the leftover mass over
    the lower order's mass of the words not seen after it."""
    counts: list[collections.Counter[tuple[str, ...]]] = [collections.Counter() for _ in range(order + 1)]
    for sentence in sentences:
        words = ["<s>", *sentence.split(), "</s>"]
        for k in range(1, order + 1):
            for i in range(len(words) - k + 1):
                if words[i + k - 1] != "<s>":
                    counts[k][tuple(words[i:i + k])] += 1
    vocab = sorted({w for (w,) in counts[1]} | {"<unk>"})
    total = sum(counts[1].values())
    prob: dict[tuple[str, ...], float] = {(w,): (counts[1][(w,)] + 1) / (total + len(vocab)) for w in vocab}
    backoff: dict[tuple[str, ...], float] = {}

    def p(context: tuple[str, ...], word: str) -> float:
        if context + (word,) in prob:
            return prob[context + (word,)]
        return backoff.get(context, 1.0) * p(context[1:], word) if context else prob[(word,)]

    for k in range(2, order + 1):
        by_context: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
        for ngram in counts[k]:
            by_context[ngram[:-1]].append(ngram[-1])
        for context, words in by_context.items():
            seen = sum(counts[k][context + (w,)] for w in words)
            lower = sum(p(context[1:], w) for w in words)
            for w in words:
                prob[context + (w,)] = (counts[k][context + (w,)] - discount) / seen
            backoff[context] = (1 - sum(prob[context + (w,)] for w in words)) / (1 - lower)
    lines = ["\\data\\", *(f"ngram {k}={len(counts[k]) + (2 if k == 1 else 0)}" for k in range(1, order + 1)), ""]
    for k in range(1, order + 1):
        lines.append(f"\\{k}-grams:")
        grams = [("<s>",), *((w,) for w in vocab)] if k == 1 else sorted(counts[k])
        for gram in grams:
            logp = -99.0 if gram == ("<s>",) else math.log10(prob[gram])
            bo = f"\t{math.log10(backoff[gram]):.10f}" if gram in backoff else ""
            lines.append(f"{logp:.10f}\t{' '.join(gram)}{bo}")
        lines.append("")
    lines.append("\\end\\")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# hand-made lists whose answers are worked out in the tests: statistics hyp_len, ref_len, matches 1-4, n-grams 1-4
PERFECT = [4, 4, 4, 3, 2, 1, 4, 3, 2, 1]
NOTHING = [4, 4, 0, 0, 0, 0, 4, 3, 2, 1]
HALF = [4, 4, 2, 1, 0, 0, 4, 3, 2, 1]


def hand_made(features: list[list[float]], stats: list[list[int]]) -> TuningData:
    """One sentence with the given hypotheses."""
    dims = len(features[0])
    return TuningData(FeatureLayout(tuple(f"F{i}" for i in range(dims)), (1,) * dims),
                      np.array([features], dtype=np.float64), np.array([stats], dtype=np.int64),
                      np.array([len(features)]))


def random_tuning_data(seed: int, sentences: int = 6, size: int = 7, dims: int = 3) -> TuningData:
    """Small integer features (many equal slopes and ties) and random BLEU statistics."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, size + 1, sentences)
    features = rng.integers(-3, 4, (sentences, size, dims)).astype(np.float64)
    stats = np.zeros((sentences, size, NUM_STATS), dtype=np.int64)
    stats[..., 0] = rng.integers(4, 12, (sentences, size))
    stats[..., 1] = 8
    for n in range(4):
        stats[..., 6 + n] = stats[..., 0] - n
        stats[..., 2 + n] = rng.integers(1, stats[..., 6 + n] + 1)
    valid = np.arange(size)[None, :] < counts[:, None]
    features[~valid], stats[~valid] = 0, 0
    return TuningData(FeatureLayout(tuple(f"F{i}" for i in range(dims)), (1,) * dims), features, stats, counts)


# Moses' weights for the 8 features of the val slice's 100-best list
MOSES_VAL_WEIGHTS = np.array([0.138061, 0.15949, -0.225306, 0.105148, 0.126263, 0.0567749, 0.12818, 0.0607768])


SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "data"


def sample_moses_ini(directory: Path, sources: list[str]) -> Path:
    """The sample's moses.ini decoding ``sources`` in ``directory``: its phrase table filtered to their phrases (Moses
    loads it in a second) and its 4-gram sample LM in place of the directory placeholders."""
    phrases = {" ".join(w[i:j]) for s in sources for w in [s.split()] for i in range(len(w))
               for j in range(i + 1, len(w) + 1)}
    table = directory / "phrase-table.gz"
    with gzip.open(SAMPLE / "phrase-table.gz", "rt", encoding="utf-8") as f, \
            gzip.open(table, "wt", encoding="utf-8") as out:
        out.writelines(line for line in f if line.split(" ||| ", 1)[0] in phrases)
    ini = (SAMPLE / "moses.ini").read_text(encoding="utf-8").replace("path=MODEL_DIR/phrase-table.gz", f"path={table}")
    ini = re.sub(r"path=LM_DIR/\S+", f"path={SAMPLE / 'lm.fr.4.sample.arpa.gz'}", ini)
    moses_ini = directory / "moses.ini"
    moses_ini.write_text(ini, encoding="utf-8")
    return moses_ini


def assert_resumes_mid_epoch(run: Callable[[str, int], Path]) -> None:
    """``run(name, updates)`` trains into the directory ``name`` for ``updates`` updates and returns its checkpoint:
    stopped after 7 updates (mid-epoch, at batch 7) and resumed to 30, it must hold the weights of a run of 30."""
    from rerank.models.checkpoint import load_state

    assert load_state(run("stopped", 7))["progress"]["batch"] == 7
    resumed, whole = load_state(run("stopped", 30))["model"], load_state(run("whole", 30))["model"]
    for key, value in whole.items():
        assert torch.equal(resumed[key], value), key


def edit_scored_list(path: Path, edit: Callable[[str], str]) -> None:
    """Change the text of the scored list ``path`` (plain or .gz) and its record with it, as though score-nbest
    had written those values: to see which values a --reuse takes."""
    from rerank.formats.scored import read_record, write_record

    record = read_record(path)
    assert record is not None, f"{path} has no record"
    text = edit(gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text())
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    write_record(path, hashlib.sha256(text.encode()).hexdigest(), record.features)


@contextlib.contextmanager
def another_run_writing(output: Path, command: str) -> Iterator[subprocess.Popen[str]]:
    """Another process, a run of ``command``, that holds the lock of ``output`` (a file or a directory) for the
    block, as a command writing it does."""
    code = ("import sys\nfrom rerank.formats.files import one_run, claim\n"
            f"with one_run({command!r}):\n    claim({str(output)!r}, 'the output')\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield process
    finally:
        process.communicate("")
