"""A CTranslate2 translation model's ln p(hypothesis | source): kind ``ctranslate2``
(the ``ctranslate2`` extra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import RerankError, shorten
from rerank.features.pretrained import PretrainedConfig, PretrainedModel, check_installed, model_directory

# precision: fp32 and int8 (rerank's names, as nmt's), or any of CTranslate2's compute types
PRECISIONS = {"fp32": "float32", "int8": "int8"}
COMPUTE_TYPES = ("default", "auto", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16")


class CTranslate2Model(PretrainedModel):
    """ln p(hypothesis | source) under a model converted for CTranslate2 (``Translator.score_batch``).

    ``model`` is the directory ``ct2-transformers-converter`` writes (model.bin); ``tokenizer`` the Hugging
    Face model directory it was converted from, whose tokenizer makes its tokens (default: ``model``
    itself, where the conversion copied the tokenizer's files into it with ``--copy_files``). The value
    is the ``hf`` kind's on the same model, to about 1e-3 in fp32 (see :mod:`rerank.features.hf`): the
    same tokens and the same end of sentence are counted. ``precision: int8`` runs CTranslate2's int8
    matrix multiplies (``compute_type`` int8 on the CPU, int8_float16 on a GPU); any of CTranslate2's
    compute types may be given by its name. ``threads`` are CTranslate2's intra-op threads
    (``--threads`` sets them; default: CTranslate2's). The label is ``CT0`` (``CTChan0`` for a channel
    model) unless ``name`` says otherwise.
    """

    KIND = "ctranslate2"
    LABEL = "CT0"
    CHANNEL_LABEL = "CTChan0"

    @dataclass(frozen=True)
    class Config(PretrainedConfig):
        tokenizer: str | None = None  # the Hugging Face directory with the tokenizer; none: model's own
        precision: str = "fp32"  # fp32, int8, or a CTranslate2 compute_type (int8_float16, float16, ...)
        threads: int | None = None  # CTranslate2's intra-op threads; none: its default

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.precision not in PRECISIONS and self.precision not in COMPUTE_TYPES:
                raise ValueError(f"precision: expected fp32, int8 or one of CTranslate2's compute types "
                                 f"({', '.join(COMPUTE_TYPES)}), got {self.precision!r}")
            if self.threads is not None and self.threads < 1:
                raise ValueError(f"threads: expected at least 1, got {self.threads}")
            check_installed(("ctranslate2", "transformers", "sacremoses"), "ctranslate2")

    def __init__(self, config: Config):
        import ctranslate2

        where = f"{self.KIND} feature ({config.model})"
        model_directory(config.model, "model.bin", "a CTranslate2 model directory", where)
        super().__init__(config, config.tokenizer or config.model)
        device, _, index = config.device.partition(":")
        compute_type = PRECISIONS.get(config.precision, config.precision)
        if compute_type == "int8" and device == "cuda":
            compute_type = "int8_float16"
        supported = ctranslate2.get_supported_compute_types(device) if device == "cpu" or \
            ctranslate2.get_cuda_device_count() > 0 else set()
        if not supported:
            raise RerankError(f"{where}: device {config.device!r} asked for, but CTranslate2 sees no CUDA GPU here")
        if compute_type not in (*supported, "default", "auto"):
            raise RerankError(f"{where}: precision {config.precision} ({compute_type}) is not offered on "
                              f"{device} here; CTranslate2 offers {', '.join(sorted(supported))}")
        try:
            self.translator = ctranslate2.Translator(config.model, device=device, device_index=int(index or 0),
                                                     compute_type=compute_type, intra_threads=config.threads or 0)
        except (RuntimeError, ValueError) as e:
            raise RerankError(f"{where}: CTranslate2 cannot load {config.model} ({shorten(str(e), 120)})") from None
        self.eos = self.tokenizer.eos_token_id

    def batch_log_probs(self, sources: list[list[int]], targets: list[list[int]],
                        counted: list[list[bool]]) -> np.ndarray:
        # CTranslate2 starts the decoder itself and appends the end of sentence: the target is given up to it
        ends = [_end(target, self.eos) for target in targets]
        convert = self.tokenizer.convert_ids_to_tokens
        try:
            results: list[Any] = self.translator.score_batch(
                [convert(source) for source in sources], [convert(target[:end]) for target, end in zip(
                    targets, ends, strict=True)], max_input_length=0)
        except (RuntimeError, ValueError) as e:
            raise RerankError(f"{self.where}: CTranslate2 cannot score a batch ({shorten(str(e), 120)})") from None
        total = np.zeros(len(targets))
        for row, (result, end, counts) in enumerate(zip(results, ends, counted, strict=True)):
            log_probs = np.asarray(result.log_probs, dtype=np.float64)  # the target's tokens, then </s>
            total[row] = log_probs[np.asarray([*counts[:end], True])].sum()
        return total


def _end(target: list[int], eos: int) -> int:
    """Where the target's end of sentence stands (its length where it has none)."""
    return len(target) - 1 - target[::-1].index(eos) if eos in target else len(target)
