"""The phrase-table route: the decoder command that ``rerank tune --decoder`` runs Moses with (its paths quoted),
the tuned BLEU that mert-moses.pl's log gives, and (with the real Moses decoder, on the sample system filtered to
three sentences) a run of the route: Moses with its own weights, re-tuned with Moses in the loop, and its own n-best
lists rescored and re-tuned, BLEU of each output as sacrebleu gives it."""

from __future__ import annotations

import gzip
import math
import os
import shlex
from pathlib import Path

import pytest
import sacrebleu

from rerank.formats.moses_ini import MosesIni
from rerank.study.config import DecoderTuning, ExperimentConfig, MosesSystem, Split
from rerank.study.lists import Scoring
from rerank.study.moses import placeholder_ini
from rerank.study.report import route_title
from rerank.study.route import column_models, mert_bleu, moses_decoder, run_route
from rerank.study.runner import StepRunner

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "data"
MOSES = REPO.parent / "shared" / "tools" / "moses" / "bin" / "moses"
SENTENCES = 3


def experiment(directory: Path, decoder: str, **settings: object) -> ExperimentConfig:
    """The sample's system on its first val sentences (dev and test alike), its phrase table filtered to them."""
    sources = (EXAMPLES / "val.en").read_text(encoding="utf-8").splitlines()[:SENTENCES]
    references = (EXAMPLES / "val.fr").read_text(encoding="utf-8").splitlines()[:SENTENCES]
    (directory / "val.en").write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    (directory / "val.fr").write_text("".join(f"{s}\n" for s in references), encoding="utf-8")
    phrases = {" ".join(w[i:j]) for s in sources for w in [s.split()] for i in range(len(w))
               for j in range(i + 1, len(w) + 1)}
    with gzip.open(EXAMPLES / "phrase-table.gz", "rt", encoding="utf-8") as f, \
            gzip.open(directory / "phrase-table.gz", "wt", encoding="utf-8") as out:
        out.writelines(line for line in f if line.split(" ||| ", 1)[0] in phrases)
    split = Split(str(directory / "val.en"), str(directory / "val.fr"))
    moses = MosesSystem(ini=str(EXAMPLES / "moses.ini"), language_model=str(EXAMPLES / "lm.fr.4.sample.arpa.gz"),
                        phrase_table=str(directory / "phrase-table.gz"), decoder=decoder, nbest_size=5)
    return ExperimentConfig(output_dir=str(directory / "run"), encdec="encdec", rnnsearch="rnnsearch", moses=moses,
                            dev=split, test=split, tokenize="none", **settings)  # type: ignore[arg-type]


def test_the_decoder_command_quotes_its_paths(tmp_path: Path) -> None:
    directory = tmp_path / "a dir"
    directory.mkdir()
    config = experiment(directory, str(directory / "moses bin"))
    command = moses_decoder(config, Path("my ini") / "moses.ini")
    ini = (Path.cwd() / "my ini" / "moses.ini").resolve()
    assert command == (f"{shlex.quote(str(directory / 'moses bin'))} -f {shlex.quote(str(ini))} -threads 1 "
                       "-n-best-list {nbest} {nbest_size} distinct -weight-overwrite {weights_overwrite} "
                       "-input-file {source}")
    assert shlex.split(command)[:3] == [str(directory / "moses bin"), "-f", str(ini)]


def test_each_column_scores_with_its_models(tmp_path: Path) -> None:
    config = experiment(tmp_path, "moses", ensemble_seeds=(2, 3))
    models = {name: Path(name) for name in ("rnnsearch", "rnnsearch-seed2", "rnnsearch-seed3", "distilled", "phrases")}
    assert column_models(config, models, "student") == [Path("distilled")]
    assert column_models(config, models, "ensemble") == [Path("rnnsearch"), Path("rnnsearch-seed2"),
                                                         Path("rnnsearch-seed3")]
    assert column_models(config, models, "phrases") == [Path("phrases")]
    assert route_title("student+phrases-per-word") == (
        "+ p(target | source) of the ensemble's student and p(target | source) of the model trained on the table's "
        "phrase pairs per word in the phrase table, re-tuned")


def test_mert_moses_tuned_bleu_is_the_last_best_point(tmp_path: Path) -> None:
    log = tmp_path / "run1.mert.log"
    log.write_text("Seeding random numbers with system clock\nBest point: 0.1 0.2 ||| 0.3 => 0.4511\n"
                   "optimizing\nBest point: 0.1 0.25 ||| 0.35 => 0.5565\nStopping\n", encoding="utf-8")
    assert mert_bleu(log) == pytest.approx(55.65)
    log.write_text("Best point: 0.1 0.2 with no score\nkilled\n", encoding="utf-8")
    assert math.isnan(mert_bleu(log))


@pytest.mark.skipif(not os.access(MOSES, os.X_OK), reason=f"the Moses decoder not found in {MOSES.parent}")
def test_a_run_of_the_route_with_moses_in_the_loop(tmp_path: Path) -> None:
    route = DecoderTuning(systems=("baseline",), seeds=(1,), nbest_size=5, restarts=2, iterations=1,
                          rescore="baseline")
    config = experiment(tmp_path, str(MOSES), decoder_tuning=route)
    steps = StepRunner(config.output_dir)
    features = steps.out / "lengths.yaml"
    features.write_text("features:\n- kind: word-penalty\n", encoding="utf-8")
    results = run_route(config, steps, placeholder_ini(config, steps), {}, Scoring(steps), features)
    assert list(results.runs) == ["moses.ini", "baseline", "baseline+rescored"]
    references = (tmp_path / "val.fr").read_text(encoding="utf-8").splitlines()
    for runs in results.runs.values():
        assert len(runs) == 1
        output = Path(runs[0].test_output)
        hypotheses = output.read_text(encoding="utf-8").splitlines()
        assert len(hypotheses) == SENTENCES
        assert runs[0].test == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none").score)
        assert runs[0].dev == runs[0].test  # dev and test are the same sentences
    out = steps.out / "decoder-tuning"
    assert results.runs["moses.ini"][0].test_output == str(out / "moses.ini.test.1best")
    baseline = results.runs["baseline"][0]
    assert len(baseline.iterations) == len(baseline.tuned) == 1  # one decoder run
    assert baseline.test_output == str(out / "baseline" / "seed1.test.1best")
    assert (out / "baseline" / "seed1.dev.5best").exists() and (out / "baseline" / "seed1.rescored.yaml").exists()
    # the tuners' wall times: Moses in the loop, and the re-tuning of the rescored lists (named by its output)
    assert list(results.seconds) == ["tune baseline seed 1", "tune decoder-tuning/baseline/seed1.rescored.yaml"]
    lines = steps.commands.read_text(encoding="utf-8").splitlines()
    tune = next(line for line in lines if line.startswith("rerank tune"))
    assert shlex.split(tune)[:9] == ["rerank", "tune", "--source", config.dev.source, "-r", config.dev.reference,
                                     "--moses-ini", str(steps.out / "moses.decode.ini"), "-o"]


@pytest.mark.skipif(not os.access(MOSES, os.X_OK), reason=f"the Moses decoder not found in {MOSES.parent}")
def test_a_system_of_two_columns_adds_them_in_order(tmp_path: Path) -> None:
    route = DecoderTuning(systems=("rnnsearch+channel-per-word",), seeds=(1,), nbest_size=5, restarts=2, iterations=1)
    config = experiment(tmp_path, str(MOSES), decoder_tuning=route, channel="channel")
    steps = StepRunner(config.output_dir)
    model = REPO / "examples" / "models" / "rnnsearch"  # as the channel model too: its column is still a column
    results = run_route(config, steps, placeholder_ini(config, steps), {"rnnsearch": model, "channel": model},
                        Scoring(steps), steps.out / "unused.yaml")
    assert list(results.runs) == ["moses.ini", "rnnsearch+channel-per-word"]
    out = steps.out / "decoder-tuning" / "rnnsearch+channel-per-word"
    first, both = (gzip.open(out / name, "rt", encoding="utf-8").read().splitlines()
                   for name in ("phrase-table.1.gz", "phrase-table.gz"))
    assert len(first) == len(both) > 0
    for one, two in zip(first, both, strict=True):  # the second column appended to the first one's table
        assert two.split(" ||| ")[2].startswith(one.split(" ||| ")[2].rstrip() + " ")
        assert len(two.split(" ||| ")[2].split()) == 6
    scored = [shlex.split(line) for line in steps.commands.read_text(encoding="utf-8").splitlines()
              if line.startswith("rerank score-table")]
    assert ["--channel", "--per-word"] == [flag for flag in scored[1] if flag in ("--channel", "--per-word")]
    assert not {"--channel", "--per-word"} & set(scored[0])
    assert route_title("rnnsearch+channel-per-word") == ("+ RNNsearch p(target | source) and p(source | target) of "
                                                         "the target-to-source model per word in the phrase table, "
                                                         "re-tuned")


@pytest.mark.skipif(not os.access(MOSES, os.X_OK), reason=f"the Moses decoder not found in {MOSES.parent}")
def test_an_ensemble_column_with_its_weight_alone_tuned(tmp_path: Path) -> None:
    route = DecoderTuning(systems=("ensemble",), seeds=(1,), nbest_size=5, restarts=2, iterations=1,
                          activate="columns")
    config = experiment(tmp_path, str(MOSES), decoder_tuning=route, ensemble_seeds=(2,))
    steps = StepRunner(config.output_dir)
    members = REPO / "examples" / "models" / "rnnsearch", REPO / "examples" / "models" / "encdec"
    ini = placeholder_ini(config, steps)
    results = run_route(config, steps, ini, {"rnnsearch": members[0], "rnnsearch-seed2": members[1]},
                        Scoring(steps), steps.out / "unused.yaml")
    assert list(results.runs) == ["moses.ini", "ensemble"]
    lines = [shlex.split(line) for line in steps.commands.read_text(encoding="utf-8").splitlines()]
    scored = next(line for line in lines if line[:2] == ["rerank", "score-table"])
    assert scored[scored.index("--model") + 1:][:3] == [str(members[0]), str(members[1]), "--moses-ini"]
    tune = next(line for line in lines if line[:2] == ["rerank", "tune"])
    assert tune[tune.index("--activate") + 1] == "TranslationModel0_4"
    tuned = MosesIni.read(steps.out / "decoder-tuning" / "ensemble" / "seed1.moses.ini").weights()
    start = MosesIni.read(ini).weights()
    ratios = [tuned[name][i] / value for name, values in start.items() for i, value in enumerate(values)
              if name != "UnknownWordPenalty0"]  # not in the n-best lists: not tuned, not normalised
    assert max(ratios) == pytest.approx(min(ratios)) != 1  # Moses' own weights keep their ratios
    assert len(tuned["TranslationModel0"]) == 5
    assert route_title("ensemble") == "+ the RNNsearch ensemble's p(target | source) in the phrase table, re-tuned"
