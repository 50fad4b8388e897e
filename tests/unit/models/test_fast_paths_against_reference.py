"""The fast decoder paths against the straightforward ones they replace, for every decoder style and
attention: the same training loss and gradients (dropout included), the same scores, the same search
steps and the same beam-search outputs; the blockwise output layer against a plain log-softmax; and
the prefix-sharing scorer (target prefixes, and the encoder-decoder's source prefixes) against scoring
each pair on its own; and where a device's faster path is the reference one, the same numbers."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np
import pytest
import torch
from tiny_models import DECODERS, SCORES, WINDOWS, taught_model, tiny_config, tiny_model

from rerank.models.architectures import build_model
from rerank.models.batching import pad, to_ids
from rerank.models.config import ModelConfig
from rerank.models.device import FASTER_PATH
from rerank.models.layers import dropout_rows, gold_log_probs, node_log_probs
from rerank.models.seq2seq import Seq2Seq, reference_path, shift_right
from rerank.models.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from rerank.scoring.pairs import Scorer, ScoringConfig
from rerank.search.beam import LengthPenalty, SearchConfig, beam_search

TOLERANCE = 1e-10  # float64 models: the two paths agree to rounding (the aim is 1e-5 in ln p)
SOURCES = [[5, 6, 7, 8, 9, 10, 11, EOS_ID], [12, EOS_ID], [EOS_ID], [13, 14, 15, 16, EOS_ID],
           [17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, EOS_ID], [7, 7, 7, EOS_ID]]
TARGETS = [[4, 5, 6, EOS_ID], [7, 8, 9, 10, 11, 12, 13, 14, 15, EOS_ID], [EOS_ID], [16, EOS_ID],
           [17, 18, 19, 20, 21, 22, 23, 24, 4, 5, 6, 7, EOS_ID], [8, 8, EOS_ID]]
MODELS = [("encdec", tiny_config("encdec"))] + [
    (f"{decoder}{'-feed' if feeding else ''}-{score}-{window}",
     tiny_config(architecture, decoder, feeding, score, window))
    for (architecture, decoder, feeding), score, window in itertools.product(DECODERS[1:], SCORES, WINDOWS)] + [
    # the recipe's options (layer norm and deep transitions take the looped recurrence on both paths)
    ("recipe-bahdanau", dataclasses.replace(tiny_config(), maxout_size=12, layer_norm=True, transition_depth=2,
                                            word_dropout=0.2, embedding_dropout=0.1, tie_target_embeddings=True)),
    ("recipe-bahdanau-tied-words", dataclasses.replace(tiny_config(), maxout_size=12, word_dropout=0.2,
                                                       hidden_dropout=0.1, tie_target_embeddings=True)),
    ("recipe-luong-feed-local-p", dataclasses.replace(tiny_config("rnnsearch", "luong", True, "general", "local-p"),
                                                      embedding_size=16, layer_norm=True, transition_depth=3,
                                                      word_dropout=0.2, tie_target_embeddings=True))]


@pytest.fixture(scope="module", params=MODELS, ids=[name for name, _ in MODELS])
def config(request: pytest.FixtureRequest) -> ModelConfig:
    return request.param[1]


def both(model: Seq2Seq, compute):  # type: ignore[no-untyped-def]
    """``compute()`` on the fast path, then on the reference path."""
    fast = compute()
    with reference_path(model):
        return fast, compute()


def test_scores_equal_the_reference(config: ModelConfig) -> None:
    model = tiny_model(config)
    src, src_len = pad(SOURCES)
    trg, _ = pad([t + [PAD_ID] * 3 for t in TARGETS])  # extra padding: the fast path skips it
    with torch.inference_mode():
        fast, reference = both(model, lambda: model.score(model.encode(src, src_len), trg))
    torch.testing.assert_close(fast, reference, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_training_loss_and_gradients_equal_the_reference(config: ModelConfig, dropout: float) -> None:
    """With dropout too: the fast path draws the same masks, and leaves the generator in the same state."""
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(config, dropout=dropout), 30, 25).double().train()
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    parameters = list(model.parameters())

    def loss_and_gradients() -> tuple[torch.Tensor, list[torch.Tensor | None], torch.Tensor]:
        torch.manual_seed(7)
        loss = model(src, src_len, trg)
        return loss, list(torch.autograd.grad(loss, parameters, allow_unused=True)), torch.rand(3)

    (loss, gradients, after), (ref_loss, ref_gradients, ref_after) = both(model, loss_and_gradients)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=TOLERANCE)
    assert torch.equal(after, ref_after)
    for (name, _), grad, ref_grad in zip(model.named_parameters(), gradients, ref_gradients, strict=True):
        if ref_grad is None:
            assert grad is None or not grad.any(), name
        else:
            assert grad is not None, name
            torch.testing.assert_close(grad, ref_grad, rtol=0, atol=TOLERANCE, msg=name)


def test_search_steps_equal_the_reference(config: ModelConfig) -> None:
    model = tiny_model(config)
    src, src_len = pad(SOURCES)
    words = torch.tensor([[BOS_ID] * len(SOURCES)] + [[4 + (i + t) % 20 for i in range(len(SOURCES))]
                                                      for t in range(5)])
    with torch.inference_mode():
        fast_state = reference_state = model.encode(src, src_len)
        for prev in words:
            log_probs, fast_state = model.step(prev, fast_state)
            with reference_path(model):
                ref_log_probs, reference_state = model.step(prev, reference_state)
            torch.testing.assert_close(log_probs, ref_log_probs, rtol=0, atol=TOLERANCE)
            torch.testing.assert_close(fast_state.hidden, reference_state.hidden, rtol=0, atol=TOLERANCE)
            if reference_state.attention is not None:
                assert fast_state.attention is not None
                torch.testing.assert_close(fast_state.attention, reference_state.attention, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("architecture,decoder,feeding", DECODERS)
@pytest.mark.parametrize("beam", [1, 5])
def test_beam_search_outputs_equal_the_reference(architecture: str, decoder: str, feeding: bool, beam: int) -> None:
    model = taught_model(tiny_config(architecture, decoder, feeding))
    sources = [[4 + (3 * i + j) % 26 for j in range(1 + i % 7)] + [EOS_ID] for i in range(12)]
    src, src_len = pad(sources)
    search = SearchConfig(beam_size=beam, nbest=beam, length_penalty=LengthPenalty("wu"))
    fast, reference = both(model, lambda: beam_search(model, src, src_len, search))
    for hypotheses, ref_hypotheses in zip(fast, reference, strict=True):
        assert [h.tokens for h in hypotheses] == [h.tokens for h in ref_hypotheses]
        np.testing.assert_allclose([h.score for h in hypotheses], [h.score for h in ref_hypotheses],
                                   rtol=0, atol=TOLERANCE)


def test_the_encoder_decoder_projects_its_summary_once_per_sentence() -> None:
    """proj_keys holds the GRU's input gates W_c c + b_i and the maxout layer's C_o c + b: what every
    decoder step of the straightforward path computes again."""
    model = tiny_model(tiny_config("encdec"))
    src, src_len = pad(SOURCES)
    with torch.inference_mode():
        state = model.encode(src, src_len)
        c, h, e = state.keys[:, 0], model.config.hidden_size, model.config.embedding_size
        gates = c @ model.rnn.weight_ih_l0[:, e:].t() + model.rnn.bias_ih_l0
        maxout = model.output.maxout.linear
        source_part = c @ maxout.weight[:, h + e:].t() + maxout.bias
    torch.testing.assert_close(state.proj_keys[:, 0], torch.cat([gates, source_part], dim=1), rtol=0, atol=1e-12)


# -- the output layer, block by block -----------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 3, 64])
@pytest.mark.parametrize("bias", [True, False])
def test_gold_log_probs_and_their_gradients_equal_a_plain_log_softmax(rows: int, bias: bool) -> None:
    torch.manual_seed(3)
    layer = torch.nn.Linear(6, 11, bias=bias).double()
    features = torch.randn(10, 6, dtype=torch.float64, requires_grad=True)
    gold = torch.randint(0, 11, (10,))
    plain = torch.log_softmax(layer(features), dim=-1).gather(1, gold[:, None]).squeeze(1)
    blocked = gold_log_probs(features, layer, gold, rows)
    torch.testing.assert_close(blocked, plain, rtol=0, atol=TOLERANCE)
    parameters = [features, *layer.parameters()]
    for upstream in (torch.full((10,), -0.25, dtype=torch.float64), torch.randn(10, dtype=torch.float64)):
        # one factor for every row (a loss), and one per row (recomputed block by block)
        expected = torch.autograd.grad(plain, parameters, upstream, retain_graph=True)
        got = torch.autograd.grad(blocked, parameters, upstream, retain_graph=True)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=TOLERANCE)
    with torch.inference_mode():
        torch.testing.assert_close(gold_log_probs(features, layer, gold, rows), plain.detach(), rtol=0, atol=TOLERANCE)
        assert gold_log_probs(features[:0], layer, gold[:0], rows).shape == (0,)


def test_node_log_probs_read_each_row_for_every_entry() -> None:
    torch.manual_seed(4)
    layer = torch.nn.Linear(5, 9).double()
    features = torch.randn(7, 5, dtype=torch.float64)
    nodes = np.array([0, 0, 0, 2, 5, 5, 6])  # sorted; rows 1, 3 and 4 read by no entry
    ids = np.array([1, 1, 8, 0, 3, 4, 2])
    plain = torch.log_softmax(layer(features), dim=-1)[torch.as_tensor(nodes), torch.as_tensor(ids)]
    for rows in (1, 2, 256):
        torch.testing.assert_close(node_log_probs(features, layer, nodes, ids, rows), plain, rtol=0, atol=TOLERANCE)


def test_dropout_rows_drop_what_dropout_on_every_position_drops() -> None:
    keep = torch.tensor([[True, True, False], [True, False, False]])
    x = torch.randn(2, 3, 4)
    torch.manual_seed(11)
    everywhere = torch.nn.functional.dropout(x, 0.5, training=True)
    torch.manual_seed(11)
    rows = dropout_rows(x[keep], keep, 0.5, training=True)
    torch.testing.assert_close(rows, everywhere[keep], rtol=0, atol=0)
    assert dropout_rows(x[keep], keep, 0.5, training=False) is not None
    torch.testing.assert_close(dropout_rows(x[keep], keep, 0.5, training=False), x[keep], rtol=0, atol=0)


# -- scoring with shared prefixes ---------------------------------------------------------------------------


def shared_prefix_pairs(count: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Pairs like an n-best list's: few sources, their targets variations of one another (duplicates,
    prefixes of each other, empty targets included)."""
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(21)]
    sources = [[f"s{rng.randrange(26)}" for _ in range(rng.randint(0, 9))] for _ in range(5)]
    bases = {i: [rng.choice(words) for _ in range(rng.randint(3, 10))] for i in range(len(sources))}
    pairs = []
    for _ in range(count):
        i = rng.randrange(len(sources))
        target = list(bases[i][: rng.randint(0, len(bases[i]))])
        if target and rng.random() < 0.5:
            target[rng.randrange(len(target))] = rng.choice(words + ["unknown"])
        pairs.append((sources[i], target + [rng.choice(words) for _ in range(rng.randint(0, 2))]))
    return pairs


@pytest.mark.parametrize("architecture,decoder,feeding", DECODERS)
@pytest.mark.parametrize("max_tokens", [4096, 7, 1])
def test_prefix_sharing_scores_equal_scoring_each_pair_alone(architecture: str, decoder: str, feeding: bool,
                                                            max_tokens: int) -> None:
    """Small token budgets cut the tries inside a source's targets; the scores do not change."""
    model = tiny_model(tiny_config(architecture, decoder, feeding, window="local-m"
                                   if decoder == "luong" else "global"))
    src_vocab = Vocabulary.build([[f"s{i}" for i in range(26)]], 26)
    trg_vocab = Vocabulary.build([[f"t{i}" for i in range(21)]], 21)
    pairs = shared_prefix_pairs(80, seed=len(architecture) + max_tokens)
    shared = list(Scorer(model, src_vocab, trg_vocab, ScoringConfig(window=50, max_tokens=max_tokens)).score(pairs))
    alone = []
    with torch.inference_mode(), reference_path(model):
        for source, target in pairs:
            src, src_len = pad(to_ids([source], src_vocab))
            trg, _ = pad(to_ids([target], trg_vocab))
            alone.append(float(model.score(model.encode(src, src_len), trg)))
    np.testing.assert_allclose(shared, alone, rtol=0, atol=TOLERANCE)


def phrase_table_pairs(count: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Pairs like a phrase table's, sorted by source: sources that are prefixes of a few phrases (the
    empty one, duplicates and sources that are prefixes of one another included), few targets each."""
    rng = random.Random(seed)
    phrases = [[f"s{rng.randrange(26)}" for _ in range(7)] for _ in range(4)]
    pairs = [(rng.choice(phrases)[: rng.randint(0, 7)], [f"t{rng.randrange(21)}" for _ in range(rng.randint(0, 3))])
             for _ in range(count)]
    return sorted(pairs)


@pytest.mark.parametrize("max_tokens", [4096, 5, 1])
def test_source_prefix_sharing_scores_equal_encoding_each_source_alone(max_tokens: int) -> None:
    """The encoder-decoder reads a trie of its sources' prefixes; small budgets cut it into several."""
    model = tiny_model(tiny_config("encdec"))
    assert model.reads_source_prefixes
    src_vocab = Vocabulary.build([[f"s{i}" for i in range(26)]], 26)
    trg_vocab = Vocabulary.build([[f"t{i}" for i in range(21)]], 21)
    pairs = phrase_table_pairs(120, seed=max_tokens)
    assert len({tuple(s) for s, _ in pairs}) < len(pairs) / 2  # shared sources, and prefixes of each other
    shared = list(Scorer(model, src_vocab, trg_vocab, ScoringConfig(window=40, max_tokens=max_tokens)).score(pairs))
    with reference_path(model):
        alone = list(Scorer(model, src_vocab, trg_vocab, ScoringConfig(window=1, share_prefixes=False)).score(pairs))
    np.testing.assert_allclose(shared, alone, rtol=0, atol=TOLERANCE)


def test_float32_fast_scores_stay_within_float32_rounding_of_the_reference() -> None:
    """In float32 the two paths add in other orders; both stay near the float64 value."""
    config = tiny_config()
    exact = tiny_model(config)
    model = tiny_model(config, dtype=torch.float32)
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    with torch.inference_mode():
        truth = exact.score(exact.encode(src, src_len), trg)
        fast, reference = both(model, lambda: model.score(model.encode(src, src_len), trg))
    torch.testing.assert_close(fast.double(), truth, rtol=0, atol=1e-5)
    torch.testing.assert_close(reference.double(), truth, rtol=0, atol=1e-5)


def test_teacher_forced_logits_are_the_features_through_the_output_layer(config: ModelConfig) -> None:
    model = tiny_model(config)
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    keep = trg != PAD_ID
    with torch.inference_mode():
        state = model.encode(src, src_len)
        logits, _ = model.teacher_forced(state, shift_right(trg))
        features = model.output_layer(model.features(state, shift_right(trg), keep))
    torch.testing.assert_close(features, logits[keep], rtol=0, atol=TOLERANCE)


def test_the_recurrence_backward_pass_written_out_passes_gradcheck() -> None:
    """RNNsearch's training recurrence (Bahdanau, additive global attention) and its hand-written
    gradients, with padding in two of the three sources."""
    from rerank.models.rnnsearch import _Recurrence

    generator = torch.Generator().manual_seed(5)
    batch, steps, source, hidden, attention, context = 3, 4, 5, 6, 7, 8

    def random(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float64, generator=generator).requires_grad_()

    pad_mask = torch.zeros(batch, source, dtype=torch.bool)
    pad_mask[0, 3:], pad_mask[2, 1:] = True, True
    inputs = (random(batch, steps, 3 * hidden), random(batch, hidden), random(batch, source, context),
              random(batch, source, attention), pad_mask, random(3 * hidden + attention, hidden),
              random(3 * hidden + attention), random(attention), random(3 * hidden, context))
    assert torch.autograd.gradcheck(_Recurrence.apply, inputs)


@pytest.mark.parametrize("architecture", ["encdec", "rnnsearch"])
def test_word_tables_follow_the_weights(architecture: str) -> None:
    """The looked-up parts of each word are computed again when a weight changes in place or is replaced."""
    model = tiny_model(tiny_config(architecture))
    src, src_len = pad(SOURCES)
    prev = torch.tensor([BOS_ID, 4, 5, 6, 7, EOS_ID])

    def step_both() -> None:
        with torch.inference_mode():
            state = model.encode(src, src_len)
            fast, _ = model.step(prev, state)
            with reference_path(model):
                reference, _ = model.step(prev, state)
        torch.testing.assert_close(fast, reference, rtol=0, atol=TOLERANCE)

    step_both()
    with torch.no_grad():
        model.embed.lookup.weight.mul_(1.5)  # in place
    step_both()
    model.load_state_dict({k: v * 0.9 for k, v in model.state_dict().items()})  # copied in
    step_both()
    model.float().double()  # new tensors
    step_both()


@pytest.mark.parametrize("architecture", ["encdec", "rnnsearch"])
def test_a_device_whose_faster_path_is_the_reference_gets_the_same_numbers(
        monkeypatch: pytest.MonkeyPatch, architecture: str) -> None:
    """Where the table chooses the reference path (as on a GPU), scoring with prefix sharing asked for, search
    and the training loss take it, and give the fast path's numbers."""
    model = tiny_model(tiny_config(architecture))
    scorer = Scorer(model, Vocabulary.build([["a"]], 10), Vocabulary.build([["x"]], 10))
    sources, targets = [[5, 6, 7, 3], [8, 3], [5, 6, 7, 3]], [[9, 10, 3], [11, 3], [9, 12, 13, 3]]
    src, src_len = pad([[5, 6, 7, 3], [8, 9, 3]])
    trg, _ = pad([[9, 10, 11, 3], [12, 3]])
    search = SearchConfig(beam_size=3, nbest=2)

    def everything() -> tuple[np.ndarray, list[list[list[int]]], torch.Tensor]:
        scores = scorer.score_ids(sources, targets, np.arange(len(sources)))
        found = [[h.tokens for h in hypotheses] for hypotheses in beam_search(model, src, src_len, search)]
        model.train()
        torch.manual_seed(3)
        loss = model(src, src_len, trg)
        model.eval()
        return scores, found, loss.detach()

    fast = everything()
    calls: list[str] = []
    for method in ("teacher_forced", "step_reference"):
        original = getattr(model, method)
        monkeypatch.setattr(model, method, lambda *a, _m=method, _f=original: calls.append(_m) or _f(*a))
    monkeypatch.setitem(FASTER_PATH, ("cpu", "training"), "reference")
    monkeypatch.setitem(FASTER_PATH, ("cpu", "scoring"), "reference")
    monkeypatch.setitem(FASTER_PATH, ("cpu", "search"), "reference")
    reference = everything()
    assert {"teacher_forced", "step_reference"} <= set(calls)
    np.testing.assert_allclose(reference[0], fast[0], rtol=0, atol=1e-10)
    assert reference[1] == fast[1]
    torch.testing.assert_close(reference[2], fast[2], rtol=0, atol=1e-10)
