"""Model configuration: the two architectures and their attention options, with the papers' sizes as defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rerank.config import at_least, below, from_dict, load_yaml
from rerank.errors import RerankError

CONFIG = "config.yaml"  # in a model directory: the training config, whose model section is the ModelConfig
DEFAULT_LABELS = {"encdec": "RNN0", "rnnsearch": "RNNsearch0"}  # the n-best label of each architecture's ln p
RIGHT_TO_LEFT_LABEL = "R2L0"  # the n-best label of a right-to-left model's ln p

AttentionScore = Literal["additive", "dot", "general", "location"]
AttentionWindow = Literal["global", "local-m", "local-p"]


@dataclass(frozen=True)
class AttentionConfig:
    """How the decoder attends to the source annotations.

    ``score``: ``additive`` is Bahdanau et al.'s v_aᵀ tanh(W_a s + U_a h_j) (Luong's "concat");
    ``dot``, ``general`` and ``location`` are Luong et al. 2015, Eq. 8 and 9.
    ``window``: ``global`` attends to every source word; ``local-m`` and ``local-p`` to
    [p_t − D, p_t + D] (Luong et al. 2015, Sec. 3.2) with D = ``width``, local-p weighting the
    window by a Gaussian of σ = D/2 around its predicted p_t.
    """

    score: AttentionScore = "additive"
    window: AttentionWindow = "global"
    width: int = 10
    hidden_size: int = 1000  # of the additive score's tanh layer, and of local-p's position predictor
    max_source_length: int = 100  # the location score has one output per source position

    def __post_init__(self) -> None:
        at_least(self, 1, "width", "hidden_size", "max_source_length")


@dataclass(frozen=True)
class SubwordConfig:
    """Subword units inside the model (a sentencepiece model per language, trained on the training text when it
    is prepared): the model still reads and writes Moses tokens, each scored as the sum over its pieces."""

    kind: Literal["sentencepiece"] = "sentencepiece"
    type: Literal["bpe", "unigram"] = "bpe"
    vocab_size: int = 8000  # pieces per language, with 4 special tokens and 256 bytes (every text encodes)
    sample_sentences: int = 2_000_000  # sentences the pieces are learnt from (a seeded sample of longer text)

    def __post_init__(self) -> None:
        at_least(self, 300, "vocab_size")
        at_least(self, 1, "sample_sentences")


@dataclass(frozen=True)
class ModelConfig:
    """An RNN encoder-decoder (``encdec``, Cho et al. 2014) or RNNsearch (``rnnsearch``, Bahdanau et al. 2014).

    ``decoder`` chooses where attention sits in RNNsearch: ``bahdanau`` attends with the previous
    state s_{i-1} and feeds the context into the GRU and the deep output; ``luong`` runs the GRU
    first, attends with its new state h_t and predicts from h̃_t = tanh(W_c [c_t; h_t]), optionally
    feeding h̃_{t-1} back into the next step (``input_feeding``).

    ``reverse_target``: the model reads and writes target sentences right to left (a right-to-left
    model, as in Imamura & Sumita 2017): training reverses the targets, scoring reverses each
    hypothesis before forced decoding, and decoding reverses its output, so that users see
    left-to-right text everywhere. ``</s>`` still ends the (reversed) sentence.
    """

    architecture: Literal["encdec", "rnnsearch"] = "rnnsearch"
    embedding_size: int = 620
    embedding_rank: int | None = None  # low-rank embeddings, V x rank then rank x embedding_size (Cho: 100)
    hidden_size: int = 1000  # decoder GRU, and encoder GRU (per direction) unless encoder_hidden_size is set
    encoder_hidden_size: int | None = None
    maxout_size: int = 500  # maxout units of the deep output layer, after pooling
    maxout_pool: int = 2
    decoder: Literal["bahdanau", "luong"] = "bahdanau"
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    input_feeding: bool = False
    dropout: float = 0.0
    reverse_target: bool = False
    subwords: SubwordConfig | None = None  # none: words, with the data's frequency shortlists

    def __post_init__(self) -> None:
        if self.input_feeding and (self.architecture != "rnnsearch" or self.decoder != "luong"):
            raise ValueError("input_feeding needs architecture: rnnsearch with decoder: luong")
        at_least(self, 1, "embedding_size", "embedding_rank", "hidden_size", "encoder_hidden_size", "maxout_size",
                 "maxout_pool")
        at_least(self, 0, "dropout")
        below(self, 1, "dropout")
        if self.architecture == "rnnsearch" and self.attention.score == "dot" \
                and self.annotation_size != self.hidden_size:
            raise ValueError(f"the dot score compares decoder states ({self.hidden_size}) with annotations "
                             f"(2 x {self.encoder_size}): set encoder_hidden_size: {self.hidden_size // 2}")

    @property
    def encoder_size(self) -> int:
        return self.encoder_hidden_size or self.hidden_size

    @property
    def annotation_size(self) -> int:
        """Size of what the decoder attends to: h_j = [→h_j; ←h_j] for RNNsearch, c for the encoder-decoder."""
        return 2 * self.encoder_size if self.architecture == "rnnsearch" else self.hidden_size


def default_label(config: ModelConfig) -> str:
    """The n-best label of a model's ln p: ``R2L0`` for a right-to-left model, else its architecture's."""
    return RIGHT_TO_LEFT_LABEL if config.reverse_target else DEFAULT_LABELS[config.architecture]


def read_model_config(directory: str | os.PathLike[str]) -> ModelConfig:
    path = Path(directory) / CONFIG
    if not path.is_file():
        raise RerankError(f"{directory}: not a model directory (no {CONFIG})")
    data = load_yaml(path)
    if not isinstance(data, dict) or "model" not in data:
        raise RerankError(f"{path}: expected a 'model:' section")
    return from_dict(ModelConfig, data["model"], str(path), prefix="model")
