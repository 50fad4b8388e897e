"""Model configuration: the two translation architectures and their attention options, with the papers' sizes as
defaults, and the CSLM's; the config class of a ``model`` section, chosen by its architecture."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_type_hints

from rerank.config import at_least, below, from_dict, load_yaml
from rerank.errors import ConfigError, RerankError, did_you_mean_path

CONFIG = "config.yaml"  # in a model directory: the training config, whose model section is the ModelConfig
WEIGHTS = "model.pt"  # in a model directory: the weights (see rerank.models.checkpoint)
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

    score: AttentionScore = "additive"  # additive (Bahdanau et al.), dot, general or location (Luong et al.)
    window: AttentionWindow = "global"  # global: every source word; local-m, local-p: a window of ±width words
    width: int = 10  # D of a local window [p_t − D, p_t + D], in source words
    hidden_size: int = 1000  # of the additive score's tanh layer, and of local-p's position predictor
    max_source_length: int = 100  # the location score has one output per source position

    def __post_init__(self) -> None:
        at_least(self, 1, "width", "hidden_size", "max_source_length")


@dataclass(frozen=True)
class SubwordConfig:
    """Subword units inside the model (a sentencepiece model per language, trained on the training text when it
    is prepared): the model still reads and writes Moses tokens, each scored as the sum over its pieces."""

    kind: Literal["sentencepiece"] = "sentencepiece"  # the library that learns and applies the pieces
    type: Literal["bpe", "unigram"] = "bpe"  # sentencepiece's model: BPE merges or a unigram language model
    vocab_size: int = 8000  # pieces per language, with 4 special tokens and 256 bytes (every text encodes)
    sample_sentences: int = 2_000_000  # sentences the pieces are learnt from (a seeded sample of longer text)
    joint: bool = False  # one model learnt from both languages' text, the same pieces and ids on both sides

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

    architecture: Literal["encdec", "rnnsearch"] = "rnnsearch"  # encdec (Cho et al.) or rnnsearch (attention)
    embedding_size: int = 620  # word embeddings, source and target
    embedding_rank: int | None = None  # low-rank embeddings, V x rank then rank x embedding_size (Cho: 100)
    hidden_size: int = 1000  # decoder GRU, and encoder GRU (per direction) unless encoder_hidden_size is set
    encoder_hidden_size: int | None = None  # encoder GRU, per direction; none: hidden_size
    maxout_size: int = 500  # maxout units of the deep output layer, after pooling
    maxout_pool: int = 2  # units pooled into each maxout unit
    decoder: Literal["bahdanau", "luong"] = "bahdanau"  # attention before the GRU step (bahdanau) or after (luong)
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    input_feeding: bool = False  # h̃ of a step fed into the next (rnnsearch with decoder: luong)
    dropout: float = 0.0  # dropout probability in training, on the embeddings and the output layer's input
    reverse_target: bool = False  # a right-to-left model: targets read and written reversed (R2L0)
    subwords: SubwordConfig | None = None  # none: words, with the data's frequency shortlists
    # The options of Sennrich & Zhang's (2019) recipe for small data; their defaults are 2014's models.
    embedding_dropout: float | None = None  # on the embeddings (none: ``dropout``)
    hidden_dropout: float | None = None  # on the output layer's input (maxout units or h̃; none: ``dropout``)
    word_dropout: float = 0.0  # whole tokens: each source and target token's embedding zeroed with this p
    layer_norm: bool = False  # layer normalisation of each gate's input and hidden projections (Ba et al. 2016)
    transition_depth: int = 1  # GRU transitions per time step (deep transition, Barone et al. 2017; Nematus)
    tie_target_embeddings: bool = False  # the output layer's weights are the target embeddings (Press & Wolf 2017)
    tie_source_target_embeddings: bool = False  # one embedding table for both languages (joint subwords)

    def __post_init__(self) -> None:
        if self.input_feeding and (self.architecture != "rnnsearch" or self.decoder != "luong"):
            raise ValueError("input_feeding needs architecture: rnnsearch with decoder: luong")
        at_least(self, 1, "embedding_size", "embedding_rank", "hidden_size", "encoder_hidden_size", "maxout_size",
                 "maxout_pool")
        at_least(self, 0, "dropout", "embedding_dropout", "hidden_dropout", "word_dropout")
        below(self, 1, "dropout", "embedding_dropout", "hidden_dropout", "word_dropout")
        at_least(self, 1, "transition_depth")
        self._check_recipe_options()
        if self.architecture == "rnnsearch" and self.attention.score == "dot" \
                and self.annotation_size != self.hidden_size:
            raise ValueError(f"the dot score compares decoder states ({self.hidden_size}) with annotations "
                             f"(2 x {self.encoder_size}): set encoder_hidden_size: {self.hidden_size // 2}")

    def _check_recipe_options(self) -> None:
        recipe = {"embedding_dropout": self.embedding_dropout is not None, "hidden_dropout": self.hidden_dropout
                  is not None, "word_dropout": self.word_dropout > 0, "layer_norm": self.layer_norm,
                  "transition_depth": self.transition_depth > 1, "tie_target_embeddings": self.tie_target_embeddings,
                  "tie_source_target_embeddings": self.tie_source_target_embeddings}
        used = [name for name, on in recipe.items() if on]
        if used and self.architecture != "rnnsearch":
            raise ValueError(f"{', '.join(used)}: only for architecture: rnnsearch")
        if (self.layer_norm or self.transition_depth > 1) and self.decoder == "luong" and not self.input_feeding:
            raise ValueError("layer_norm and transition_depth need the looped decoders: decoder: bahdanau, or "
                             "decoder: luong with input_feeding: true")
        if self.tie_target_embeddings or self.tie_source_target_embeddings:
            if self.embedding_rank is not None:
                raise ValueError("tied embeddings need full-rank embeddings (no embedding_rank)")
        if self.tie_target_embeddings and self.output_input_size != self.embedding_size:
            what = "hidden_size" if self.decoder == "luong" else "maxout_size"
            raise ValueError(f"tie_target_embeddings: the output layer reads {self.output_input_size} units "
                             f"({what}) and the embeddings have {self.embedding_size}: make them equal")
        if self.tie_source_target_embeddings and (self.subwords is None or not self.subwords.joint):
            raise ValueError("tie_source_target_embeddings needs one vocabulary for both languages: "
                             "model.subwords with joint: true")

    @property
    def output_input_size(self) -> int:
        """Units the output layer reads: the maxout units, or Luong's h̃."""
        return self.hidden_size if self.architecture == "rnnsearch" and self.decoder == "luong" else self.maxout_size

    @property
    def embedding_dropout_rate(self) -> float:
        return self.dropout if self.embedding_dropout is None else self.embedding_dropout

    @property
    def hidden_dropout_rate(self) -> float:
        return self.dropout if self.hidden_dropout is None else self.hidden_dropout

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


@dataclass(frozen=True)
class CSLMConfig:
    """A continuous-space language model (:mod:`rerank.models.cslm`): a feed-forward n-gram network."""

    architecture: Literal["cslm"] = "cslm"  # a feed-forward n-gram language model (Schwenk's CSLM)
    order: int = 7  # n: the network reads n − 1 words
    embedding_size: int = 128  # of each context word
    hidden_sizes: tuple[int, ...] = (1024, 256)  # rectified layers
    dropout: float = 0.0  # after each rectified layer, in training

    def __post_init__(self) -> None:
        at_least(self, 2, "order")
        at_least(self, 1, "embedding_size")
        at_least(self, 0, "dropout")
        below(self, 1, "dropout")
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            raise ValueError(f"hidden_sizes: expected a list of positive sizes, got {list(self.hidden_sizes)}")


AnyModelConfig = ModelConfig | CSLMConfig
MODEL_CONFIGS: tuple[type[AnyModelConfig], ...] = (ModelConfig, CSLMConfig)  # every kind of model, its config class
_Config = TypeVar("_Config", ModelConfig, CSLMConfig)


def architectures(kind: type[Any]) -> tuple[str, ...]:
    """The architectures a config class (one with an ``architecture`` field) accepts."""
    return get_args(get_type_hints(kind)["architecture"])


def model_config_type(section: object) -> type[AnyModelConfig]:
    """The config class of a ``model`` section, chosen by its ``architecture`` (by default and for a name no
    class accepts: :class:`ModelConfig`, whose reading then says which names it knows)."""
    name = section.get("architecture", "rnnsearch") if isinstance(section, dict) else None
    return next((kind for kind in MODEL_CONFIGS if name in architectures(kind)), ModelConfig)


def read_model_section(directory: str | os.PathLike[str], kind: type[_Config]) -> _Config:
    """The ``model`` section of ``directory/config.yaml``, checked, as a ``kind``."""
    path = Path(directory) / CONFIG
    if not os.path.exists(directory):
        raise RerankError(f"{directory}: no such directory{did_you_mean_path(directory)}")
    if not path.is_file():
        raise RerankError(f"{directory}: not a model directory (no {CONFIG})")
    data = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise RerankError(f"{path}: expected a 'model:' section")
    # a translation model's reading names the architectures it knows; another kind's is refused here
    if kind is not ModelConfig and model_config_type(data["model"]) is not kind:
        raise ConfigError(f"{path}: model.architecture is {data['model'].get('architecture')!r}, not "
                          f"{' or '.join(map(repr, architectures(kind)))}")
    return from_dict(kind, data["model"], str(path), prefix="model")


def read_model_config(directory: str | os.PathLike[str]) -> ModelConfig:
    return read_model_section(directory, ModelConfig)
