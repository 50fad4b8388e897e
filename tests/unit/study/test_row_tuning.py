"""The rescoring rows' tuning: what each row tunes (Moses' features and the row's, from moses.ini's weights; the
union's own features from RNNsearch's ranking), the 1-best of each split under the tuned weights, BLEU as sacrebleu
gives it, and the oracle BLEU of each pool; each step logged to commands.sh as the rerank command it runs."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest
import sacrebleu

from rerank.errors import RerankError
from rerank.formats.nbest import read_nbest
from rerank.study.config import ExperimentConfig, MosesSystem, Split
from rerank.study.row_tuning import apply, moses_labels, oracles, tune_rows, union_init
from rerank.study.rows import Row
from rerank.study.runner import StepRunner

MOSES_FEATURES = ("Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0")


def experiment(test_data: Path, **settings: object) -> ExperimentConfig:
    """A study of the toy data (dev and test alike) with the Multi30k system's moses.ini."""
    split = Split(str(test_data / "toy.en"), str(test_data / "toy.fr"), str(test_data / "toy.nbest"))
    moses = MosesSystem(ini=str(test_data / "multi30k" / "moses.ini"), language_model="lm.arpa")
    values: dict[str, object] = {"output_dir": "run", "encdec": "encdec", "rnnsearch": "rnnsearch", "moses": moses,
                                 "dev": split, "test": split, "optimizers": ("mert",), "seeds": (1,), "restarts": 2,
                                 "cv_folds": 0, "tokenize": "none"}
    return ExperimentConfig(**{**values, **settings})  # type: ignore[arg-type]


def sacrebleu_of(path: Path, test_data: Path) -> float:
    hypotheses = path.read_text(encoding="utf-8").splitlines()
    references = (test_data / "toy.fr").read_text(encoding="utf-8").splitlines()
    return float(sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none").score)


def brute_force_oracle(test_data: Path, size: int) -> float:
    """The best corpus BLEU of the toy list's first ``size`` hypotheses per sentence, trying every choice."""
    references = (test_data / "toy.fr").read_text(encoding="utf-8").splitlines()
    hypotheses: list[list[str]] = [[], [], []]
    for entry in read_nbest(test_data / "toy.nbest"):
        hypotheses[entry.sentence_id].append(entry.hypothesis)
    return max(float(sacrebleu.corpus_bleu(list(choice), [references], tokenize="none").score)
               for choice in itertools.product(*(h[:size] for h in hypotheses)))


def write_gz(path: Path, lines: list[str]) -> Path:
    path.write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode(), mtime=0))
    return path


def toy_lines(test_data: Path) -> list[str]:
    return (test_data / "toy.nbest").read_text(encoding="utf-8").splitlines()


def commands(steps: StepRunner) -> list[str]:
    return steps.commands.read_text(encoding="utf-8").splitlines()


def test_moses_labels_are_the_lists_features(test_data: Path, tmp_path: Path) -> None:
    assert moses_labels(test_data / "toy.nbest") == MOSES_FEATURES
    (tmp_path / "empty.nbest").write_text("", encoding="utf-8")
    with pytest.raises(RerankError) as error:
        moses_labels(tmp_path / "empty.nbest")
    assert str(error.value) == f"{tmp_path / 'empty.nbest'}: empty n-best list"


def test_the_union_starts_from_rnnsearchs_ranking(tmp_path: Path) -> None:
    steps = StepRunner(tmp_path)
    path = union_init(steps)
    assert path == tmp_path / "tuning" / "union-init.yaml"
    assert path.read_text(encoding="utf-8") == "RNNsearch0: 1.0\n"


def test_apply_writes_each_splits_1best(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data)
    steps = StepRunner(tmp_path / "run")
    lists = {"dev": test_data / "toy.nbest", "test": write_gz(tmp_path / "test.gz", toy_lines(test_data)[3:])}
    # moses.ini's weights, UnknownWordPenalty0 among them, which Moses does not print: left out
    outputs = apply(config, steps, tmp_path / "out", "moses.ini", config.moses.ini, lists)
    assert outputs == {split: tmp_path / "out" / f"moses.ini.{split}.1best" for split in ("dev", "test")}
    assert outputs["dev"].read_bytes() == (test_data / "toy.1best").read_bytes()
    onebest = (test_data / "toy.1best").read_text(encoding="utf-8").splitlines(keepends=True)
    assert outputs["test"].read_text(encoding="utf-8") == "\n" + "".join(onebest[1:])  # sentence 0: none, empty
    assert commands(steps) == [
        f"mkdir -p {tmp_path / 'out'}",
        *(f"rerank apply {path} --weights {config.moses.ini} --missing-weight 0 --source {config.dev.source} "
          f"-o {outputs[split]}" for split, path in lists.items())]


def test_features_without_a_weight_count_zero(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data)
    weights = tmp_path / "weights.yaml"
    weights.write_text("LM0: 1\n", encoding="utf-8")
    outputs = apply(config, StepRunner(tmp_path / "run"), tmp_path / "out", "lm", weights,
                    {"dev": test_data / "toy.nbest"})
    assert outputs["dev"].read_text(encoding="utf-8").splitlines()[:2] == [
        "un homme avec un chapeau orange regarde quelque chose . ",  # the highest LM0 of each sentence
        "un terrier boston luxuriante court sur l&apos; herbe verte devant une clôture blanche . "]


def test_the_oracle_of_each_pool_and_split(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data)
    steps = StepRunner(tmp_path / "run")
    lines = toy_lines(test_data)
    write_gz(steps.out / "dev.moses.scored.gz", lines)
    write_gz(steps.out / "test.moses.scored.gz", lines[::3])  # the 1-best alone
    for split in ("dev", "test"):
        write_gz(steps.out / f"{split}.moses2.scored.gz", [line for i, line in enumerate(lines) if i % 3 < 2])
    result = oracles(config, steps, {"moses": "SPLIT.moses.scored.gz", "moses2": "SPLIT.moses2.scored.gz"})
    first = sacrebleu_of(test_data / "toy.1best", test_data)
    # every choice of one hypothesis per sentence, by sacrebleu: the oracle of these 3 sentences is their best
    assert result["moses"]["dev"] == pytest.approx(brute_force_oracle(test_data, 3)) and result["moses"]["dev"] > first
    assert result["moses2"]["dev"] == result["moses2"]["test"] == pytest.approx(brute_force_oracle(test_data, 2))
    assert result["moses"]["test"] == pytest.approx(first)  # one hypothesis each: the 1-best itself
    figures = json.loads((steps.out / "test.moses.oracle.json").read_text(encoding="utf-8"))
    assert figures[str(steps.out / "test.moses.scored.gz")] == {"first": pytest.approx(first),
                                                                "oracle": pytest.approx(first),
                                                                "hypotheses_per_sentence": 1.0}
    assert commands(steps)[0] == (f"rerank oracle -r {config.dev.reference} --tokenize none "
                                  f"{steps.out}/dev.moses.scored.gz --json {steps.out}/dev.moses.oracle.json")
    assert len(commands(steps)) == 4


def test_each_row_tunes_its_features_from_its_start(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data)
    steps = StepRunner(tmp_path / "run")
    moses = [line.replace(" ||| -", " WP1= 0 ||| -", 1) for line in toy_lines(test_data)]  # a feature for the row
    moses = [line.replace("WP1= 0", f"WP1= {-len(line.split(' ||| ')[1].split())}") for line in moses]
    union = [f"{e.sentence_id} ||| {e.hypothesis} ||| InMoses= 1 InRNNsearch= {i % 2} RNNsearch0= {-i} ||| 0"
             for i, e in enumerate(read_nbest(test_data / "toy.nbest"))]
    for split in ("dev", "test"):
        write_gz(steps.out / f"{split}.moses.scored.gz", moses)
        write_gz(steps.out / f"{split}.union.scored.gz", union)
    rows = (Row("wp", "+ WP", "moses", ("WP1",)),
            Row("u", "the union", "union", ("InMoses", "InRNNsearch", "RNNsearch0"), moses_features=False))
    results = tune_rows(config, steps, rows, MOSES_FEATURES)
    baseline = sacrebleu_of(test_data / "toy.1best", test_data)
    assert results["moses"]["moses.ini"].dev == pytest.approx([baseline])
    assert results["moses"]["moses.ini"].test == pytest.approx([baseline])
    tuning = steps.out / "tuning"
    for key in ("wp", "u"):
        assert list(results[key]) == ["mert"]
        score = results[key]["mert"]
        for split, values in (("dev", score.dev), ("test", score.test)):
            assert values == pytest.approx([sacrebleu_of(tuning / key / f"mert-seed1.{split}.1best", test_data)])
    tunes = [line for line in commands(steps) if line.startswith("rerank tune ")]
    assert tunes == [
        f"rerank tune --nbest {steps.out}/dev.moses.scored.gz -r {config.dev.reference} --init {config.moses.ini} "
        "--features Distortion0,LM0,WordPenalty0,PhrasePenalty0,TranslationModel0,WP1 --optimizer mert --seed 1 "
        f"--restarts 2 --tokenize none -o {tuning}/wp/mert-seed1.yaml",
        f"rerank tune --nbest {steps.out}/dev.union.scored.gz -r {config.dev.reference} --init "
        f"{tuning}/union-init.yaml --features InMoses,InRNNsearch,RNNsearch0 --optimizer mert --seed 1 --restarts 2 "
        f"--tokenize none -o {tuning}/u/mert-seed1.yaml"]
    applied = [line for line in commands(steps) if line.startswith("rerank apply ")]
    assert len(applied) == 2 + 2 * len(rows)  # moses.ini's, then each row's, on dev and test
