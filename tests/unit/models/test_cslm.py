"""The CSLM: its distribution over the whole vocabulary (network over the shortlist, back-off model elsewhere)
sums to 1, the shortlist's back-off mass from the ARPA structure equals the plain sum, scoring, batch
invariance, exact resumption of training, and a tiny training run through ``rerank train`` and the feature."""

from __future__ import annotations

import collections
import math
from pathlib import Path

import kenlm
import numpy as np
import pytest
import torch
import yaml

from rerank.cli import main
from rerank.errors import FormatError
from rerank.features.registry import build_feature
from rerank.formats.arpa import read_arpa_structure
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, save_state
from rerank.models.cslm import CSLM, LN_10, VOCAB, BackoffLM, CSLMConfig, CSLMNet, load_cslm_net
from rerank.models.vocab import Vocabulary
from rerank.training.cslm import CSLMData, CSLMTrainConfig, CSLMTrainer, CSLMTraining

TEXT = """a dog runs in the park
a man runs in the street
the dog plays with a ball
a woman walks in the park
two men play with a dog
the man walks the dog in the street
a girl plays in the park with a ball
the woman runs
""".splitlines()
VALID = ["a dog walks in the street", "the girl runs with the dog"]


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


@pytest.fixture(scope="module")
def arpa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lm") / "tiny.arpa"
    write_arpa(path, TEXT)
    return path


def tiny_cslm(arpa: Path, shortlist: list[str], order: int = 4) -> CSLM:
    """A random network over ``shortlist`` (its words and ``</s>``) with the back-off model ``arpa``."""
    torch.manual_seed(0)
    vocab = Vocabulary(["<pad>", "<unk>", "<s>", "</s>", *shortlist])
    net = CSLMNet(CSLMConfig(order=order, embedding_size=6, hidden_sizes=(12, 8)), len(vocab))
    with torch.no_grad():
        net.output.weight.mul_(8)  # peaked: far from the back-off model's distribution
    model = kenlm.Model(str(arpa))
    structure = read_arpa_structure(arpa, keep=vocab.ids.__contains__)
    return CSLM(net, vocab, BackoffLM(model, structure, vocab.tokens), chunk=3)


# "swims" is in the shortlist but unknown to the back-off model: the back-off model gives it (as <unk>)
SHORTLIST = ["a", "the", "dog", "in", "park", "runs", "with", "man", "swims"]
HISTORIES = [[], ["a"], ["a", "dog"], ["the", "man", "walks"], ["zebra", "in"], ["a", "girl", "plays", "in", "the"],
             ["the", "dog", "plays", "with", "a", "ball", "in", "the", "park"], ["ball", "ball", "street"]]


@pytest.mark.parametrize("history", HISTORIES)
def test_the_distribution_over_the_whole_vocabulary_sums_to_one(arpa: Path, history: list[str]) -> None:
    cslm = tiny_cslm(arpa, SHORTLIST)
    vocab = sorted(cslm.backoff.structure.vocab - {"<s>"})  # the back-off model's words, </s> and <unk>
    assert "</s>" in vocab and "<unk>" in vocab and "swims" not in vocab
    values = np.exp(cslm.log_probs([history] * len(vocab), vocab))
    assert values.sum() == pytest.approx(1.0, abs=1e-6)
    # not the back-off model's distribution: the network shares out the shortlist's mass
    context = cslm.backoff.context(history)
    backoff = np.array([10 ** cslm.backoff.log10(context, w) for w in vocab])
    assert backoff.sum() == pytest.approx(1.0, abs=1e-6)
    in_shortlist = np.array([w in cslm.backoff.shortlist for w in vocab])
    assert np.abs(values - backoff)[in_shortlist].max() > 1e-3
    np.testing.assert_allclose(values[~in_shortlist], backoff[~in_shortlist], rtol=1e-12)
    assert values[in_shortlist].sum() == pytest.approx(backoff[in_shortlist].sum(), abs=1e-6)  # float32 softmax


@pytest.mark.parametrize("history", HISTORIES)
def test_the_shortlist_mass_from_the_arpa_structure_is_the_plain_sum(arpa: Path, history: list[str]) -> None:
    backoff = tiny_cslm(arpa, SHORTLIST).backoff
    assert set(backoff.shortlist) == {"</s>", *SHORTLIST} - {"swims"}
    context = backoff.context(history)
    for h in (context[i:] for i in range(len(context) + 1)):  # the context and every shorter one
        plain = sum(10 ** backoff.log10(h, w) for w in backoff.shortlist)
        assert backoff.shortlist_mass(h) == pytest.approx(plain, abs=2e-7)  # KenLM adds log10 values in float32


def test_the_shortlist_mass_on_the_real_4_gram(multi30k_moses: Path) -> None:
    path = multi30k_moses / "lm" / "train.fr.4.arpa"
    shortlist = ["</s>", "un", "une", "homme", "chien", "dans", "la", "rue", "de", "le", "avec", "sur"]
    structure = read_arpa_structure(path, keep=set(shortlist).__contains__)
    assert structure.order == 4 and len(structure.vocab) == 11222
    backoff = BackoffLM(kenlm.Model(str(path)), structure, shortlist)
    for history in [[], ["un"], ["un", "homme"], ["un", "homme", "marche", "dans"], ["zzz", "dans", "la"],
                    ["deux", "chiens", "jouent", "sur", "la"]]:
        h = backoff.context(history)
        plain = sum(10 ** backoff.log10(h, w) for w in backoff.shortlist)
        assert backoff.shortlist_mass(h) == pytest.approx(plain, abs=2e-7)  # KenLM adds log10 values in float32


def test_scoring_sums_the_tokens_and_does_not_depend_on_the_batch(arpa: Path) -> None:
    cslm = tiny_cslm(arpa, SHORTLIST)
    sentences = [s.split() for s in ["a dog runs in the park", "the zebra swims", "", "park park park the a",
                                     "a man walks with the dog in the park with a ball"]]
    scores = cslm.score(sentences)
    for sentence, score in zip(sentences, scores, strict=True):
        words = [*sentence, "</s>"]
        tokens = cslm.log_probs([sentence[:i] for i in range(len(words))], words)
        assert score == pytest.approx(tokens.sum(), abs=1e-5)
        assert cslm.score([sentence])[0] == pytest.approx(score, abs=1e-5)
    assert cslm.score(sentences[::-1]) == pytest.approx(scores[::-1], abs=1e-5)
    # a word neither model knows gets the back-off model's <unk> probability (KenLM's, in natural log)
    unknown = cslm.sentence_log_probs([["the", "zebra"]])[0][1]
    kenlm_values = [lp for lp, _, _ in cslm.backoff.model.full_scores("the zebra")]
    assert unknown == pytest.approx(kenlm_values[1] * LN_10, abs=1e-6)


def test_an_arpa_file_cut_short_is_refused_at_its_line(tmp_path: Path, arpa: Path) -> None:
    lines = arpa.read_text().splitlines()
    cut = tmp_path / "cut.arpa"
    cut.write_text("\n".join(lines[:12]) + "\n")
    with pytest.raises(FormatError, match=r"cut\.arpa:13: expected .*grams as the header says|cut\.arpa"):
        read_arpa_structure(cut)
    bad = tmp_path / "bad.arpa"
    bad.write_text("\n".join(lines[:8] + ["-0.5 two words -0.1"] + lines[9:]) + "\n")
    with pytest.raises(FormatError, match=r"bad\.arpa:9: expected log10 p, 1 word"):
        read_arpa_structure(bad)


def train_config(tmp_path: Path, out: str, **training: object) -> CSLMTrainConfig:
    (tmp_path / "train.txt").write_text("\n".join(TEXT) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(VALID) + "\n")
    settings = {"batch_size": 16, "valid_every": 1000, "log_every": 1000, "seed": 7, **training}
    return CSLMTrainConfig(model=CSLMConfig(order=4, embedding_size=8, hidden_sizes=(16, 12), dropout=0.3),
                           data=CSLMData(train=str(tmp_path / "train.txt"), valid=str(tmp_path / "valid.txt")),
                           training=CSLMTraining(**settings),  # type: ignore[arg-type]
                           output_dir=str(tmp_path / out))


def test_training_resumes_exactly(tmp_path: Path) -> None:
    """2 updates, stop, resume to 4 (across an epoch's end, with dropout) equals 4 updates straight."""
    CSLMTrainer(train_config(tmp_path, "stopped", max_updates=2)).train()
    at_2 = torch.load(tmp_path / "stopped" / CHECKPOINT, weights_only=True)["model"]
    resumed = CSLMTrainer(train_config(tmp_path, "stopped", max_updates=4))
    assert resumed.progress.updates == 2 and len(resumed.train_rows) // 16 == 3  # 4 updates cross an epoch
    resumed.train()
    CSLMTrainer(train_config(tmp_path, "straight", max_updates=4)).train()
    a = torch.load(tmp_path / "stopped" / CHECKPOINT, weights_only=True)
    b = torch.load(tmp_path / "straight" / CHECKPOINT, weights_only=True)
    assert a["progress"]["updates"] == b["progress"]["updates"] == 4
    assert (a["progress"]["epoch"], a["progress"]["batch"]) == (b["progress"]["epoch"], b["progress"]["batch"])
    for name, value in b["model"].items():
        assert torch.equal(a["model"][name], value), name
    assert torch.equal(a["rng"], b["rng"])
    assert not all(torch.equal(at_2[k], v) for k, v in b["model"].items())  # updates 3 and 4 moved the weights


def test_a_tiny_training_run_and_the_feature(tmp_path: Path, arpa: Path) -> None:
    config = train_config(tmp_path, "cslm", max_updates=60, valid_every=20, learning_rate=0.01,
                          max_epochs=100)
    path = tmp_path / "cslm.yaml"
    path.write_text(yaml.safe_dump({"model": {"architecture": "cslm", "order": 4, "embedding_size": 8,
                                              "hidden_sizes": [16, 12], "dropout": 0.3},
                                    "data": vars(config.data), "training": vars(config.training),
                                    "output_dir": config.output_dir}))
    assert main(["-q", "train", "--config", str(path), "--threads", "1"]) == 0
    out = Path(config.output_dir)
    checkpoint = torch.load(out / CHECKPOINT, weights_only=True)
    history = [entry["valid_ppl"] for entry in checkpoint["progress"]["history"]]
    assert len(history) == 3 and min(history) < history[0]
    net, vocab = load_cslm_net(out)
    assert vocab.tokens == Vocabulary.load(out / VOCAB).tokens and "dog" in vocab and "girl" not in vocab
    feature = build_feature({"kind": "cslm", "model": str(out), "lm": str(arpa)})
    assert (feature.name, feature.dims, feature.needs_source) == ("CSLM0", 1, False)
    pairs = [([], "a dog runs in the park".split()), (["x"], "park the in runs dog a".split())]
    values = feature.score(pairs)
    assert values.shape == (2, 1) and np.all(values < 0) and values[0, 0] > values[1, 0]
    # float16 weights load as float32 with the same scores to float16's precision
    save_state({"model": {k: v.half() for k, v in net.state_dict().items()}}, out / WEIGHTS)
    half = build_feature({"kind": "cslm", "model": str(out), "lm": str(arpa), "name": "CSLM1"})
    np.testing.assert_allclose(half.score(pairs), values, atol=0.05)
