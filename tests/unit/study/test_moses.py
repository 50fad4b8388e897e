"""Moses in the study: the moses.ini it decodes with (placeholders replaced, existing paths kept), its first phrase
table, a model's phrase-table column with the moses.ini that reads it, and (with the real Moses decoder) the filtered
model and the 1-best and n-best decoding, each logged to commands.sh as the command line it runs."""

from __future__ import annotations

import gzip
import math
import os
import shlex
from pathlib import Path

import pytest
import torch
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.formats.moses_ini import TRAIN_MODEL_WEIGHT, MosesIni
from rerank.formats.nbest import read_nbest
from rerank.formats.phrase_table import read_phrase_table
from rerank.models.vocab import Vocabulary
from rerank.scoring.table import Spread, spread_matched_weight
from rerank.study.config import ExperimentConfig, MosesSystem, Split
from rerank.study.moses import add_column, decode, decoding_ini, phrase_table_of, placeholder_ini
from rerank.study.runner import StepRunner

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "data"
MOSES = REPO.parent / "shared" / "tools" / "moses" / "bin" / "moses"
FILTER = MOSES.parents[1] / "scripts" / "training" / "filter-model-given-input.pl"
needs_moses = pytest.mark.skipif(not os.access(MOSES, os.X_OK), reason=f"the Moses decoder not found in {MOSES.parent}")
SENTENCES = 3  # of the sample's val set


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The first val sentences of the sample, their lines of its 1-best, and its phrase table filtered to them."""
    directory = tmp_path_factory.mktemp("sample")
    sources = (EXAMPLES / "val.en").read_text(encoding="utf-8").splitlines()[:SENTENCES]
    (directory / "val.en").write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    onebest = (EXAMPLES / "val.1best").read_text(encoding="utf-8").splitlines(keepends=True)[:SENTENCES]
    (directory / "val.1best").write_text("".join(onebest), encoding="utf-8")
    phrases = {" ".join(w[i:j]) for s in sources for w in [s.split()] for i in range(len(w))
               for j in range(i + 1, len(w) + 1)}
    with gzip.open(EXAMPLES / "phrase-table.gz", "rt", encoding="utf-8") as f, \
            gzip.open(directory / "phrase-table.gz", "wt", encoding="utf-8") as out:
        out.writelines(line for line in f if line.split(" ||| ", 1)[0] in phrases)
    return {"source": directory / "val.en", "onebest": directory / "val.1best", "table": directory / "phrase-table.gz"}


def experiment(sample: dict[str, Path], **moses: object) -> ExperimentConfig:
    """The sample's system (moses.ini with placeholders), dev and test its first val sentences."""
    split = Split(str(sample["source"]), str(sample["source"]), str(EXAMPLES / "val.100best.gz"))
    system: dict[str, object] = {"ini": str(EXAMPLES / "moses.ini"),
                                 "language_model": str(EXAMPLES / "lm.fr.4.sample.arpa.gz"),
                                 "phrase_table": str(sample["table"]), **moses}
    return ExperimentConfig(output_dir="run", encdec="encdec", rnnsearch="rnnsearch",
                            moses=MosesSystem(**system), dev=split, test=split)  # type: ignore[arg-type]


def commands(steps: StepRunner) -> list[str]:
    return steps.commands.read_text(encoding="utf-8").splitlines()


def test_placeholders_become_the_configs_table_and_lm(sample: dict[str, Path], tmp_path: Path) -> None:
    config = experiment(sample)
    ini = placeholder_ini(config, StepRunner(tmp_path))
    assert ini == tmp_path / "moses.decode.ini"
    original = (EXAMPLES / "moses.ini").read_text(encoding="utf-8").splitlines()
    written = ini.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(original, written, strict=True) if a != b]
    assert changed == [
        ("PhraseDictionaryMemory name=TranslationModel0 num-features=4 path=MODEL_DIR/phrase-table.gz input-factor=0 "
         "output-factor=0", f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={sample['table']} "
         "input-factor=0 output-factor=0"),
        ("KENLM name=LM0 factor=0 path=LM_DIR/train.fr.4.arpa order=4",
         f"KENLM name=LM0 factor=0 path={EXAMPLES / 'lm.fr.4.sample.arpa.gz'} order=4")]
    assert decoding_ini(config, StepRunner(tmp_path / "again")) == tmp_path / "again" / "moses.decode.ini"


def test_paths_that_name_files_are_kept(sample: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "table.gz").write_bytes(b"")  # Moses adds the suffix: "table" names it
    text = (EXAMPLES / "moses.ini").read_text(encoding="utf-8")
    ini = tmp_path / "moses.ini"
    ini.write_text(text.replace("MODEL_DIR/phrase-table.gz", str(tmp_path / "table")), encoding="utf-8")
    config = experiment(sample, ini=str(ini), phrase_table=None)
    written = placeholder_ini(config, StepRunner(tmp_path / "run")).read_text(encoding="utf-8")
    assert f"path={tmp_path / 'table'} " in written
    assert f"path={EXAMPLES / 'lm.fr.4.sample.arpa.gz'} " in written  # only the LM was a placeholder
    no_table = experiment(sample, phrase_table=None)
    assert "path=MODEL_DIR/phrase-table.gz" in placeholder_ini(no_table, StepRunner(tmp_path / "n")).read_text()


def test_the_first_phrase_table_of_a_moses_ini(tmp_path: Path) -> None:
    assert phrase_table_of(EXAMPLES / "moses.ini") == "MODEL_DIR/phrase-table.gz"
    ini = tmp_path / "moses.ini"
    ini.write_text("[feature]\nWordPenalty\nPhraseDictionaryMemory name=TM1 num-features=1\n"
                   "PhraseDictionaryCompact name=TM2 num-features=2 path=/a/b\n"
                   "PhraseDictionaryMemory name=TM3 num-features=2 path=/c\n", encoding="utf-8")
    assert phrase_table_of(ini) == "/a/b"
    ini.write_text("[feature]\nWordPenalty\nKENLM name=LM0 path=/lm order=3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{ini}: no phrase table with a path$"):
        phrase_table_of(ini)


def test_a_models_column_and_the_moses_ini_that_reads_it(sample: dict[str, Path], tmp_path: Path) -> None:
    config = experiment(sample)
    steps = StepRunner(tmp_path / "run")
    ini = placeholder_ini(config, steps)
    entries = list(read_phrase_table(sample["table"]))
    src_vocab = Vocabulary.build((e.source.split() for e in entries), 100)
    trg_vocab = Vocabulary.build((e.target.split() for e in entries), 100)
    model = save_model_dir(tmp_path / "rnnsearch", tiny_model(tiny_config("rnnsearch"), len(src_vocab),
                                                              len(trg_vocab), dtype=torch.float32),
                           src_vocab, trg_vocab)
    table, output_ini = steps.out / "rnnsearch" / "phrase-table.gz", steps.out / "rnnsearch" / "moses.ini"
    add_column(config, steps, [model], ini, table, output_ini)
    assert commands(steps) == [f"mkdir -p {table.parent}",
                               f"rerank score-table {sample['table']} -o {table} --model {model} --moses-ini {ini} "
                               f"--moses-ini-out {output_ini}"]
    scored = list(read_phrase_table(table))
    assert len(scored) == len(entries)
    assert all(s.scores[:4] == e.scores and 0 < s.scores[4] <= 1 for s, e in zip(scored, entries, strict=True))
    written = MosesIni.read(output_ini)
    feature = written.feature("TranslationModel0")
    assert (feature.args["num-features"], feature.args["path"]) == ("5", str(table))
    assert written.weights()["TranslationModel0"][4] == TRAIN_MODEL_WEIGHT
    per_word, per_word_ini = steps.out / "per-word" / "phrase-table.gz", steps.out / "per-word" / "moses.ini"
    add_column(config, steps, [model], ini, per_word, per_word_ini, per_word=True, weight="auto")
    assert commands(steps)[-1] == (f"rerank score-table {sample['table']} -o {per_word} --model {model} --per-word "
                                   f"--moses-ini {ini} --moses-ini-out {per_word_ini} --weight auto")
    spread = Spread()
    for entry in read_phrase_table(per_word):
        spread.add(entry.scores)
    assert MosesIni.read(per_word_ini).weights()["TranslationModel0"][4] == \
        spread_matched_weight(MosesIni.read(ini).weights()["TranslationModel0"], spread.deviations()) > 0
    other = save_model_dir(tmp_path / "rnnsearch-2", tiny_model(tiny_config("rnnsearch"), len(src_vocab),
                                                                len(trg_vocab), dtype=torch.float32, seed=2),
                            src_vocab, trg_vocab)
    alone = steps.out / "other" / "phrase-table.gz"
    add_column(config, steps, [other], ini, alone, steps.out / "other" / "moses.ini")
    both = steps.out / "ensemble" / "phrase-table.gz"
    add_column(config, steps, [model, other], ini, both, steps.out / "ensemble" / "moses.ini")
    assert commands(steps)[-1] == (f"rerank score-table {sample['table']} -o {both} --model {model} {other} "
                                   f"--moses-ini {ini} --moses-ini-out {both.parent / 'moses.ini'}")
    for joint, first, second in zip(read_phrase_table(both), scored, read_phrase_table(alone), strict=True):
        assert first.scores[4] != second.scores[4]
        assert math.log(joint.scores[4]) == pytest.approx((math.log(first.scores[4]) + math.log(second.scores[4])) / 2,
                                                          abs=1e-4)


@needs_moses
def test_moses_decodes_with_the_ini_as_commands_sh_says(sample: dict[str, Path], tmp_path: Path) -> None:
    config = experiment(sample, decoder=str(MOSES))
    steps = StepRunner(tmp_path / "run")
    ini = placeholder_ini(config, steps)
    output, nbest = steps.out / "dev.1best", steps.out / "dev.nbest"
    decode(config, steps, ini, str(sample["source"]), output, (nbest, 5), timing="decode dev")
    assert output.read_bytes() == sample["onebest"].read_bytes()  # the sample system's own 1-best
    entries = list(read_nbest(nbest))
    assert [e.hypothesis for e in entries if e.lineno == 1 or e.sentence_id != entries[e.lineno - 2].sentence_id] == \
        sample["onebest"].read_text(encoding="utf-8").splitlines()
    assert all(len([e for e in entries if e.sentence_id == i]) <= 5 for i in range(SENTENCES))
    assert len({(e.sentence_id, e.hypothesis) for e in entries}) == len(entries)  # distinct
    assert commands(steps) == [shlex.join([str(MOSES), "-f", str(ini), "-threads", "1", "-n-best-list", str(nbest),
                                           "5", "distinct", "-input-file", str(sample["source"])])
                               + f" > {output}"]
    assert "decode dev" in steps.timings
    decode(config, steps, ini, str(sample["source"]), output, (nbest, 5))  # done: not run again
    assert len(commands(steps)) == 1


@needs_moses
@pytest.mark.skipif(not FILTER.is_file(), reason=f"{FILTER} not found")
def test_the_model_filtered_to_dev_and_test(sample: dict[str, Path], tmp_path: Path) -> None:
    config = experiment(sample, decoder=str(MOSES), filter_script=str(FILTER))
    steps = StepRunner(tmp_path / "run")
    ini = decoding_ini(config, steps)
    assert ini == steps.out / "filtered" / "moses.ini"
    text = sample["source"].read_text(encoding="utf-8")
    assert (steps.out / "filter-input.txt").read_text(encoding="utf-8") == text + text  # dev's, then test's
    assert commands(steps) == [f"{FILTER} {steps.out}/filtered {steps.out}/moses.decode.ini "
                               f"{steps.out}/filter-input.txt"]
    output = steps.out / "dev.1best"
    decode(config, steps, ini, str(sample["source"]), output)
    assert output.read_bytes() == sample["onebest"].read_bytes()
