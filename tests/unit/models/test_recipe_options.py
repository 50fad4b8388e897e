"""The options of Sennrich & Zhang's recipe: label smoothing changes the loss exactly as defined and never
the scores; tied embeddings are one tensor; word dropout drops whole tokens in training only; the two
dropout rates go where they say; the defaults build today's models; warm-up and kept checkpoints in the
trainer, and rerank average of them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_config

import rerank.training.trainer as trainer_module
from rerank.cli import main
from rerank.config import from_dict
from rerank.errors import RerankError
from rerank.models.architectures import build_model
from rerank.models.averaging import CHECKPOINTS_DIR, checkpoint_path, checkpoint_updates
from rerank.models.batching import pad
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, float16_weights, load_model, load_state, save_state
from rerank.models.config import ModelConfig, SubwordConfig
from rerank.models.layers import word_dropout
from rerank.models.seq2seq import reference_path
from rerank.models.vocab import EOS_ID, PAD_ID
from rerank.training.config import TrainConfig
from rerank.training.trainer import Trainer

SOURCES = [[5, 6, 7, 8, 9, EOS_ID], [12, EOS_ID], [13, 14, 15, 16, 17, 18, 19, EOS_ID]]
TARGETS = [[4, 5, 6, EOS_ID], [7, 8, 9, 10, 11, EOS_ID], [16, EOS_ID]]
RECIPE = dataclasses.replace(tiny_config(), maxout_size=12, layer_norm=True, transition_depth=2, word_dropout=0.2,
                             embedding_dropout=0.1, hidden_dropout=0.3, tie_target_embeddings=True)
TEST_DATA = Path(__file__).resolve().parents[2] / "data"
TOY = {"source": str(TEST_DATA / "toy.en"), "target": str(TEST_DATA / "toy.fr")}


@pytest.mark.parametrize("reference", [False, True])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.5])
def test_label_smoothing_is_the_defined_mixture_and_scores_stay_log_probabilities(reference: bool,
                                                                                   epsilon: float) -> None:
    torch.manual_seed(0)
    model = build_model(RECIPE, 30, 25).double().eval()
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    with torch.no_grad(), reference_path(model, reference):
        loss = model(src, src_len, trg, label_smoothing=epsilon)
        log_probs = torch.log_softmax(model.logits(src, src_len, trg), dim=-1)  # (B, T, V)
        scores = model.score(model.encode(src, src_len), trg)
    real = trg != PAD_ID
    nll = -log_probs.gather(-1, trg[..., None])[..., 0][real]
    uniform = -log_probs.mean(-1)[real]  # mean over the vocabulary of −ln p
    expected = ((1 - epsilon) * nll + epsilon * uniform).sum()
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-9)
    gold = log_probs.gather(-1, trg[..., None])[..., 0]
    torch.testing.assert_close(scores, torch.where(real, gold, 0.0).sum(-1), rtol=0, atol=1e-9)  # ln p, unsmoothed
    if epsilon:
        assert abs(float(loss) - float(nll.sum())) > 1e-3  # it changes the loss


def test_label_smoothing_gradients_of_the_fast_path_equal_the_reference_path() -> None:
    """The fast path's smoothed loss (no (N, V) tensor) has the reference path's gradients."""
    torch.manual_seed(0)
    model = build_model(RECIPE, 30, 25).double().eval()
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    grads = []
    for reference in (False, True):
        model.zero_grad()
        with reference_path(model, reference):
            model(src, src_len, trg, label_smoothing=0.2).backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for fast, ref in zip(*grads, strict=True):
        torch.testing.assert_close(fast, ref, rtol=1e-9, atol=1e-10)


def test_tied_target_embeddings_are_one_tensor_through_training_and_loading(tmp_path: Path) -> None:
    model = build_model(RECIPE, 30, 25)
    assert model.output_layer.weight is model.embed.lookup.weight
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    model.train()
    model(src, src_len, trg, label_smoothing=0.1).backward()
    optimizer.step()
    assert model.output_layer.weight.data_ptr() == model.embed.lookup.weight.data_ptr()
    assert len(list(model.parameters())) == len({id(p) for p in model.parameters()})
    from rerank.models.checkpoint import save_model
    from rerank.models.vocab import SPECIALS, Vocabulary

    directory = save_model(tmp_path / "m", model.eval(), Vocabulary([*SPECIALS, *map(str, range(26))]),
                           Vocabulary([*SPECIALS, *map(str, range(21))]))
    loaded = load_model(directory).model
    assert loaded.output_layer.weight is loaded.embed.lookup.weight  # type: ignore[union-attr]
    torch.testing.assert_close(loaded.output_layer.weight, model.output_layer.weight)


def test_float16_weights_keep_tied_embeddings_one_tensor(tmp_path: Path) -> None:
    model = build_model(RECIPE, 30, 25)
    half = float16_weights(model.state_dict())
    assert half["deep_output.project.weight"] is half["embed.lookup.weight"]
    assert all(v.dtype == torch.float16 for v in half.values() if v.is_floating_point())
    save_state({"model": half}, tmp_path / "tied.pt")
    save_state({"model": {k: v.clone() for k, v in half.items()}}, tmp_path / "untied.pt")
    table = model.embed.lookup.weight.numel() * 2  # bytes of the table in float16
    assert (tmp_path / "untied.pt").stat().st_size - (tmp_path / "tied.pt").stat().st_size >= table
    loaded = load_state(tmp_path / "tied.pt")["model"]
    assert loaded["deep_output.project.weight"].data_ptr() == loaded["embed.lookup.weight"].data_ptr()


def test_tied_source_and_target_embeddings_need_a_joint_vocabulary() -> None:
    joint = SubwordConfig(vocab_size=400, joint=True)
    config = dataclasses.replace(RECIPE, subwords=joint, tie_source_target_embeddings=True)
    model = build_model(config, 30, 30)
    assert model.encoder.embed.lookup.weight is model.embed.lookup.weight  # type: ignore[union-attr]
    assert model.output_layer.weight is model.embed.lookup.weight
    with pytest.raises(ValueError, match="one vocabulary"):
        build_model(config, 30, 25)
    with pytest.raises(ValueError, match="joint: true"):
        dataclasses.replace(RECIPE, tie_source_target_embeddings=True)
    with pytest.raises(ValueError, match="joint: true"):
        dataclasses.replace(RECIPE, subwords=SubwordConfig(vocab_size=400), tie_source_target_embeddings=True)
    with pytest.raises(ValueError, match="maxout_size"):
        dataclasses.replace(RECIPE, maxout_size=8)


def test_the_options_are_refused_where_they_do_not_exist() -> None:
    with pytest.raises(ValueError, match="only for architecture: rnnsearch"):
        ModelConfig(architecture="encdec", word_dropout=0.1)
    with pytest.raises(ValueError, match="looped decoders"):
        ModelConfig(decoder="luong", layer_norm=True)


def test_word_dropout_drops_whole_tokens_in_training_only() -> None:
    torch.manual_seed(0)
    embedded = torch.rand(50, 7, 9) + 0.1
    dropped = word_dropout(embedded, 0.3, training=True)
    zero = (dropped == 0).all(-1)
    kept = ~zero
    assert 0.15 < float(zero.float().mean()) < 0.45
    torch.testing.assert_close(dropped[kept], embedded[kept] / 0.7)
    assert not ((dropped == 0) & ~zero[..., None]).any()  # a token is dropped whole or not at all
    assert word_dropout(embedded, 0.3, training=False) is embedded


def test_the_two_dropout_rates_go_where_they_say() -> None:
    model = build_model(RECIPE, 30, 25)
    assert model.dropout.p == 0.1 and model.encoder.dropout.p == 0.1  # type: ignore[union-attr]
    assert model.deep_output.dropout.p == 0.3  # type: ignore[union-attr]
    plain = build_model(dataclasses.replace(tiny_config(), dropout=0.25), 30, 25)
    assert plain.dropout.p == plain.deep_output.dropout.p == 0.25  # type: ignore[union-attr]


def test_the_defaults_build_the_models_of_before() -> None:
    """No new weights unless an option asks: existing model directories load as they are."""
    names = set(build_model(tiny_config(), 30, 25).state_dict())
    assert not any(part in name for name in names for part in ("norm", "transitions", "cell."))
    assert "encoder.rnn.weight_hh_l0_reverse" in names


def train_config(tmp_path: Path, **training: object) -> TrainConfig:
    return from_dict(TrainConfig, {
        "model": {"architecture": "rnnsearch", "embedding_size": 8, "hidden_size": 8, "maxout_size": 8,
                  "attention": {"hidden_size": 8}, "tie_target_embeddings": True, "layer_norm": True,
                  "word_dropout": 0.1},
        "data": {"train": TOY, "valid": TOY, "src_vocab_size": 50, "trg_vocab_size": 50},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 1, "valid_every": 1,
                     "max_epochs": 1000, "threads": 1, "log_every": 1000, "label_smoothing": 0.1, **training},
        "output_dir": str(tmp_path / "model")})


def test_warm_up_kept_checkpoints_and_rerank_average(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = Trainer(train_config(tmp_path, warmup_updates=4, keep_checkpoints=2, max_updates=6, lr_decay=0.5))
    plan = iter([5.0, 4.0, 4.5, 3.0, 3.5, 3.6])
    rates: list[float] = []
    weights: list[dict[str, torch.Tensor]] = []

    def validation(model: torch.nn.Module, *args: object) -> float:
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return next(plan)

    monkeypatch.setattr(trainer_module, "validation_perplexity", validation)
    trainer.train()
    # warm-up: 1/4, 2/4, 3/4, then the full rate, halved after each validation without improvement
    assert rates == pytest.approx([0.0025, 0.005, 0.0075, 0.01 * 0.5, 0.01 * 0.5, 0.01 * 0.25])
    out = tmp_path / "model"
    assert checkpoint_updates(out) == [4, 5, 6]  # the last 2 (5, 6) and the best 2 (4: 3.0, 5: 3.5)
    assert load_state(out / CHECKPOINT)["progress"]["history"][3]["valid_ppl"] == 3.0
    assert main(["-q", "average", str(out), str(tmp_path / "best2"), "--best", "2"]) == 0
    averaged = load_model(tmp_path / "best2").model.state_dict()
    for name, value in averaged.items():
        torch.testing.assert_close(value, (weights[3][name] + weights[4][name]) / 2)
    assert main(["-q", "average", str(out), str(tmp_path / "last"), "--last", "5"]) == 2  # only 4 kept
    assert main(["-q", "average", str(out), str(out), "--last", "2"]) == 2  # never over its input
    assert (out / WEIGHTS).exists() and (out / CHECKPOINTS_DIR).is_dir()
    # weights kept after checkpoint.pt by a run that stopped between the two writes go when the run resumes
    stale = checkpoint_path(out, 9)
    stale.write_bytes(checkpoint_path(out, 6).read_bytes())
    Trainer(train_config(tmp_path, warmup_updates=4, keep_checkpoints=2, max_updates=6, lr_decay=0.5))
    assert not stale.exists() and checkpoint_updates(out) == [4, 5, 6]


def test_a_run_written_before_the_options_existed_resumes(tmp_path: Path) -> None:
    """A model directory's config.yaml without the new keys reads with their defaults: the run goes on."""
    import yaml

    config = dataclasses.replace(train_config(tmp_path, max_updates=2), model=dataclasses.replace(
        train_config(tmp_path).model, tie_target_embeddings=False, layer_norm=False, word_dropout=0.0))
    Trainer(config).train()
    path = tmp_path / "model" / "config.yaml"
    saved = yaml.safe_load(path.read_text())
    for key in ("embedding_dropout", "hidden_dropout", "word_dropout", "layer_norm", "transition_depth",
                "tie_target_embeddings", "tie_source_target_embeddings"):
        del saved["model"][key]
    path.write_text(yaml.safe_dump(saved))
    resumed = Trainer(dataclasses.replace(config, training=dataclasses.replace(config.training, max_updates=3)))
    assert resumed.progress.updates == 2
    assert resumed.train().updates == 3
    with pytest.raises(RerankError, match="another .model. config"):
        Trainer(dataclasses.replace(config, model=dataclasses.replace(config.model, word_dropout=0.1)))
