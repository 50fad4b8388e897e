"""PRO and batch MIRA against Moses' own ``pro`` and ``kbmira`` on the real Multi30k val 100-best lists.

Moses' tools read the feature and statistics files that Moses' ``extractor`` writes from the same
n-best list and reference; rerank reads the list itself. The first sentences of the list keep the
run short.

* MIRA, same order (kbmira ``--no-shuffle``, rerank ``shuffle: false``): the same weights up to
  float32 rounding. kbmira removes duplicate hypotheses with a hash set whose equality test
  compares each item with itself (``mert/FeatureDataIterator.cpp``), so a hypothesis that lands in
  an occupied bucket is dropped even when it is distinct; the comparison is therefore made on two
  hypotheses per sentence and on the sentences where kbmira keeps both (found by a run whose step
  cap keeps the weights at 0, so that every sentence with two hypotheses of different BLEU updates).
* MIRA, shuffled: the BLEU of rerank's weights over several seeds within the spread of kbmira's.
* PRO: the sampled pairs compared sentence by sentence with those ``pro`` writes (their number and
  the mean feature difference, better minus worse); rerank's logistic regression run on ``pro``'s
  own pairs reaches the optimum that an independent fit (torch's L-BFGS) finds, and its weights
  choose hypotheses as well as rerank's own PRO does.
"""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from rerank.formats.files import read_text
from rerank.tune.config import MiraConfig, ProConfig
from rerank.tune.data import NBestPool, TuningData
from rerank.tune.mert import l1_normalised
from rerank.tune.mira import mira
from rerank.tune.optimize import corpus_bleu
from rerank.tune.pro import logistic_regression, pro, sample_pairs
from rerank.tune.stats import BleuStatistics, sentence_bleu_plus_one

REPOSITORY = Path(__file__).resolve().parents[2]
BIN = REPOSITORY.parent / "shared" / "tools" / "moses" / "bin"
TOOLS = ("extractor", "kbmira", "pro")
SENTENCES = 150
SEPARATOR = " ||| "
# the tuned moses.ini's weights, in the n-best list's order (Distortion0 LM0 WordPenalty0 PhrasePenalty0 TM0 x4)
MOSES_INI_WEIGHTS = [0.138061, 0.15949, -0.225306, 0.105148, 0.126263, 0.0567749, 0.12818, 0.0607768]

pytestmark = pytest.mark.skipif(
    not all(os.access(BIN / tool, os.X_OK) for tool in TOOLS),
    reason=f"the Moses binaries ({', '.join(TOOLS)}) not found in {BIN}")


def run_tool(*args: object) -> str:
    """Run a Moses binary; its standard error (where kbmira and pro log), or a failure showing it."""
    argv = [str(a) for a in args]
    result = subprocess.run(argv, capture_output=True, timeout=300)
    assert result.returncode == 0, f"{argv} exited with {result.returncode}:\n{result.stderr.decode()[-2000:]}"
    return result.stderr.decode()


class Lists:
    """An n-best list and its reference, as rerank reads them and as Moses' extractor writes them."""

    def __init__(self, directory: Path, name: str, nbest: list[str], reference: list[str]):
        self.nbest = directory / f"{name}.nbest"
        self.reference = directory / f"{name}.ref"
        self.nbest.write_text("".join(nbest), encoding="utf-8")
        self.reference.write_text("".join(line + "\n" for line in reference), encoding="utf-8")
        self.scores = directory / f"{name}.scores.dat"
        self.features = directory / f"{name}.features.dat"
        run_tool(BIN / "extractor", "-r", self.reference, "-n", self.nbest, "-S", self.scores, "-F", self.features)
        pool = NBestPool(BleuStatistics([read_text(self.reference)]))
        pool.add(self.nbest)
        self.data: TuningData = pool.data()

    def dense_init(self, directory: Path, weights: list[float]) -> Path:
        path = directory / "init.dense"
        path.write_text("".join(f"F{i}= {w!r}\n" for i, w in enumerate(weights)), encoding="utf-8")
        return path


def kbmira_weights(path: Path) -> np.ndarray:
    """kbmira's output (``F<i> <weight>`` lines), L1-normalised."""
    return l1_normalised(np.array([float(line.split()[1]) for line in read_text(path)]))


@pytest.fixture(scope="module")
def val(multi30k_moses: Path, shared_data: Path) -> tuple[list[list[str]], list[str]]:
    """The lines of each of val's first sentences in Moses' 100-best list, and their references."""
    by_sentence: list[list[str]] = [[] for _ in range(SENTENCES)]
    with gzip.open(multi30k_moses / "nbest" / "val.100best.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            sentence = int(line.split(SEPARATOR, 1)[0])
            if sentence >= SENTENCES:
                break
            by_sentence[sentence].append(line)
    reference = read_text(shared_data / "multi30k" / "tok" / "val.lc.norm.tok.fr")[:SENTENCES]
    return by_sentence, reference


@pytest.fixture(scope="module")
def whole(val, tmp_path_factory) -> Lists:
    by_sentence, reference = val
    return Lists(tmp_path_factory.mktemp("whole"), "val", [line for lines in by_sentence for line in lines],
                 reference)


def renumbered(lines: list[str], sentence: int) -> list[str]:
    return [f"{sentence}{SEPARATOR}{line.split(SEPARATOR, 1)[1]}" for line in lines]


@pytest.fixture(scope="module")
def pairs_kbmira_keeps(val, tmp_path_factory) -> Lists:
    """The first two hypotheses of each sentence, on the sentences where kbmira keeps both."""
    by_sentence, reference = val
    directory = tmp_path_factory.mktemp("two")
    two = Lists(directory, "two", [line for lines in by_sentence for line in lines[:2]], reference)
    log = run_tool(BIN / "kbmira", "--verbose", "--no-shuffle", "-J", 1, "-C", "1e-30",
                   "-d", two.dense_init(directory, [0.0] * two.data.dims),
                   "-S", two.scores, "-F", two.features, "-o", directory / "probe.weights")
    kept = [int(line.split()[2]) for line in log.splitlines() if line.startswith("Updating sent ")]
    assert len(kept) > SENTENCES // 2, "kbmira should keep both hypotheses of most sentences"
    return Lists(directory, "kept", [line for s, sentence in enumerate(kept)
                                     for line in renumbered(by_sentence[sentence][:2], s)],
                 [reference[s] for s in kept])


# ------------------------------------------------------------------------------------------------- MIRA

@pytest.mark.parametrize(("epochs", "c", "decay"), [(10, 0.01, 0.999), (4, 0.001, 0.9), (3, 1.0, 0.999)])
def test_mira_in_order_gives_kbmira_no_shuffle_weights(pairs_kbmira_keeps, tmp_path, epochs, c, decay):
    lists = pairs_kbmira_keeps
    output = tmp_path / "kbmira.weights"
    log = run_tool(BIN / "kbmira", "--no-shuffle", "-J", epochs, "-C", c, "-D", decay,
                   "-d", lists.dense_init(tmp_path, MOSES_INI_WEIGHTS), "-S", lists.scores, "-F", lists.features,
                   "-o", output)
    expected = kbmira_weights(output)
    best_bleu = float(log.split("Best BLEU = ")[1].split()[0])
    config = MiraConfig(epochs=epochs, c=c, decay=decay, standardize=False, shuffle=False)
    result = mira(lists.data, np.array(MOSES_INI_WEIGHTS), config, np.random.default_rng(0))
    assert result.weights == pytest.approx(expected, abs=1e-4)
    assert result.bleu == pytest.approx(100 * best_bleu, abs=1e-3)


def test_mira_over_seeds_is_within_kbmira_spread(whole, tmp_path):
    init = whole.dense_init(tmp_path, MOSES_INI_WEIGHTS)
    epochs = 20
    theirs, ours = [], []
    for seed in (1, 2, 3, 4):
        output = tmp_path / f"kbmira.{seed}"
        run_tool(BIN / "kbmira", "-r", seed, "-J", epochs, "-d", init, "-S", whole.scores, "-F", whole.features,
                 "-o", output)
        theirs.append(corpus_bleu(whole.data, kbmira_weights(output)))
        config = MiraConfig(epochs=epochs, standardize=False)
        ours.append(corpus_bleu(whole.data, mira(whole.data, np.array(MOSES_INI_WEIGHTS), config,
                                                 np.random.default_rng(seed)).weights))
    low, high = min(theirs), max(theirs)
    margin = max(high - low, 0.3)  # kbmira's own spread (at least 0.3 BLEU) on either side
    assert low - margin <= np.mean(ours) <= high + margin, (theirs, ours)


# -------------------------------------------------------------------------------------------------- PRO

def read_pro_pairs(path: Path, dims: int) -> np.ndarray:
    """pro's output: for each pair a line ``1 F<i> <better - worse> ...`` and its negation labelled 0;
    the better-minus-worse differences (P, D), features closer than 1e-5 left out as 0."""
    rows = []
    for line in read_text(path):
        tokens = line.split()
        if tokens[0] != "1":
            continue
        row = np.zeros(dims)
        for name, value in zip(tokens[1::2], tokens[2::2], strict=True):
            row[int(name[1:])] = float(value)
        rows.append(row)
    return np.array(rows)


@pytest.fixture(scope="module")
def pro_pairs(whole, tmp_path_factory) -> np.ndarray:
    output = tmp_path_factory.mktemp("pro") / "pairs"
    run_tool(BIN / "pro", "-r", 15, "-S", whole.scores, "-F", whole.features, "-o", output)
    return read_pro_pairs(output, whole.data.dims)


def matched_pairs(data: TuningData, block: np.ndarray, sentence: int) -> list[tuple[int, int]]:
    """For each better-minus-worse difference (P, D) of one sentence, a pair of its hypotheses (better, worse)
    with that feature difference (up to the 6 digits pro prints)."""
    features = data.features[sentence, : data.counts[sentence]]
    differences = features[:, None, :] - features[None, :, :]                       # (n, n, D)
    column = int(np.argmax(features.std(axis=0)))                                   # candidates on one column
    close = np.abs(differences[None, :, :, column] - block[:, None, None, column]) <= 1e-4 + 1e-4 * np.abs(
        block[:, None, None, column])                                               # (P, n, n)
    found = []
    for p in range(len(block)):
        first, second = np.nonzero(close[p])
        fits = (np.abs(differences[first, second] - block[p]) <= 1e-4 + 1e-4 * np.abs(block[p])).all(axis=-1)
        assert fits.any(), f"sentence {sentence}: no two hypotheses differ by {block[p]}"
        found.append((int(first[fits][0]), int(second[fits][0])))
    return found


def test_pro_samples_pairs_as_moses_pro(whole, pro_pairs):
    config = ProConfig(standardize=False)
    keep = config.keep
    # every sentence of these lists has more than keep pairs 0.05 apart: keep pairs each, in sentence order
    assert len(pro_pairs) == keep * SENTENCES
    differences, better = sample_pairs(whole.data, config, np.random.default_rng(5))
    assert len(differences) == keep * SENTENCES
    ours = np.where(better[:, None], differences, -differences)   # better minus worse
    ours[np.abs(ours) <= 1e-5] = 0.0
    # the mean difference of each sentence's pairs, compared sentence by sentence (a paired test)
    gap = ours.reshape(SENTENCES, keep, -1).mean(axis=1) - pro_pairs.reshape(SENTENCES, keep, -1).mean(axis=1)
    spread = gap.std(axis=0, ddof=1) / np.sqrt(SENTENCES)
    assert (np.abs(gap.mean(axis=0)) <= 4 * spread + 1e-9).all(), (gap.mean(axis=0), spread)
    # the hypotheses behind the pairs: their sentence-BLEU gaps (all >= 0.05, better first), the same
    # mean gap sentence by sentence, and as many pairs with each sentence's first hypothesis
    bleu = sentence_bleu_plus_one(whole.data.stats)
    gaps: dict[str, np.ndarray] = {}
    firsts: dict[str, int] = {}
    for name, pairs in (("rerank", ours), ("pro", pro_pairs)):
        blocks = pairs.reshape(SENTENCES, keep, -1)
        found = [matched_pairs(whole.data, blocks[s], s) for s in range(SENTENCES)]
        gaps[name] = np.array([[bleu[s, i] - bleu[s, j] for i, j in found[s]] for s in range(SENTENCES)])
        firsts[name] = sum(0 in pair for pairs_of in found for pair in pairs_of)
        assert (gaps[name] >= 0.05 - 1e-6).all(), name
    difference = gaps["rerank"].mean(axis=1) - gaps["pro"].mean(axis=1)
    assert abs(difference.mean()) <= 4 * difference.std(ddof=1) / np.sqrt(SENTENCES), difference.mean()
    assert abs(firsts["rerank"] - firsts["pro"]) <= 4 * np.sqrt(firsts["rerank"] + firsts["pro"]) + 5, firsts


def independent_fit(features: np.ndarray, labels: np.ndarray, l2: float) -> np.ndarray:
    """The same objective minimised by torch's L-BFGS, for comparison."""
    x = torch.tensor(features, dtype=torch.float64)
    y = torch.tensor(labels, dtype=torch.float64)
    w = torch.zeros(features.shape[1], dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS([w], lr=1.0, max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-15,
                                  line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        optimiser.zero_grad()
        value = (torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y, reduction="sum")
                 + 0.5 * l2 * (w @ w))
        value.backward()
        return value

    optimiser.step(loss)
    return w.detach().numpy()


def test_pro_classifier_on_moses_pairs(whole, pro_pairs):
    config = ProConfig(standardize=False)
    features = np.vstack([pro_pairs, -pro_pairs])
    labels = np.concatenate([np.ones(len(pro_pairs)), np.zeros(len(pro_pairs))])
    weights, _ = logistic_regression(features, labels, config.l2, config.max_iterations)
    assert weights == pytest.approx(independent_fit(features, labels, config.l2), rel=1e-4, abs=1e-6)
    # the weights from pro's pairs choose hypotheses as well as rerank's PRO on its own pairs
    theirs = corpus_bleu(whole.data, weights)
    ours = [corpus_bleu(whole.data, pro(whole.data, config, np.random.default_rng(seed)).weights)
            for seed in (1, 2, 3)]
    assert min(ours) - 0.5 <= theirs <= max(ours) + 0.5, (theirs, ours)
    assert theirs > corpus_bleu(whole.data, np.array(MOSES_INI_WEIGHTS)) - 1.0
