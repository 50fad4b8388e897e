"""What rerank writes, read by the real Moses binaries: a scored phrase table and its moses.ini
decoded by ``moses``, a rescored n-best list read by ``extractor`` and ``mert``, and ``rerank tune``
driving ``moses`` with weights that Moses reports using.

The system is the sample in ``examples/data`` (its moses.ini, its ARPA LM), with the phrase table
filtered to the first few ``val`` sentences so that Moses loads and decodes in well under a second.
The binaries are looked for in ``shared/tools/moses`` beside the repository; the tests skip without them.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats.files import read_text
from rerank.models.vocab import Vocabulary
from rerank.tune.data import NBestPool
from rerank.tune.stats import BleuStatistics, log_bleu

REPOSITORY = Path(__file__).resolve().parents[2]
MOSES = REPOSITORY.parent / "shared" / "tools" / "moses"
BIN = MOSES / "bin"
TOOLS = ("moses", "extractor", "mert")
EXAMPLES = REPOSITORY / "examples" / "data"
LM = EXAMPLES / "lm.fr.4.sample.arpa.gz"
SENTENCES = 4
SEPARATOR = " ||| "

pytestmark = pytest.mark.skipif(
    not all(os.access(BIN / tool, os.X_OK) for tool in TOOLS),
    reason=f"the Moses binaries ({', '.join(TOOLS)}) not found in {BIN}")


# ---------------------------------------------------------------------------------------------- helpers

def run_tool(args: list[object], *, stdin: Path | None = None, cwd: Path | None = None) -> str:
    """Run a Moses binary; its standard output, or a failure that shows the end of its stderr."""
    argv = [str(a) for a in args]
    with open(stdin, "rb") if stdin is not None else open(os.devnull, "rb") as source:
        result = subprocess.run(argv, stdin=source, capture_output=True, cwd=cwd, timeout=300)
    err = result.stderr.decode("utf-8", "replace").splitlines()
    assert result.returncode == 0, (f"{shlex.join(argv)} exited with {result.returncode}:\n  "
                                    + "\n  ".join(err[-15:]))
    return result.stdout.decode()


def parse_shown_weights(text: str) -> dict[str, list[float] | None]:
    """``moses -show-weights``: ``Name= v ...`` per feature; None for an ``UNTUNEABLE`` one."""
    shown: dict[str, list[float] | None] = {}
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].endswith("="):
            shown[tokens[0][:-1]] = [float(v) for v in tokens[1:]]
        else:
            assert tokens[1:] == ["UNTUNEABLE"], line
            shown[tokens[0]] = None
    return shown


def show_weights(ini: Path, *extra: object, cwd: Path | None = None) -> dict[str, list[float] | None]:
    return parse_shown_weights(run_tool([BIN / "moses", "-f", ini, "-threads", 1, "-show-weights", *extra], cwd=cwd))


@dataclass
class Hypothesis:
    sentence: int
    text: str
    features: list[tuple[str, list[float]]]  # (label, values) in the order of the line
    total: float
    rest: list[str]  # the fields after the total

    def names(self) -> list[str]:
        """The feature names as Moses' extractor spells dense features: ``LM1_0``, ``TranslationModel0_3``."""
        return [f"{label}_{i}" for label, values in self.features for i in range(len(values))]

    def values(self) -> list[float]:
        return [v for _, values in self.features for v in values]


def read_nbest(path: Path) -> list[Hypothesis]:
    opener = gzip.open if path.suffix == ".gz" else open
    hypotheses = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(SEPARATOR)
            features: list[tuple[str, list[float]]] = []
            for token in fields[2].split():
                if token.endswith("="):
                    features.append((token[:-1], []))
                else:
                    features[-1][1].append(float(token))
            hypotheses.append(Hypothesis(int(fields[0]), fields[1], features, float(fields[3]), fields[4:]))
    return hypotheses


def as_vector(weights: dict[str, list[float]] | dict[str, list[float] | None], label: str) -> list[float]:
    value = weights[label]
    assert value is not None
    return value


def model_score(hypothesis: Hypothesis, weights: dict[str, list[float]]) -> float:
    """The weighted sum of a hypothesis' features, as Moses computes the total of field 4."""
    return sum(w * v for label, values in hypothesis.features
               for w, v in zip(as_vector(weights, label), values, strict=True))


def flat(weights: dict[str, object]) -> dict[str, list[float]]:
    """A YAML weights file's values as lists (a single weight is written as a plain number)."""
    return {label: [float(v) for v in (value if isinstance(value, list) else [value])]
            for label, value in weights.items()}


def filter_table(table: Path, sentences: list[list[str]], out: Path) -> Path:
    """The lines of ``table`` whose source phrase occurs in one of ``sentences``, as Moses'
    filter-model-given-input.pl keeps them."""
    phrases = {" ".join(words[i:j]) for words in sentences
               for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    with gzip.open(table, "rt", encoding="utf-8") as f, gzip.open(out, "wt", encoding="utf-8") as o:
        o.writelines(line for line in f if line.split(SEPARATOR, 1)[0] in phrases)
    return out


def span(text: str) -> slice:
    """A word span of Moses' segmentation, ``3-5`` or ``4``, as a slice."""
    first, _, last = text.partition("-")
    return slice(int(first), int(last or first) + 1)


def read_table(path: Path) -> dict[tuple[str, str], list[float]]:
    """A gzipped text phrase table: (source, target) -> its scores."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        fields = (line.split(SEPARATOR) for line in f)
        return {(source.strip(), target.strip()): [float(v) for v in scores.split()]
                for source, target, scores, *_ in fields}


# --------------------------------------------------------------------------------------------- fixtures

@dataclass(frozen=True)
class System:
    directory: Path
    moses_ini: Path   # absolute paths inside
    table: Path       # the phrase table, filtered to the source
    source: Path
    reference: Path


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> System:
    """The sample system on the first val sentences: filtered table, moses.ini with absolute paths."""
    directory = tmp_path_factory.mktemp("moses-system")
    source, reference = directory / "val.en", directory / "val.fr"
    source_lines = (EXAMPLES / "val.en").read_text(encoding="utf-8").splitlines(keepends=True)[:SENTENCES]
    source.write_text("".join(source_lines), encoding="utf-8")
    reference.write_text("".join((EXAMPLES / "val.fr").read_text(encoding="utf-8").splitlines(keepends=True)
                                 [:SENTENCES]), encoding="utf-8")
    table = filter_table(EXAMPLES / "phrase-table.gz", [line.split() for line in source_lines],
                         directory / "phrase-table.gz")
    ini = (EXAMPLES / "moses.ini").read_text(encoding="utf-8")
    ini = ini.replace("path=MODEL_DIR/phrase-table.gz", f"path={table}")
    ini = re.sub(r"path=LM_DIR/\S+", f"path={LM}", ini)
    assert "MODEL_DIR" not in ini and "LM_DIR" not in ini
    moses_ini = directory / "moses.ini"
    moses_ini.write_text(ini, encoding="utf-8")
    return System(directory, moses_ini, table, source, reference)


# ------------------------------------------------------------------------------------------------ tests

def test_a_scored_table_and_its_moses_ini_load_in_moses_which_decodes_with_the_new_score(
        system: System, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = list(read_table(system.table))
    src_vocab = Vocabulary.build((source.split() for source, _ in pairs), 200)
    trg_vocab = Vocabulary.build((target.split() for _, target in pairs), 200)
    model = tiny_model(tiny_config("encdec"), len(src_vocab), len(trg_vocab), dtype=torch.float32)
    model_dir = save_model_dir(tmp_path / "encdec", model, src_vocab, trg_vocab)

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)  # relative output paths: the new moses.ini must still be usable from anywhere
    code = main(["score-table", str(system.table), "-o", "phrase-table.rnn.gz", "--model", str(model_dir),
                 "--moses-ini", str(system.moses_ini), "--moses-ini-out", "moses.rnn.ini", "--weight", "0.3",
                 "--threads", "1"])
    assert code == 0, capsys.readouterr().err
    new_ini, scored = work / "moses.rnn.ini", work / "phrase-table.rnn.gz"

    # Moses reads the rewritten moses.ini as it is, from another directory: one more TranslationModel0 weight
    before = show_weights(system.moses_ini, cwd=elsewhere)
    after = show_weights(new_ini, cwd=elsewhere)
    assert after["TranslationModel0"] == [*as_vector(before, "TranslationModel0"), 0.3]
    assert {k: v for k, v in after.items() if k != "TranslationModel0"} == \
           {k: v for k, v in before.items() if k != "TranslationModel0"}

    # ... loads the new table and decodes: a 1-best line per sentence, the first of its n-best list
    nbest = tmp_path / "moses.nbest"
    onebest = run_tool([BIN / "moses", "-f", new_ini, "-threads", 1, "-n-best-list", nbest, 5, "distinct",
                        "-include-segmentation-in-n-best"], stdin=system.source, cwd=elsewhere).splitlines()
    assert len(onebest) == SENTENCES and all(line.strip() for line in onebest)
    hypotheses = read_nbest(nbest)
    assert sorted({h.sentence for h in hypotheses}) == list(range(SENTENCES))
    firsts = {}
    for h in hypotheses:
        firsts.setdefault(h.sentence, h)
    assert [line.strip() for line in onebest] == [firsts[i].text.strip() for i in range(SENTENCES)]

    # ... and scores every hypothesis with the new column as max(ln x, -100), summed over its phrase pairs
    table = read_table(scored)
    sources = [line.split() for line in system.source.read_text(encoding="utf-8").splitlines()]
    shown = {label: as_vector(after, label) for label in after if after[label] is not None}
    for h in hypotheses:
        assert [label for label, _ in h.features] == ["Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0",
                                                      "TranslationModel0"]
        tm = dict(h.features)["TranslationModel0"]
        assert len(tm) == 5
        expected = [0.0] * 5
        target = h.text.split()
        for segment in h.rest[0].split():  # source span=target span: "0-4=0-3 5=4"
            source_span, target_span = segment.split("=")
            pair = (" ".join(sources[h.sentence][span(source_span)]), " ".join(target[span(target_span)]))
            assert pair in table, f"sentence {h.sentence}: Moses used a phrase pair not in the table: {pair}"
            expected = [e + max(math.log(x), -100.0) for e, x in zip(expected, table[pair], strict=True)]
        assert tm == pytest.approx(expected, rel=1e-5, abs=1e-3), h
        assert h.total == pytest.approx(model_score(h, shown), abs=1e-3), h


def test_moses_extractor_and_mert_read_every_added_feature(system: System, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    nbest = tmp_path / "val.nbest"
    with gzip.open(EXAMPLES / "val.100best.gz", "rt", encoding="utf-8") as f:
        nbest.write_text("".join(line for line in f if int(line.split(SEPARATOR, 1)[0]) < SENTENCES),
                         encoding="utf-8")
    with gzip.open(EXAMPLES / "shortlist.fr.gz", "rt", encoding="utf-8") as f:
        shortlist = [next(f) for _ in range(40)]  # a short shortlist: the UNK penalty is not 0 everywhere
    vocab = tmp_path / "shortlist.txt"
    vocab.write_text("".join(shortlist), encoding="utf-8")
    scored = tmp_path / "val.scored.nbest"
    code = main(["score-nbest", str(nbest), "--source", str(system.source), "--lm", str(LM), "--lm-oov",
                 "--word-penalty", "--unk-vocab", str(vocab), "-o", str(scored)])
    assert code == 0, capsys.readouterr().err
    hypotheses = read_nbest(scored)
    assert len(hypotheses) == len(read_nbest(nbest))
    added = ["LM1_0", "LM1_1", "WP1_0", "UNK1_0"]
    names = ["Distortion0_0", "LM0_0", "WordPenalty0_0", "PhrasePenalty0_0", *[f"TranslationModel0_{i}" for i in
                                                                               range(4)], *added]
    assert all(h.names() == names for h in hypotheses)
    for h in hypotheses:  # the values are in Moses' domains: the same LM and word penalty as Moses' own
        features = dict(h.features)
        assert features["LM1"][0] == pytest.approx(features["LM0"][0], abs=1e-3)
        assert features["WP1"] == features["WordPenalty0"]
    assert any(dict(h.features)["UNK1"][0] != 0 for h in hypotheses)

    features_dat, scores_dat = tmp_path / "features.dat", tmp_path / "scores.dat"
    run_tool([BIN / "extractor", "--sctype", "BLEU", "--scconfig", "case:true", "--scfile", scores_dat,
              "--ffile", features_dat, "-r", system.reference, "-n", scored], cwd=tmp_path)
    blocks: list[tuple[int, list[str], list[list[float]]]] = []
    for line in features_dat.read_text(encoding="utf-8").splitlines():
        tokens = line.split()
        if tokens[0] == "FEATURES_TXT_BEGIN_0":
            sentence, count, dimension = (int(t) for t in tokens[1:4])
            assert dimension == len(tokens[4:])
            blocks.append((sentence, tokens[4:], []))
        elif tokens[0] != "FEATURES_TXT_END_0":
            assert not any("=" in t for t in tokens), f"extractor read a sparse feature: {line}"
            blocks[-1][2].append([float(t) for t in tokens])
    assert [sentence for sentence, _, _ in blocks] == list(range(SENTENCES))
    for sentence, header, rows in blocks:
        assert header == names  # every added feature dense, under its own name
        expected = [h.values() for h in hypotheses if h.sentence == sentence]
        assert len(rows) == len(expected)
        for row, values in zip(rows, expected, strict=True):
            assert row == pytest.approx(values, rel=1e-5, abs=1e-9)

    # mert optimises all of them
    init = tmp_path / "init.opt"
    init.write_text("\n".join(" ".join([value] * len(names)) for value in ("0.1", "-1", "1")) + "\n")
    argv = [str(a) for a in [BIN / "mert", "-d", len(names), "--sctype", "BLEU", "--scconfig", "case:true",
                             "--ffile", features_dat, "--scfile", scores_dat, "--ifile", init, "-n", 2, "-r", 1,
                             "--threads", 1]]
    done = subprocess.run(argv, capture_output=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    weights = [float(w) for w in (tmp_path / "weights.txt").read_text().split()]
    assert len(weights) == len(names) and any(w != 0 for w in weights[-len(added):])
    # the BLEU mert reports for its weights is the BLEU rerank computes for them on the scored list
    best = [line for line in done.stderr.decode().splitlines() if line.startswith("Best point:")][-1]
    mert_bleu = 100 * float(best.rsplit("=>", 1)[1])
    pool = NBestPool(BleuStatistics([read_text(system.reference)]))
    pool.add(scored)
    ours = 100 * math.exp(log_bleu(pool.data().corpus_stats(np.array(weights))))
    assert ours == pytest.approx(mert_bleu, abs=0.01)


@pytest.mark.parametrize("files", [True, False], ids=["nbest-and-source-files", "stdin-and-stdout"])
def test_tune_drives_moses_which_uses_the_weights_it_is_given(system: System, tmp_path: Path, files: bool,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    moses = f"{shlex.quote(str(BIN / 'moses'))} -f {shlex.quote(str(system.moses_ini))} -threads 1"
    # Before each decoding run, Moses shows the weights it takes from the same -weight-overwrite argument
    shown = f"{moses} -show-weights -weight-overwrite {{weights_overwrite}} > {{weights_file}}.shown 2> /dev/null"
    if files:
        decode = f"{moses} -input-file {{source}} -n-best-list {{nbest}} {{nbest_size}} distinct"
    else:
        decode = f"{moses} -n-best-list - {{nbest_size}} distinct"
    decoder = f"{shown} && {decode} -weight-overwrite {{weights_overwrite}}"
    work, tuned = tmp_path / "work", tmp_path / "tuned.yaml"
    code = main(["tune", "--decoder", decoder, "--source", str(system.source), "-r", str(system.reference),
                 "--moses-ini", str(system.moses_ini), "-o", str(tuned), "--work-dir", str(work),
                 "--iterations", "2", "--nbest-size", "10", "--restarts", "2", "--seed", "1"])
    assert code == 0, capsys.readouterr().err

    initial = {label: values for label, values in show_weights(system.moses_ini).items() if values is not None}
    passed_by_run = []
    for run in (1, 2):
        passed = flat(yaml.safe_load((work / f"run{run}.weights.yaml").read_text()))
        used = parse_shown_weights((work / f"run{run}.weights.yaml.shown").read_text())
        # every weight Moses can tune is passed, and Moses shows each as passed
        tuneable = {label for label, values in used.items() if values is not None}
        assert tuneable <= set(passed)
        for label in tuneable:
            assert as_vector(used, label) == pytest.approx(passed[label], abs=1e-6), (run, label)
        # ... and decodes with them: the total of every n-best line is its features weighted so
        hypotheses = read_nbest(work / f"run{run}.best10.out.gz")
        assert sorted({h.sentence for h in hypotheses}) == list(range(SENTENCES))
        for h in hypotheses:
            assert h.total == pytest.approx(model_score(h, passed), abs=1e-3), (run, h)
        passed_by_run.append({label: passed[label] for label in tuneable})
    first, second = passed_by_run
    assert set(first) == set(initial)
    for label in first:  # the first run decodes with moses.ini's weights
        assert first[label] == pytest.approx(initial[label], abs=1e-6), label
    assert max(abs(a - b) for label in first for a, b in zip(first[label], second[label], strict=True)) > 1e-3

    # the tuned moses.ini loads in Moses with the tuned weights
    final = flat(yaml.safe_load(tuned.read_text()))
    loaded = show_weights(tuned.with_suffix(".moses.ini"))
    for label, values in final.items():
        assert as_vector(loaded, label) == pytest.approx(values, abs=1e-6), label
