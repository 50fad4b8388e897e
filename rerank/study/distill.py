"""Sequence-level knowledge distillation (Kim & Rush 2016): a teacher, one model or an ensemble of them
(:mod:`rerank.models.ensemble`), translates the student's training sources by beam search, and the student is
trained on those translations, alone (``ensemble``) or beside the references (``ensemble+references``). With
right-to-left models (``r2l_model``), the teacher's beam is reranked by them as ``rerank translate --r2l-model``
reranks it (:mod:`rerank.search.right_to_left`) before its best ``nbest`` are kept.

The run's directory holds everything, so that a stopped run started again goes on where it stopped:

- ``distill.yaml``: the settings the translations are made with; a run with other settings is refused;
- ``chunks/NNNNN.nbest``: the teacher's best ``nbest`` translations of ``chunk_lines`` source lines each,
  as a Moses n-best list (its ids those of the whole source; ``Teacher0``, and ``R2L0`` where right-to-left
  models rerank), each written whole as it is done and never made again;
- ``train.src`` and ``train.trg``: the student's training corpus, line by line, prepared like any other
  (into ``student/data``, as ``rerank train`` prepares a corpus);
- ``student/``: the student's model directory (``rerank train``'s, which resumes exactly).

Each chunk is searched on its own, sorted and batched within itself, so that a resumed run's chunks are
those of a run never stopped, byte for byte.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from rerank.config import load_yaml
from rerank.errors import ConfigError, FormatError, RerankError
from rerank.formats.files import atomic_output, committed_together, display_name, make_output_dir, read_lines
from rerank.formats.nbest import read_nbest
from rerank.formats.tokens import Tokens
from rerank.models.vocab import UNK_ID
from rerank.training.config import TextPair, TrainConfig

if TYPE_CHECKING:  # torch's: imported where a teacher translates
    from rerank.models.checkpoint import LoadedModel
    from rerank.search.beam import SearchConfig
    from rerank.search.right_to_left import RightToLeft
    from rerank.training.trainer import Progress

logger = logging.getLogger(__name__)

Targets = Literal["ensemble", "ensemble+references"]
TARGETS: tuple[Targets, ...] = ("ensemble", "ensemble+references")
SETTINGS = "distill.yaml"
CHUNKS = "chunks"
STUDENT = "student"
TRAIN_SOURCE, TRAIN_TARGET = "train.src", "train.trg"
LABEL = "Teacher0"  # the teacher's ln p in the chunks' n-best lists
MIN_KNOWN_SOURCE = 0.5  # the share of the sources' words a teacher must know: less, and it is another language's


@dataclass(frozen=True)
class Distillation:
    """What the teacher translates and how, and what the student trains on."""

    teacher: tuple[str, ...]  # model directories: one model, or an ensemble
    search: SearchConfig  # beam, n-best size (the translations per source kept), length penalty
    targets: Targets = "ensemble"
    chunk_lines: int = 1000  # source lines translated, and written, together
    batch_size: int = 50  # sentences searched together (rerank.search.translate.BATCH_SIZE)
    r2l_model: tuple[str, ...] = ()  # right-to-left models that rerank the teacher's beam; none: its own ranking
    r2l_weight: float = 0.5  # their weight (rerank.search.right_to_left: combined_score, DEFAULT_WEIGHT)

    def __post_init__(self) -> None:
        from rerank.search.right_to_left import check_weight

        if self.targets not in TARGETS:
            raise ValueError(f"targets: expected one of {', '.join(TARGETS)}, got {self.targets!r}")
        if self.chunk_lines < 1 or self.batch_size < 1:
            raise ValueError("chunk_lines and batch_size: expected at least 1")
        check_weight(self.r2l_weight)

    def settings(self, source: str, lines: int) -> dict[str, Any]:
        """What ``distill.yaml`` records: all that the chunks' and the corpus' bytes depend on."""
        search = self.search
        return {"teacher": list(self.teacher), "source": source, "source_lines": lines, "targets": self.targets,
                "beam": search.beam_size, "nbest": search.nbest, "length_penalty": search.length_penalty.kind,
                "alpha": search.length_penalty.alpha, "max_ratio": search.max_ratio, "chunk_lines": self.chunk_lines,
                "batch_size": self.batch_size,
                **({"r2l_model": list(self.r2l_model), "r2l_weight": self.r2l_weight} if self.r2l_model else {})}

    def right_to_left(self, device: str = "cpu") -> RightToLeft | None:
        """The right-to-left models that rerank the teacher's beam, checked to read right to left (and the
        teacher's left to right) before any is loaded; none without ``r2l_model``."""
        from rerank.features.nmt import NeuralTranslationModel
        from rerank.search.right_to_left import RightToLeft, check_directions

        if not self.r2l_model:
            return None
        check_directions(self.teacher, self.r2l_model, "--teacher")
        config = NeuralTranslationModel.Config(model=self.r2l_model, device=device)
        return RightToLeft(NeuralTranslationModel(config), NeuralTranslationModel.label(config), self.r2l_weight)


def training_pairs(config: TrainConfig, targets: Targets) -> tuple[str, list[Tokens], list[str] | None]:
    """The student's training sources (their file, their words) and, for ``ensemble+references``, the reference
    lines; checked before any model is loaded: an empty source, or references of another length, are errors."""
    if config.data.train is None:
        raise ConfigError("data.train: distillation translates the training sources: give the student's config a "
                          "parallel corpus (data.train), not a phrase table or prepared data")
    source = config.data.train.source
    sentences: list[Tokens] = [line.split() for _, line in read_lines(source)]
    if not sentences:
        raise FormatError(display_name(source), 1, "the training sources, one sentence per line", got="an empty file")
    references = None
    if targets == "ensemble+references":
        references = [line for _, line in read_lines(config.data.train.target)]
        if len(references) != len(sentences):
            raise FormatError(display_name(config.data.train.target), min(len(references), len(sentences)) + 1,
                              f"as many lines as {display_name(source)} ({len(sentences)}): targets "
                              "ensemble+references pairs each source with its reference",
                              got=f"{len(references)} lines")
    return source, sentences, references


def check_teacher(teacher: LoadedModel, sentences: Sequence[Tokens], source: str) -> None:
    """Refuse a teacher that does not read the sources' language: one that knows under half of their words."""
    ids = [i for sentence in sentences for i in teacher.src_vocab.encode(sentence)]
    known = 1 - ids.count(UNK_ID) / len(ids) if ids else 1.0
    if known < MIN_KNOWN_SOURCE:
        raise RerankError(f"{teacher.directory}: its source vocabulary knows {known:.0%} of the words of "
                          f"{display_name(source)} (at least {MIN_KNOWN_SOURCE:.0%} expected): is it a model of the "
                          "student's language pair and direction?")


def check_settings(directory: Path, settings: dict[str, Any]) -> None:
    """Write ``distill.yaml``, or check that an earlier run's holds the same settings."""
    path = directory / SETTINGS
    if path.exists():
        earlier = load_yaml(path)
        changed = [key for key in settings if not isinstance(earlier, dict) or earlier.get(key) != settings[key]]
        if changed:
            raise RerankError(f"{path}: an earlier run translated with other settings ({', '.join(changed)}): give "
                              "the same ones to resume it, or another --output-dir")
        return
    with atomic_output(path) as out:
        out.write(yaml.safe_dump(settings, sort_keys=False))


def translate_chunks(teacher: LoadedModel, sentences: Sequence[Tokens], distillation: Distillation,
                     directory: Path, device: str = "cpu", right_to_left: RightToLeft | None = None) -> list[Path]:
    """The teacher's n-best list of every chunk of ``sentences``, made where it is missing (its beam reranked by
    ``right_to_left`` where given)."""
    from rerank.search.translate import TranslationOutputs, translate_file

    chunks = make_output_dir(directory / CHUNKS, "the chunks' directory")
    size = distillation.chunk_lines
    search, kept = distillation.search, None
    if right_to_left is not None:  # every hypothesis of the beam reranked, the best nbest kept
        search, kept = dataclasses.replace(search, nbest=search.beam_size), search.nbest
    paths = [chunks / f"{number:05d}.nbest" for number in range(math.ceil(len(sentences) / size))]
    for number, path in enumerate(paths):
        if path.exists():
            continue
        first = number * size
        chunk = sentences[first:first + size]
        translate_file(teacher, chunk, TranslationOutputs(path, nbest=True, nbest_size=kept), search, label=LABEL,
                       batch_size=distillation.batch_size, device=device, first_id=first, show_progress=False,
                       right_to_left=right_to_left)
        logger.info("translated chunk %d of %d (lines %d-%d)", number + 1, len(paths), first + 1,
                    first + len(chunk))
    return paths


def write_corpus(chunks: Sequence[Path], source_lines: Sequence[Tokens], references: Sequence[str] | None,
                 directory: Path) -> TextPair:
    """``train.src`` and ``train.trg``: each source with each of its translations, then with its reference;
    written once (written again, their new time would have the student's data prepared again)."""
    pair = TextPair(str(directory / TRAIN_SOURCE), str(directory / TRAIN_TARGET))
    if Path(pair.source).exists() and Path(pair.target).exists():
        return pair
    with committed_together(), atomic_output(pair.source) as sources, atomic_output(pair.target) as targets:
        for path in chunks:
            for entry in read_nbest(path):
                sources.write(" ".join(source_lines[entry.sentence_id]) + "\n")
                targets.write(entry.hypothesis + "\n")
        for source, reference in zip(source_lines, references or (), strict=False):
            sources.write(" ".join(source) + "\n")
            targets.write(reference + "\n")
    return pair


def student_config(config: TrainConfig, corpus: TextPair, directory: Path) -> TrainConfig:
    """The student's config: its own, trained on the distilled corpus into ``DIR/student``."""
    return dataclasses.replace(config, data=dataclasses.replace(config.data, train=corpus),
                               output_dir=str(directory / STUDENT))


def distill(config: TrainConfig, distillation: Distillation, directory: Path, device: str = "cpu") -> TrainConfig:
    """Translate the training sources of ``config`` with the teacher and write the student's corpus (see the
    module docstring); the student's config, ready to train."""
    from rerank.models.checkpoint import load_model
    from rerank.models.device import torch_device
    from rerank.models.ensemble import ensemble

    source, sentences, references = training_pairs(config, distillation.targets)
    right_to_left = distillation.right_to_left(device)
    teacher = ensemble([load_model(model, torch_device(device)) for model in distillation.teacher])
    check_teacher(teacher, sentences, source)
    make_output_dir(directory, "--output-dir")
    check_settings(directory, distillation.settings(source, len(sentences)))
    chunks = translate_chunks(teacher, sentences, distillation, directory, device, right_to_left)
    corpus = write_corpus(chunks, sentences, references, directory)
    return student_config(config, corpus, directory)


def train_student(config: TrainConfig, distillation: Distillation, directory: Path, device: str = "cpu") -> Progress:
    """``rerank distill``: the teacher's corpus (:func:`distill`), then the student trained on it, resumed where a
    run stopped; its progress at the end."""
    from rerank.training.trainer import Trainer

    return Trainer(distill(config, distillation, directory, device), device=device).train()
