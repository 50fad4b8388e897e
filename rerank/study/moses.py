"""Moses in the study: the moses.ini it decodes with (placeholders filled in, the model filtered to dev and
test), a neural model's phrase-table column (``rerank score-table``), and Moses' 1-best and n-best
decoding, each logged to commands.sh as the Moses command line it runs."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from rerank.formats.moses_ini import TRAIN_MODEL_WEIGHT, MosesIni
from rerank.study.config import ExperimentConfig
from rerank.study.runner import StepRunner, write_file
from rerank.study.steps import score_table_file


def placeholder_ini(config: ExperimentConfig, steps: StepRunner) -> Path:
    """The moses.ini for Moses to decode with: ``moses.ini`` with each table or LM path that names no file
    replaced by ``moses.phrase_table`` (a phrase dictionary's) or ``moses.language_model`` (KENLM's), as for a
    shipped system whose moses.ini has placeholders for its directories."""
    moses = config.moses
    ini = MosesIni.read(moses.ini)
    for feature in ini.features():
        path = feature.args.get("path")
        if path is None or os.path.exists(path) or glob.glob(glob.escape(path) + ".*"):
            continue
        if feature.kind.startswith("PhraseDictionary") and moses.phrase_table:
            ini = ini.with_table_path(feature.name, str(Path(moses.phrase_table).resolve()))
        elif feature.kind == "KENLM":
            ini = ini.with_table_path(feature.name, str(Path(moses.language_model).resolve()))
    output = steps.out / "moses.decode.ini"
    ini.write(output)
    return output


def decoding_ini(config: ExperimentConfig, steps: StepRunner) -> Path:
    """:func:`placeholder_ini`, filtered to the sources of dev and test by ``moses.filter_script`` where the config
    names it (``filtered/moses.ini``), as Moses users do: the same translations, loaded in seconds."""
    ini = placeholder_ini(config, steps)
    if config.moses.filter_script is None:
        return ini
    sources = steps.out / "filter-input.txt"
    text = "".join(Path(split.source).read_text(encoding="utf-8") for split in (config.dev, config.test))
    if not sources.exists() or sources.read_text(encoding="utf-8") != text:
        write_file(sources, text)
    filtered = steps.out / "filtered"
    if not steps.done([filtered / "moses.ini"]) and filtered.exists():
        shutil.rmtree(filtered)  # a filtering that stopped half-way: the script refuses an existing directory
    steps.program([Path(config.moses.filter_script).resolve(), filtered.resolve(), ini.resolve(), sources.resolve()],
                  [filtered / "moses.ini"], log=steps.out / "filter.log", timing="filter the model",
                  makes_directory=True)
    return filtered / "moses.ini"


def phrase_table_of(ini: Path) -> str:
    """The path of the first phrase table of a moses.ini."""
    for feature in MosesIni.read(ini).features():
        if feature.kind.startswith("PhraseDictionary") and "path" in feature.args:
            return feature.args["path"]
    raise ValueError(f"{ini}: no phrase table with a path")


def add_column(config: ExperimentConfig, steps: StepRunner, models: Sequence[Path], ini: Path, table: Path,
               output_ini: Path, *, channel: bool = False, per_word: bool = False,
               weight: float | str = TRAIN_MODEL_WEIGHT) -> None:
    """``rerank score-table``: ``ini``'s phrase table with the p(target | source) of ``models`` (one model's, or
    their ensemble's; p(source | target) with ``channel``, per word with ``per_word``) as one more column in
    ``table``, and ``output_ini`` that reads it, the column's starting weight ``weight`` (a number, or auto:
    score-table --weight auto)."""
    phrase_table = phrase_table_of(ini)
    device = [] if config.device == "cpu" else ["--device", config.device]
    form = [*(["--channel"] if channel else []), *(["--per-word"] if per_word else [])]
    start = [] if weight == TRAIN_MODEL_WEIGHT else ["--weight", weight]
    steps.rerank(["score-table", phrase_table, "-o", table, "--model", *models, *form, "--moses-ini", ini,
                  "--moses-ini-out", output_ini, *start, *device], [table, output_ini], score_table_file,
                 phrase_table, table, tuple(models), config.device, ini, output_ini, weight, channel, per_word,
                 timing=f"score-table {'+'.join(model.name for model in models)}{' '.join(['', *form])}")


def decode(config: ExperimentConfig, steps: StepRunner, ini: Path, source: str, output: Path,
           nbest: tuple[Path, int] | None = None, *, timing: str | None = None) -> None:
    """Moses' 1-best translations of ``source`` with ``ini`` to ``output``, and with ``nbest`` (a path and a
    size) its n-best list (distinct) too."""
    moses = config.moses
    assert moses.decoder is not None
    argv: list[object] = [moses.decoder, "-f", ini.resolve(), "-threads", moses.threads]
    outputs = [output]
    if nbest is not None:
        argv += ["-n-best-list", nbest[0].resolve(), nbest[1], "distinct"]
        argv += ["-n-best-factor", moses.nbest_factor] if moses.nbest_factor else []
        outputs.append(nbest[0])
    steps.program([*argv, "-input-file", Path(source).resolve()], outputs, stdout=output,
                  log=output.with_name(output.name + ".log"), timing=timing)
