"""The study's steps that write one file each: every one calls the library function its ``rerank`` command
calls, so that the command line the study logs to ``commands.sh`` makes the same file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rerank.formats.files import atomic_output
from rerank.formats.nbest import write_nbest
from rerank.rescore.merge import merge_nbest

if TYPE_CHECKING:
    from rerank.study.config import MosesSystem
    from rerank.training.config import TrainConfig

logger = logging.getLogger(__name__)


def write_file(path: Path, text: str) -> None:
    """``text`` as the file ``path``, atomically: a step stopped half-way leaves no file that looks done."""
    with atomic_output(path) as out:
        out.write(text)


def rerank_once(scored: Path, weights: str | Path, source: str, output: Path) -> None:
    """``rerank apply``: the 1-best of ``scored`` under ``weights``; features without a weight count 0, and
    a moses.ini's weights of features the list does not print are left out."""
    from rerank.formats.files import count_lines
    from rerank.formats.weights import load_weights
    from rerank.rescore.rerank import known_weights, rerank_nbest

    values = load_weights(weights)
    origins = dict.fromkeys(values, str(weights))
    rerank_nbest(scored, values, output, num_sentences=count_lines(source), source_name=source,
                 weights_name=str(weights), missing=0.0,
                 known=lambda layout: known_weights(values, origins, layout.labels, str(scored)))


def train_model(config: TrainConfig, device: str = "cpu") -> None:
    from rerank.training.trainer import Trainer

    Trainer(config, device=device).train()


def merge_nbest_file(systems: Sequence[tuple[str, str | Path]], output: Path) -> None:
    write_nbest(merge_nbest(systems), output)


def forced_union_file(systems: Sequence[tuple[str, str]], ini: Path, source: str, moses: MosesSystem, threads: int,
                      output: Path) -> None:
    """``rerank merge-nbest --moses-ini``: the union with Moses' features on every line."""
    from rerank.formats.files import read_text
    from rerank.rescore.forced import ForcedDecoding
    from rerank.rescore.union import union_with_moses_features

    assert moses.decoder is not None
    settings = ForcedDecoding(moses.decoder, str(ini), threads=threads, filter_script=moses.filter_script)
    entries, report = union_with_moses_features(systems, 0, settings, read_text(source))
    write_nbest(entries, output)
    forced = report.forced
    logger.info("%s: %d lines, %d forced-decoded (%d unreachable) in %.0f s", output.name, report.lines,
                len(forced.derivations), forced.unreachable, forced.seconds)


def cut_nbest_file(nbest: Path, size: int, output: Path) -> None:
    from rerank.formats.nbest import read_nbest
    from rerank.rescore.cut import first_hypotheses

    write_nbest(first_hypotheses(read_nbest(nbest), size), output)


def oracle_file(nbest: Path, reference: str, tokenize: str, output: Path) -> None:
    """``rerank oracle --json``: the list's BLEU with its first hypotheses and with the oracle's, as JSON."""
    from rerank.study.evaluation import list_oracles, write_oracle_json

    write_oracle_json(list_oracles([str(nbest)], [reference], tokenize)[0], output)
