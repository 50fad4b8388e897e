"""The phrase-table route (``decoder_tuning``): Moses re-tuned on dev with Moses in the loop (``rerank tune
--decoder``), as it is and with each model's score as one more phrase-table column (Cho et al. 2014, Table 1);
dev and test decoded by Moses with each run's tuned moses.ini; ``mert-moses.pl`` from the same weights; and a
system's own n-best lists rescored with every feature and re-tuned."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from rerank.config import load_yaml, with_overrides
from rerank.formats.moses_ini import MosesIni
from rerank.study.config import DecoderTuning, ExperimentConfig, system_columns
from rerank.study.lists import SPLITS, Scoring
from rerank.study.moses import add_column, decode
from rerank.study.report import RESCORED, RouteResults, Run, bleu
from rerank.study.row_tuning import apply
from rerank.study.runner import StepRunner
from rerank.study.steps import tune_on_nbest, tune_with_decoder, tuning_work_dir
from rerank.tune.config import TuneConfig


def moses_decoder(config: ExperimentConfig, ini: Path) -> str:
    """The decoder command of ``rerank tune --decoder`` for Moses, its values quoted."""
    assert config.moses.decoder is not None
    return (f"{shlex.quote(str(Path(config.moses.decoder).resolve()))} -f {shlex.quote(str(ini.resolve()))} "
            f"-threads {config.moses.threads} -n-best-list {{nbest}} {{nbest_size}} distinct "
            f"-weight-overwrite {{weights_overwrite}} -input-file {{source}}")


def run_route(config: ExperimentConfig, steps: StepRunner, ini: Path, models: dict[str, Path], score: Scoring,
              features: Path) -> RouteResults:
    """Every tuning run of ``decoder_tuning`` from ``ini`` (Moses' moses.ini, filtered), and BLEU of its outputs."""
    c, route = config, config.decoder_tuning
    assert route is not None
    out = steps.out / "decoder-tuning"
    results = RouteResults()
    out.mkdir(exist_ok=True)
    for split in SPLITS:  # Moses with its own weights: the starting point of every run
        decode(c, steps, ini, c.split(split).source, out / f"moses.ini.{split}.1best", timing=f"decode {split}")
    dev, test = (bleu(c, out / f"moses.ini.{split}.1best", split) for split in SPLITS)
    results.runs["moses.ini"] = [Run(dev, test, str(out / "moses.ini.test.1best"))]
    for system in route.systems:
        start = ini
        columns = system_columns(system)
        for number, (model, per_word) in enumerate(columns, 1):  # each column added to the table before it
            before, start = start, out / system / ("moses.ini" if number == len(columns) else f"moses.{number}.ini")
            start.parent.mkdir(parents=True, exist_ok=True)
            table = out / system / ("phrase-table.gz" if number == len(columns) else f"phrase-table.{number}.gz")
            add_column(c, steps, column_models(c, models, model), before, table, start, channel=model == "channel",
                       per_word=per_word, weight=route.column_weight)
        activate = new_columns(ini, start) if route.activate == "columns" and columns else []
        for seed in route.seeds:
            weights = out / system / f"seed{seed}.yaml"
            tuned_ini = weights.with_suffix(".moses.ini")
            weights.parent.mkdir(parents=True, exist_ok=True)
            decoder = moses_decoder(c, start)
            # the overrides of `rerank tune --seed --restarts --nbest-size --iterations --tokenize`
            tune_config = with_overrides(TuneConfig(), {
                "seed": seed, "mert.restarts": route.restarts, "loop.nbest_size": route.nbest_size,
                "loop.max_iterations": route.iterations, "bleu.tokenize": c.tokenize, "activate": activate})
            steps.rerank(["tune", "--source", c.dev.source, "-r", c.dev.reference, "--moses-ini", start, "-o", weights,
                          "--decoder", decoder, "--seed", seed, "--restarts", route.restarts, "--nbest-size",
                          route.nbest_size, "--iterations", route.iterations, "--tokenize", c.tokenize,
                          *(["--activate", ",".join(activate)] if activate else [])],
                         [weights, tuned_ini], tune_with_decoder, tune_config, c.dev.reference, start, decoder,
                         c.dev.source, weights, tuned_ini, timing=f"tune {system} seed {seed}")
            rescore = route.rescore == system
            for split in SPLITS:
                nbest = (out / system / f"seed{seed}.{split}.{route.nbest_size}best", route.nbest_size) \
                    if rescore else None
                decode(c, steps, tuned_ini, c.split(split).source, out / system / f"seed{seed}.{split}.1best",
                       nbest, timing=f"decode {split} {system} seed {seed}")
            iterations = sorted(tuning_work_dir(weights).glob("run*.tuned.yaml"),
                                key=lambda p: int(p.name[3:].split(".")[0]))
            records = [load_yaml(p) for p in iterations]
            dev, test = (bleu(c, out / system / f"seed{seed}.{split}.1best", split) for split in SPLITS)
            results.runs.setdefault(system, []).append(Run(
                dev, test, str(out / system / f"seed{seed}.test.1best"),
                tuple(float(r["decoder_bleu"]) for r in records), tuple(float(r["tuned_bleu"]) for r in records)))
            if rescore:
                results.runs.setdefault(f"{system}{RESCORED}", []).append(
                    rescore_run(c, steps, score, features, out / system, seed, weights, route))
    if route.mert_moses:
        results.runs["mert-moses.pl"] = [mert_moses(c, steps, ini, out / "mert-moses", route)]
    results.seconds = {key: value.wall_s for key, value in steps.timings.items()
                       if key.startswith(("tune ", "mert-moses"))}
    return results


def column_models(config: ExperimentConfig, models: dict[str, Path], model: str) -> list[Path]:
    """The models of one phrase-table column: the study's model of that name, for ``ensemble`` rnnsearch and its
    ensemble_seeds, for ``student`` distill's student."""
    if model == "student":
        return [models["distilled"]]
    if model == "ensemble":
        return [models["rnnsearch"], *(models[f"rnnsearch-seed{seed}"] for seed in config.ensemble_seeds)]
    return [models[model]]


def new_columns(ini: Path, scored: Path) -> list[str]:
    """The weight names (``TranslationModel0_4``) of the phrase-table scores that ``scored`` has beyond ``ini``."""
    before, after = (MosesIni.read(path).weights() for path in (ini, scored))
    return [f"{name}_{index}" for name, values in after.items()
            for index in range(len(before.get(name, ())), len(values))]


def rescore_run(config: ExperimentConfig, steps: StepRunner, score: Scoring, features: Path, directory: Path, seed: int,
                weights: Path, route: DecoderTuning) -> Run:
    """A run's own n-best lists of dev and test with every feature, all weights tuned on dev from the run's
    (MERT, the run's seed) and applied to both."""
    c = config
    lists = {}
    for split in SPLITS:
        lists[split] = directory / f"seed{seed}.{split}.scored.gz"
        score(directory / f"seed{seed}.{split}.{route.nbest_size}best", c.split(split).source, features,
              lists[split], timing=f"score-nbest {split} {directory.name} seed {seed}")
    tuned = directory / f"seed{seed}.rescored.yaml"
    tune_config = with_overrides(TuneConfig(), {"seed": seed, "mert.restarts": route.restarts,
                                                "bleu.tokenize": c.tokenize})
    steps.rerank(["tune", "--nbest", lists["dev"], "-r", c.dev.reference, "--init", weights, "--seed", seed,
                  "--restarts", route.restarts, "--tokenize", c.tokenize, "-o", tuned], [tuned], tune_on_nbest,
                 tune_config, c.dev.reference, weights, None, lists["dev"], tuned)
    outputs = apply(c, steps, directory, f"seed{seed}.rescored", tuned, lists)
    dev, test = (bleu(c, outputs[split], split) for split in SPLITS)
    return Run(dev, test, str(outputs["test"]))


def mert_moses(config: ExperimentConfig, steps: StepRunner, ini: Path, work: Path, route: DecoderTuning) -> Run:
    """Moses' own ``mert-moses.pl`` from ``ini``'s weights with the loop's n-best size, iterations and Moses'
    threads (``--predictable-seeds``; its MERT's 20 random restarts are its own default), and dev and test decoded
    with its moses.ini."""
    moses = config.moses
    assert moses.decoder is not None and route.mert_moses is not None
    decoder = Path(moses.decoder).resolve()
    steps.program([Path(route.mert_moses).resolve(), Path(config.dev.source).resolve(),
                   Path(config.dev.reference).resolve(), decoder, ini.resolve(), f"--working-dir={work.resolve()}",
                   f"--mertdir={decoder.parent}", f"--nbest={route.nbest_size}", "--predictable-seeds",
                   f"--decoder-flags=-threads {moses.threads}", f"--maximum-iterations={route.iterations}"],
                  [work / "moses.ini"], stdout=work.with_name("mert-moses.out"), log=work.with_name("mert-moses.log"),
                  timing="mert-moses.pl")
    for split in SPLITS:
        decode(config, steps, work / "moses.ini", config.split(split).source, work / f"{split}.1best",
               timing=f"decode {split} mert-moses.pl")
    runs = sorted((p for p in work.glob("run*.out") if p.name[3:-4].isdigit()), key=lambda p: int(p.name[3:-4]))
    dev, test = (bleu(config, work / f"{split}.1best", split) for split in SPLITS)
    return Run(dev, test, str(work / "test.1best"), tuple(bleu(config, p, "dev") for p in runs),
               tuple(mert_bleu(p.with_name(p.name[:-4] + ".mert.log")) for p in runs))


def mert_bleu(log: Path) -> float:
    """The tuned BLEU of one iteration of mert-moses.pl, as its ``mert`` prints it (``Best point: ... => 0.5565``)."""
    for line in reversed(log.read_text(encoding="utf-8", errors="replace").splitlines()):
        if line.startswith("Best point:") and "=>" in line:
            return 100 * float(line.rsplit("=>", 1)[1])
    return math.nan
