"""A trained model on disk: a directory with the resolved config, both vocabularies and the weights.

::

    model_dir/
      config.yaml       the resolved training config (model, data, training)
      vocab.src.txt     source vocabulary, one token per line
      vocab.trg.txt     target vocabulary
      model.pt          the best weights (a state dict)
      checkpoint.pt     the latest training state, to resume: weights, optimiser, progress, RNG

Every ``.pt`` file is read with ``torch.load(weights_only=True)``, which refuses anything but
tensors and plain containers, and the weights must match the config's architecture exactly.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rerank.config import dump_config
from rerank.errors import RerankError, did_you_mean_path
from rerank.formats.files import atomic_output, save_torch
from rerank.models.architectures import build_model
from rerank.models.config import CONFIG, ModelConfig, read_model_config
from rerank.models.config import WEIGHTS as WEIGHTS
from rerank.models.seq2seq import Seq2Seq
from rerank.models.subwords import SRC_SUBWORDS, TRG_SUBWORDS, SubwordVocabulary
from rerank.models.vocab import SRC_VOCAB as SRC_VOCAB
from rerank.models.vocab import TRG_VOCAB as TRG_VOCAB
from rerank.models.vocab import Vocabulary

CHECKPOINT = "checkpoint.pt"


def save_config(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write a config (a model directory's ``config.yaml``) atomically: a crash leaves the old one or none."""
    with atomic_output(path) as f:
        f.write(dump_config(obj))


@dataclass
class LoadedModel:
    model: Seq2Seq
    src_vocab: Vocabulary
    trg_vocab: Vocabulary
    config: ModelConfig
    directory: Path

    @property
    def architecture(self) -> str:
        return self.config.architecture


def save_state(state: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """``torch.save`` to a temporary file renamed over ``path``: a kill never leaves half a checkpoint, a full
    disk is one error naming ``path``."""
    save_torch(state, path)


def float16_weights(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``weights`` with every floating-point tensor cast to float16, tensors that share memory (tied embeddings)
    cast once, so that ``torch.save`` stores them once."""
    cast: dict[tuple[object, ...], torch.Tensor] = {}
    half: dict[str, torch.Tensor] = {}
    for name, tensor in weights.items():
        if not tensor.is_floating_point():
            half[name] = tensor
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride())
        if key not in cast:
            cast[key] = tensor.to(torch.float16)
        half[name] = cast[key]
    return half


def load_state(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> dict[str, Any]:
    """A ``.pt`` file read safely: only tensors and plain containers are accepted."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except FileNotFoundError:
        raise RerankError(f"{path}: no such file{did_you_mean_path(path)}") from None
    except OSError as e:
        raise RerankError(f"{path}: cannot read: {e.strerror}") from None
    if not (head == b"PK\x03\x04" or head[:1] == b"\x80"):  # torch.save's zip archive, or its older pickle
        raise RerankError(f"{path}: refused: not a torch archive (a file written by torch.save)")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise RerankError(f"{path}: no such file") from None
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, AttributeError, TypeError):
        raise RerankError(f"{path}: refused: not a plain weights file (tensors in dictionaries and lists, as "
                          "rerank train saves them), or a cut or damaged one") from None
    except OSError as e:  # a truncated or corrupt archive, a directory, no permission
        raise RerankError(f"{path}: refused: cannot read it as a weights file"
                          + (f" ({e.strerror})" if e.strerror else "")) from None
    if not isinstance(state, dict):
        raise RerankError(f"{path}: refused: expected a dictionary of tensors, got {type(state).__name__}")
    return state


def load_model_weights(model: Seq2Seq, weights: Any, path: str | os.PathLike[str],
                       built_from: str = f"the model in {CONFIG}") -> None:
    """Copy ``weights`` into ``model`` (built from ``built_from``, for the message); every name and shape must
    match."""
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise RerankError(f"{path}: refused: the weights are not a dictionary of tensors")
    expected = model.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    wrong = sorted(k for k in set(expected) & set(weights) if expected[k].shape != weights[k].shape)
    if missing or unexpected or wrong:
        details = "; ".join(f"{what}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
                            for what, names in (("missing", missing), ("unexpected", unexpected),
                                                ("wrong shape", wrong)) if names)
        raise RerankError(f"{path}: the weights do not fit {built_from} ({details})")
    model.load_state_dict(weights)


def load_model(directory: str | os.PathLike[str], device: str | torch.device = "cpu",
               weights_file: str = WEIGHTS, precision: str = "fp32") -> LoadedModel:
    """The model in ``directory`` (see the module docstring), in evaluation mode, its matrix multiplies in
    ``precision`` (fp32, or int8 on the CPU: :meth:`Seq2Seq.set_precision`)."""
    directory = Path(directory)
    config = read_model_config(directory)
    src_vocab, trg_vocab = load_vocabularies(directory, config)
    model = build_model(config, len(src_vocab), len(trg_vocab))
    path = directory / weights_file
    load_model_weights(model, load_state(path, device).get("model"), path)
    model.to(device).eval()
    try:
        model.set_precision(precision)
    except ValueError as e:
        raise RerankError(f"{directory}: {e}") from None
    return LoadedModel(model, src_vocab, trg_vocab, config, directory)


def load_vocabularies(directory: Path, config: ModelConfig) -> tuple[Vocabulary, Vocabulary]:
    """A model directory's vocabularies: word shortlists, or with ``model.subwords`` its subword models, each
    checked against the vocabulary file the weights were trained with."""
    from rerank.models.subwords import SRC_SUBWORDS, TRG_SUBWORDS, WORD_START, SubwordVocabulary

    if config.subwords is None:
        vocabularies = Vocabulary.load(directory / SRC_VOCAB), Vocabulary.load(directory / TRG_VOCAB)
        pieces = [name for name in (SRC_SUBWORDS, TRG_SUBWORDS) if (directory / name).exists()]
        pieces += [name for vocab, name in zip(vocabularies, (SRC_VOCAB, TRG_VOCAB), strict=True)
                   if 2 * sum(token.startswith(WORD_START) for token in vocab.tokens) > len(vocab.tokens)]
        if pieces:
            raise RerankError(f"{directory / CONFIG}: model.subwords: expected the subword settings of the model "
                              f"({', '.join(pieces)} hold subword pieces), got none: it would read words "
                              "as pieces and write pieces as words")
        return vocabularies

    return (SubwordVocabulary.load_matching(directory / SRC_VOCAB, directory / SRC_SUBWORDS),
            SubwordVocabulary.load_matching(directory / TRG_VOCAB, directory / TRG_SUBWORDS))


def save_model(directory: str | os.PathLike[str], model: Seq2Seq, src_vocab: Vocabulary, trg_vocab: Vocabulary) -> Path:
    """Write ``directory`` as :func:`load_model` reads it: the model's config, both vocabularies, its weights."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_config({"model": model.config}, directory / CONFIG)
    src_vocab.save(directory / SRC_VOCAB)
    trg_vocab.save(directory / TRG_VOCAB)
    if model.config.subwords is not None:
        for vocab, name in ((src_vocab, SRC_SUBWORDS), (trg_vocab, TRG_SUBWORDS)):
            if not isinstance(vocab, SubwordVocabulary):
                raise ValueError("a model with subwords is saved with its subword vocabularies")
            vocab.save_model(directory / name)
    save_state({"model": model.state_dict()}, directory / WEIGHTS)
    return directory
