"""int8 inference (``Seq2Seq.set_precision("int8")``) against fp32 on tiny models of every decoder style:
scores, search steps, beam-search outputs and the encoder within a stated tolerance, through the scorer and
``rerank translate`` too; fp32 left exactly as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import all_models, save_model_dir, taught_model

from rerank.cli import main
from rerank.models.batching import pad
from rerank.models.config import ModelConfig
from rerank.models.encoder import RecurrentEncoder
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import BOS_ID, EOS_ID, Vocabulary
from rerank.scoring.pairs import Scorer, ScoringConfig
from rerank.search.beam import SearchConfig, beam_search

# int8 weights (per output row) and 7-bit activations (per call) move ln p by a few hundredths of a nat
# per token on these 16-unit models, up to 0.08 on a token; the tolerance: 0.1 nats per predicted token,
# </s> included (on the shipped models, see docs/speed-int8.md, the differences are smaller).
TOLERANCE_PER_TOKEN = 0.1
SOURCES = [[5, 6, 7, 8, 9, 10, 11, EOS_ID], [12, EOS_ID], [EOS_ID], [13, 14, 15, 16, EOS_ID],
           [17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, EOS_ID], [7, 7, 7, EOS_ID]]
MODELS = all_models()


@pytest.fixture(scope="module", params=MODELS, ids=[name for name, _ in MODELS])
def model(request: pytest.FixtureRequest) -> Seq2Seq:
    config: ModelConfig = request.param[1]
    return taught_model(config, updates=200, dtype=torch.float64).float()  # the same model in any process


def targets() -> list[list[int]]:
    """What a taught model translates each source into (see tiny_models.taught_model)."""
    return [[4 + w % 21 for w in s[:-1]] + [EOS_ID] for s in SOURCES]


def scores(model: Seq2Seq, precision: str) -> torch.Tensor:
    model.set_precision(precision)
    src, src_len = pad(SOURCES)
    trg, _ = pad(targets())
    with torch.inference_mode():
        return model.score(model.encode(src, src_len), trg)


def test_int8_scores_are_within_the_tolerance_of_fp32(model: Seq2Seq) -> None:
    fp32, int8 = scores(model, "fp32"), scores(model, "int8")
    tokens = torch.tensor([len(t) for t in targets()], dtype=fp32.dtype)
    assert not torch.equal(fp32, int8)  # the int8 multiplies are used
    assert ((int8 - fp32).abs() <= TOLERANCE_PER_TOKEN * tokens).all(), (fp32, int8)


def test_fp32_is_unchanged_by_a_round_trip_through_int8(model: Seq2Seq) -> None:
    before = scores(model, "fp32")
    scores(model, "int8")
    assert torch.equal(scores(model, "fp32"), before)


def test_int8_search_steps_and_translations_follow_fp32(model: Seq2Seq) -> None:
    sources = [s for s in SOURCES if len(s) <= 9]  # as long as the taught ones: peaked enough for one best
    src, src_len = pad(sources)
    config = SearchConfig(beam_size=4, nbest=1)
    results = {}
    for precision in ("fp32", "int8"):
        model.set_precision(precision)
        with torch.inference_mode():
            state = model.encode(src, src_len)
            log_probs, _ = model.step(torch.full((len(sources),), BOS_ID), state)
            results[precision] = log_probs, [h[0] for h in beam_search(model, src, src_len, config)]
    model.set_precision("fp32")
    (fp32_steps, fp32_best), (int8_steps, int8_best) = results["fp32"], results["int8"]
    assert (int8_steps.exp() - fp32_steps.exp()).abs().max() < 0.05  # probabilities of the first word
    # where fp32 finds the taught translation, the model is peaked there and int8 must find it too; elsewhere
    # near-ties may fall either way
    wanted = [[4 + w % 21 for w in s[:-1]] for s in sources]
    learnt = [i for i, (a, want) in enumerate(zip(fp32_best, wanted, strict=True)) if list(a.tokens) == want]
    assert len(learnt) >= 2, [a.tokens for a in fp32_best]
    for i in learnt:
        a, b = fp32_best[i], int8_best[i]
        assert a.tokens == b.tokens
        assert abs(a.score - b.score) <= TOLERANCE_PER_TOKEN * (len(a.tokens) + 1)


def test_scorer_takes_its_precision_from_its_config(model: Seq2Seq) -> None:
    pairs = [(["a", "b"], ["c"])]
    vocab = Vocabulary.build([["a", "b", "c"]], 10)
    fp32 = list(Scorer(model, vocab, vocab).score(pairs))
    scorer = Scorer(model, vocab, vocab, ScoringConfig(precision="int8"))
    assert model.int8 is not None
    int8 = list(scorer.score(pairs))
    assert int8 != fp32 and abs(int8[0] - fp32[0]) < 3 * TOLERANCE_PER_TOKEN
    model.set_precision("fp32")


def test_a_bad_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="precision"):
        ScoringConfig(precision="int4")
    model = taught_model(MODELS[0][1], updates=1)
    with pytest.raises(ValueError, match="precision must be one of fp32, int8"):
        model.set_precision("fp16")


def test_translate_precision_int8_gives_the_same_translations_on_a_taught_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vocab = Vocabulary.build([[f"w{i}" for i in range(4, 30)]], 100)
    model = taught_model(MODELS[1][1], updates=200, src_vocab=len(vocab), trg_vocab=len(vocab))
    directory = save_model_dir(tmp_path / "model", model, vocab, vocab)
    source = tmp_path / "source.txt"
    source.write_text("w5 w6 w7\nw12 w13\nw9\n")
    outputs = {}
    for precision in ("fp32", "int8"):
        out = tmp_path / f"out.{precision}"
        assert main(["-q", "translate", "--model", str(directory), "-i", str(source), "-o", str(out),
                     "--precision", precision]) == 0, capsys.readouterr().err
        outputs[precision] = out.read_text()
    assert outputs["int8"] == outputs["fp32"] and len(outputs["fp32"].splitlines()) == 3


def test_the_bidirectional_encoder_runs_in_int8_and_the_unidirectional_one_in_fp32() -> None:
    src, src_len = pad(SOURCES)
    seen = set()
    for name, config in MODELS:
        model = taught_model(config, updates=1).float().eval()
        encoder = getattr(model, "encoder", None)
        if not isinstance(encoder, RecurrentEncoder):
            continue
        weights = {key: value.clone() for key, value in encoder.rnn.state_dict().items()}
        with torch.inference_mode():
            fp32, _ = encoder(src, src_len)
            model.set_precision("int8")
            int8, _ = encoder(src, src_len)
            model.set_precision("fp32")
            again, _ = encoder(src, src_len)
        assert torch.equal(again, fp32), name  # the model's own GRU is left as it was
        assert all(torch.equal(value, weights[key]) for key, value in encoder.rnn.state_dict().items())
        assert not hasattr(encoder.rnn, "qconfig")
        seen.add(encoder.rnn.bidirectional)
        if encoder.rnn.bidirectional:
            assert not torch.equal(int8, fp32), name
            assert (int8 - fp32).abs().max() < 0.05, name
        else:
            assert torch.equal(int8, fp32), name
    assert seen == {True, False}  # both kinds were checked
