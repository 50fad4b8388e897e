"""A Hugging Face translation model's ln p(hypothesis | source): kind ``hf`` (the ``hf`` extra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import RerankError, shorten
from rerank.features.pretrained import PretrainedConfig, PretrainedModel, check_installed, model_directory, padded


class HuggingFaceModel(PretrainedModel):
    """ln p(hypothesis | source) under a Hugging Face sequence-to-sequence model and its tokenizer.

    ``model`` is a directory that ``AutoModelForSeq2SeqLM`` and ``AutoTokenizer`` load (OPUS-MT's
    Marian models, NLLB, M2M-100, mBART, T5, a model of one's own saved with ``save_pretrained``);
    nothing is downloaded. Moses' text is detokenized first (see :mod:`rerank.features.pretrained`).
    ln p is the sum of the log-softmax of the hypothesis' tokens under teacher forcing, the end of
    sentence included: the model's own loss times the number of tokens. The hypotheses of a batch that share
    a source share its encoding. With ``channel``, the model
    translates the other way and the feature is ln p(source | hypothesis); with ``per_word``, a second
    value divides the sum by Moses' tokens plus one, as ``nmt``'s does. The label is ``HF0``
    (``HFChan0`` for a channel model) unless ``name`` says otherwise. ``--threads`` sets torch's.
    """

    KIND = "hf"
    LABEL = "HF0"
    CHANNEL_LABEL = "HFChan0"

    @dataclass(frozen=True)
    class Config(PretrainedConfig):
        def __post_init__(self) -> None:
            super().__post_init__()
            check_installed(("transformers", "sacremoses"), "hf")

    def __init__(self, config: Config):
        from transformers import AutoModelForSeq2SeqLM

        from rerank.models.device import torch_device

        where = f"{self.KIND} feature ({config.model})"
        model_directory(config.model, "config.json", "a Hugging Face model directory", where)
        super().__init__(config, config.model)
        self.device = torch_device(config.device)
        try:
            model = AutoModelForSeq2SeqLM.from_pretrained(config.model, local_files_only=True)
        except Exception as e:  # transformers raises OSError, ValueError, KeyError, ... for what it cannot load
            raise RerankError(f"{where}: {config.model} holds no sequence-to-sequence model that loads "
                              f"({type(e).__name__}: {shorten(str(e), 120)})") from None
        start = model.config.decoder_start_token_id
        if not hasattr(model, "prepare_decoder_input_ids_from_labels") and start is None:
            raise RerankError(f"{where}: {type(model).__name__} says neither how its decoder reads a target "
                              "(prepare_decoder_input_ids_from_labels) nor its decoder_start_token_id")
        self.model = model.to(self.device).eval()
        pad = self.tokenizer.pad_token_id
        self.pad = int(pad if pad is not None else model.config.pad_token_id or 0)
        self.start = start

    def batch_log_probs(self, sources: list[list[int]], targets: list[list[int]],
                        counted: list[list[bool]]) -> np.ndarray:
        import torch

        distinct: dict[tuple[int, ...], int] = {}  # the hypotheses of a sentence share its source: encoded once
        row_of = torch.tensor([distinct.setdefault(tuple(source), len(distinct)) for source in sources])
        with torch.inference_mode():
            source = torch.from_numpy(padded(list(distinct), self.pad)).to(self.device)
            mask = torch.from_numpy(padded([[1] * len(s) for s in distinct], 0)).to(self.device)
            encoded = self.model.get_encoder()(input_ids=source, attention_mask=mask).last_hidden_state
            row_of = row_of.to(self.device)
            labels = torch.from_numpy(padded(targets, self.pad)).to(self.device)
            counts = torch.from_numpy(padded(counted, False, bool)).to(self.device)
            decoder_input_ids = self.decoder_input_ids(labels)
            logits = self.model(encoder_outputs=(encoded.index_select(0, row_of),),
                                attention_mask=mask.index_select(0, row_of),
                                decoder_input_ids=decoder_input_ids).logits
            log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
            return (log_probs.double() * counts).sum(dim=1).cpu().numpy()

    def decoder_input_ids(self, labels: Any) -> Any:
        """What the decoder reads to predict ``labels``, as the model's loss has it: the model's own shift, or
        (M2M-100, NLLB) the labels shifted right behind the decoder's start token."""
        if hasattr(self.model, "prepare_decoder_input_ids_from_labels"):
            return self.model.prepare_decoder_input_ids_from_labels(labels=labels)
        shifted = labels.new_full(labels.shape, self.pad)
        shifted[:, 1:] = labels[:, :-1]
        shifted[:, 0] = self.start
        return shifted
