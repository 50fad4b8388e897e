"""The study's steps that write one file each: every one calls the library function its ``rerank`` command
calls, so that the command line the study logs to ``commands.sh`` makes the same file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rerank.formats.files import committed_together, count_lines, read_text
from rerank.formats.moses_ini import MosesIni
from rerank.formats.nbest import write_nbest
from rerank.formats.phrase_table import read_phrase_table
from rerank.formats.streams import peek
from rerank.formats.weights import ini_weights, known_weights, read_weights, save_weights
from rerank.rescore.forced import ForcedDecoding
from rerank.rescore.merge import merge_nbest
from rerank.rescore.rerank import rerank_nbest
from rerank.rescore.union import union_with_moses_features
from rerank.tune.tuning import Tuning, write_cv_report, write_moses_ini

if TYPE_CHECKING:
    from rerank.study.config import MosesSystem
    from rerank.training.config import TrainConfig
    from rerank.tune.config import TuneConfig

logger = logging.getLogger(__name__)


def rerank_once(scored: Path, weights: str | Path, source: str, output: Path) -> None:
    """``rerank apply``: the 1-best of ``scored`` under ``weights``; features without a weight count 0, and
    a moses.ini's weights of features the list does not print are left out."""
    read = read_weights(weights)
    values = read.weights
    origins = dict.fromkeys(values, read)
    rerank_nbest(scored, values, output, num_sentences=count_lines(source), source_name=source,
                 weights_name=str(weights), missing=0.0,
                 known=lambda layout: known_weights(values, origins, layout.labels, str(scored)))


def first_hypotheses_file(nbest: Path, label: str, source: str, output: Path) -> None:
    """``rerank apply --weight LABEL=0``: each sentence's first hypothesis, the decoder's best (its 1-best
    output, taken from its n-best list rather than from a second search)."""
    from rerank.formats.files import count_lines
    from rerank.rescore.rerank import rerank_nbest

    rerank_nbest(nbest, {label: (0.0,)}, output, num_sentences=count_lines(source), source_name=source,
                 weights_name="--weight", keep_first=True)


def train_model(config: TrainConfig, device: str = "cpu") -> None:
    from rerank.training.trainer import Trainer

    Trainer(config, device=device).train()


def merge_nbest_file(systems: Sequence[tuple[str, str | Path]], output: Path) -> None:
    write_nbest(merge_nbest(systems), output)


def forced_union_file(systems: Sequence[tuple[str, str]], ini: Path, source: str, moses: MosesSystem,
                      output: Path) -> None:
    """``rerank merge-nbest --moses-ini``: the union with Moses' features on every line."""
    assert moses.decoder is not None
    settings = ForcedDecoding(moses.decoder, str(ini), threads=moses.threads, filter_script=moses.filter_script)
    entries, report = union_with_moses_features(systems, 0, settings, read_text(source))
    write_nbest(entries, output)
    forced = report.forced
    logger.info("%s: %d lines, %d forced-decoded (%d unreachable) in %.0f s", output.name, report.lines,
                len(forced.derivations), forced.unreachable, forced.seconds)


def oracle_file(nbest: Path, reference: str, tokenize: str, output: Path) -> None:
    """``rerank oracle --json``: the list's BLEU with its first hypotheses and with the oracle's, as JSON."""
    from rerank.evaluation.metrics import list_oracles, write_oracle_json

    write_oracle_json(list_oracles([str(nbest)], [reference], tokenize)[0], output)


def score_table_file(table: str, output: Path, models: Sequence[Path], device: str, ini: Path, output_ini: Path,
                     weight: float | str, channel: bool = False, per_word: bool = False) -> None:
    """``rerank score-table --model M... --moses-ini [--channel] [--per-word] [--weight W|auto]``: the table with
    the model's score (several models': their ensemble's) appended, and its moses.ini."""
    from rerank.models.device import torch_device
    from rerank.scoring.pairs import EnsembleScorer
    from rerank.scoring.table import Column, score_phrase_table, starting_weight, table_moses_ini

    with committed_together():
        first, entries = peek(read_phrase_table(table))
        scores = len(first.scores) if first is not None else None
        scored_ini = table_moses_ini(ini, output_ini, "TranslationModel0", scores, output,
                                     0.0 if weight == "auto" else float(weight))
        scorer = EnsembleScorer.load_all(models, torch_device(device))
        spread = score_phrase_table(entries, scorer, table=table, output=output, show_progress=False,
                                    column=Column(channel=channel, per_word=per_word))
        if weight == "auto":
            scored_ini = table_moses_ini(ini, output_ini, "TranslationModel0", scores, output,
                                         starting_weight(ini, "TranslationModel0", spread))
        scored_ini.write(output_ini)


def tune_on_nbest(config: TuneConfig, reference: str, init: str | Path, features: Sequence[str] | None,
                  nbest: Path, weights: Path, cv_output: Path | None = None) -> None:
    """``rerank tune --nbest``: the weights of ``features`` (all, for None) tuned on a scored n-best list; with
    ``config.cv.folds``, the cross-validation's figures to ``cv_output`` (``--cv-output``)."""
    result = Tuning([reference], config, init=init).on_nbest([nbest], features)
    with committed_together():
        save_weights(result.weights, weights)
        if cv_output is not None:
            write_cv_report(result, cv_output)


def tune_with_decoder(config: TuneConfig, reference: str, ini: Path, decoder: str, source: str,
                      weights: Path, output_ini: Path) -> None:
    """``rerank tune --decoder --moses-ini``: Moses in the loop from ``ini``'s weights; the tuned weights as YAML
    and in a copy of ``ini``."""
    moses = MosesIni.read(ini)  # read once: the starting weights and the lines of the copy
    result = Tuning([reference], config, init=ini_weights(moses)).with_decoder(decoder, source,
                                                                                tuning_work_dir(weights))
    with committed_together():
        save_weights(result.weights, weights)
        write_moses_ini(moses, result.weights, output_ini)


def tuning_work_dir(weights: Path) -> Path:
    """Where ``rerank tune --decoder -o WEIGHTS`` keeps its iterations: WEIGHTS with the suffix .work."""
    return weights.with_suffix(".work")
