"""The output layer every command shares: outputs checked before the work, never an input, never a replaced
device, FIFO or link, several outputs committed together, modes kept, a full disk an exit status 2 (torch's archives
too), one run per output."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from helpers import another_run_writing, leftovers
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import RerankError
from rerank.formats.files import atomic_output, check_outputs, committed_together
from rerank.formats.moses_ini import MosesIni
from rerank.formats.weights import load_weights
from rerank.models.averaging import checkpoint_path
from rerank.models.checkpoint import CHECKPOINT, load_state, save_state
from rerank.models.vocab import SPECIALS, Vocabulary

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
TUNE = DATA / "tune"
WEIGHTS = ["--weights", str(DATA / "weights.yaml")]


@pytest.fixture
def nbest(tmp_path: Path) -> Path:
    path = tmp_path / "toy.nbest"
    shutil.copy(DATA / "toy.nbest", path)
    return path


def test_an_output_that_is_the_input_is_refused_and_the_input_kept(nbest: Path, capsys) -> None:
    before = nbest.read_bytes()
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(nbest)]) == 2
    assert "it is also an input" in capsys.readouterr().err
    assert nbest.read_bytes() == before


def test_a_hard_link_or_a_symlink_to_the_input_is_the_same_file(nbest: Path, tmp_path: Path, capsys) -> None:
    before = nbest.read_bytes()
    os.link(nbest, tmp_path / "hard")
    os.symlink(nbest, tmp_path / "soft")
    for alias in ("hard", "soft"):
        assert main(["cut-nbest", str(nbest), "-n", "1", "-o", str(tmp_path / alias)]) == 2
        assert f"the same file as {nbest}" in capsys.readouterr().err
    assert nbest.read_bytes() == before


def test_oracle_never_writes_over_a_reference(nbest: Path, tmp_path: Path, capsys) -> None:
    reference = tmp_path / "ref"
    shutil.copy(DATA / "toy.fr", reference)
    before = reference.read_bytes()
    assert main(["oracle", str(nbest), "-r", str(reference), "-o", str(reference)]) == 2
    assert reference.read_bytes() == before


@pytest.mark.parametrize("command", [["oracle", "{nbest}", "-r", "{ref}", "-o", "-", "--json", "-"],
                                     ["apply", "{nbest}", *WEIGHTS, "-o", "-", "--nbest-out", "-"]],
                         ids=["oracle", "apply"])
def test_two_outputs_on_stdout_are_refused(command: list[str], nbest: Path, capsys) -> None:
    argv = [arg.format(nbest=nbest, ref=DATA / "toy.fr") for arg in command]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "both write to stdout: give all but one of them a file" in captured.err


def test_tune_refuses_its_init_as_output_before_tuning(tmp_path: Path, capsys) -> None:
    ini = tmp_path / "m.ini"
    shutil.copy(TUNE / "moses.ini", ini)
    before = ini.read_bytes()
    # the n-best list does not even exist: the outputs are checked before anything is read
    code = main(["tune", "--nbest", str(tmp_path / "absent.gz"), "-r", str(DATA / "toy.fr"), "--init", str(ini),
                 "-o", str(tmp_path / "w.yaml"), "--output-ini", str(ini)])
    assert code == 2 and "--output-ini" in capsys.readouterr().err
    assert ini.read_bytes() == before


def test_two_outputs_cannot_be_one_file(nbest: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(out), "--nbest-out", str(out)]) == 2
    assert "give each output its own file" in capsys.readouterr().err
    assert not out.exists()


def test_a_fifo_is_streamed_to_not_replaced(nbest: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(received[0].splitlines()) == 3 and leftovers(tmp_path) == []


def device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device to write to: /dev/null (minor 3) or /dev/full (7) itself for a user who cannot replace
    it, a private node of the same device for root, so that a broken output layer never replaces the system's."""
    system = Path("/dev") / name
    if os.geteuid() != 0:
        if not system.exists():
            pytest.skip(f"no {system} on this system")
        return system
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except OSError as e:
        pytest.skip(f"cannot make a device node for root's test: {e.strerror}")
    return node


def test_a_device_is_written_to_not_replaced(nbest: Path, tmp_path: Path) -> None:
    null = device(tmp_path, "null", 3)
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(null)]) == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)


def test_a_full_disk_is_an_error_not_a_traceback(nbest: Path, tmp_path: Path, capsys) -> None:
    full = device(tmp_path, "full", 7)
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(full)]) == 2
    assert f"{full}: cannot write: No space left on device" in capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_a_symlink_is_written_through(nbest: Path, tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    os.symlink(target.name, link)
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(link)]) == 0
    assert os.path.islink(link) and len(target.read_text().splitlines()) == 3


def test_an_existing_output_keeps_its_mode(nbest: Path, tmp_path: Path) -> None:
    out = tmp_path / "private.txt"
    out.write_text("old\n")
    out.chmod(0o600)
    assert main(["apply", str(nbest), *WEIGHTS, "-o", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and len(out.read_text().splitlines()) == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_refused_before_the_work(nbest: Path, tmp_path: Path, capsys) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main(["score-nbest", str(nbest), "--word-penalty", "--shard", "1/2", "-o", str(locked / "o")]) == 2
        assert "is not writable" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_outputs_committed_together_appear_together_or_not_at_all(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    with pytest.raises(RuntimeError), committed_together():
        with atomic_output(first) as out:
            out.write("a\n")
        assert not first.exists()  # held back until the block ends
        with atomic_output(second) as out:
            raise RuntimeError("the second output fails")
    assert not first.exists() and not second.exists() and leftovers(tmp_path) == []
    with committed_together():
        for path in (first, second):
            with atomic_output(path) as out:
                out.write("x\n")
    assert first.read_text() == second.read_text() == "x\n"


def test_tune_writes_its_two_outputs_as_a_pair(regression_slice, tmp_path: Path) -> None:
    data = regression_slice / "tests/mert.extractor-txt/data"
    weights, ini = tmp_path / "w.yaml", tmp_path / "w.moses.ini"
    ini.mkdir()  # the moses.ini cannot be written: the weights must not appear alone
    code = main(["tune", "--nbest", str(data / "nbest.1.gz"), "-r", str(data / "reference"), "--moses-ini",
                 str(TUNE / "moses.ini"), "-o", str(weights), "--iterations", "1", "--restarts", "1"])
    assert code == 2 and not weights.exists()


def test_check_outputs_names_the_option(tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.write_text("x\n")
    with pytest.raises(RerankError, match=r"--output .*in: it is also an input"):
        check_outputs([("--output", str(source))], [str(source)])
    with pytest.raises(RerankError, match="it is a directory"):
        check_outputs([("--output", str(tmp_path))])


@pytest.mark.parametrize("name", ["/proc/self/fd/1", "/dev/stdout", "link"])
def test_an_output_named_through_proc_is_written_to_the_open_file_not_replaced(name: str, nbest: Path,
                                                                                tmp_path: Path) -> None:
    """``-o /dev/stdout`` (a link to /proc/self/fd/1) with stdout appended to a file: the lines go after what the
    file held, as ``-o -`` writes them, and the file is never replaced."""
    if name == "link":
        os.symlink("/proc/self/fd/1", tmp_path / "link")
        name = str(tmp_path / "link")
    log = tmp_path / "x.log"
    log.write_text("PREVIOUS\n")
    inode = log.stat().st_ino
    with open(log, "ab") as stdout:
        result = subprocess.run([sys.executable, "-m", "rerank", "cut-nbest", str(nbest), "-n", "1", "-o", name],
                                stdout=stdout, stderr=subprocess.PIPE, check=False)
    assert result.returncode == 0, result.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "PREVIOUS" and len(lines) == 4  # and the 1-best of each of the 3 sentences
    assert log.stat().st_ino == inode and leftovers(tmp_path) == []


def test_an_output_through_another_process_fd_is_refused(nbest: Path, capsys) -> None:
    assert main(["cut-nbest", str(nbest), "-n", "1", "-o", "/proc/1/fd/1"]) == 2
    assert "not one of rerank's own open files" in capsys.readouterr().err


def test_dev_stdout_and_dash_are_both_stdout(nbest: Path, capsys) -> None:
    assert main(["apply", str(nbest), *WEIGHTS, "-o", "-", "--nbest-out", "/proc/self/fd/1"]) == 2
    assert "both write to stdout" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["score-nbest", "{nbest}", "--word-penalty", "--config", "{config}", "--shard", "1/2", "-o", "{out}"],
    ["translate", "--model", "{config}", "-i", "{nbest}", "--shard", "1/2", "-o", "{out}"]],
    ids=["score-nbest", "translate"])
def test_a_shard_manifest_never_lands_on_an_input(command: list[str], nbest: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "part"
    config = tmp_path / "part.shard.yaml"  # the manifest's name beside OUT
    config.write_text("features: []\n")
    argv = [arg.format(nbest=nbest, config=config, out=out) for arg in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--output (its manifest)" in err and "it is also an input" in err
    assert config.read_text() == "features: []\n" and not out.exists()


# -- one run per output


def _train_config(tmp_path: Path, output_dir: Path) -> Path:
    """A tiny encoder-decoder on the toy sentences that trains until it is stopped, logging every update."""
    toy = {"source": str(DATA / "toy.en"), "target": str(DATA / "toy.fr")}
    config = {"model": {"architecture": "encdec", "embedding_size": 16, "hidden_size": 16, "maxout_size": 8},
              "data": {"train": toy, "valid": dict(toy), "src_vocab_size": 100, "trg_vocab_size": 100},
              "training": {"optimizer": "adam", "batch_size": 2, "max_epochs": 1_000_000, "max_updates": 1_000_000,
                           "valid_every": 1_000_000, "log_every": 1, "threads": 1},
              "output_dir": str(output_dir)}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_two_trainings_into_one_directory_the_second_is_refused_naming_the_first(tmp_path: Path) -> None:
    """Two ``rerank train`` runs (seeds 1 and 2) started together into one output_dir: one trains, the other exits 2
    at once with one line naming it (its process id and command), and the directory holds the first's files
    only."""
    out = tmp_path / "model"
    config = _train_config(tmp_path, out)
    runs = {seed: subprocess.Popen([sys.executable, "-m", "rerank", "train", "--config", str(config), "--seed",
                                    str(seed)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
            for seed in (1, 2)}
    try:
        deadline = time.monotonic() + 300
        while all(run.poll() is None for run in runs.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        (refused, loser), = [(seed, run) for seed, run in runs.items() if run.poll() is not None]
        winner_seed, winner = next((seed, run) for seed, run in runs.items() if seed != refused)
        _, errors = loser.communicate()
        assert loser.returncode == 2 and winner.poll() is None, errors
        assert errors.startswith(f"rerank: error: output_dir {out}: cannot write: another run is writing it (rerank "
                                 f"train --config {config} --seed {winner_seed}: pid {winner.pid} on ")
        assert errors.count("\n") == 1
        assert winner.stderr is not None
        for line in winner.stderr:  # it trains until stopped: stopped after an update, it saves its checkpoint
            if " update 2:" in line:
                winner.send_signal(signal.SIGTERM)
                break
        _, stopped = winner.communicate(timeout=300)
        assert winner.returncode == 128 + signal.SIGTERM, stopped
    finally:
        for run in runs.values():
            run.kill()
    assert yaml.safe_load((out / "config.yaml").read_text())["training"]["seed"] == winner_seed
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "config.yaml", "data", "vocab.src.txt",
                                                     "vocab.trg.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no lock file left


def test_two_tunings_writing_one_pair_of_outputs_the_second_is_refused(regression_slice: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Two ``rerank tune`` runs writing the same ``-o t.yaml --output-ini t.ini``: the first holds both (its starting
    weights come through a FIFO, so that it waits, holding them, until the second has tried); the second exits 2
    naming the first, and t.yaml and t.ini are the first's pair."""
    data = regression_slice / "tests/mert.extractor-txt/data"
    weights, ini, init = tmp_path / "t.yaml", tmp_path / "t.ini", tmp_path / "init"
    os.mkfifo(init)
    common = ["tune", "--nbest", str(data / "nbest.1.gz"), "-r", str(data / "reference"), "--moses-ini",
              str(TUNE / "moses.ini"), "-o", str(weights), "--output-ini", str(ini), "--restarts", "1"]
    first = subprocess.Popen([sys.executable, "-m", "rerank", "-q", *common, "--init", str(init)], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        lock = tmp_path / ".t.yaml.lock"
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text()) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert main([*common, "--init", str(TUNE / "init.yaml")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"rerank: error: --output-ini {ini}: cannot write: another run is writing it (rerank "
                              f"-q {' '.join(common)} --init {init}: pid {first.pid} on ")
        assert err.count("\n") == 1 and not weights.exists() and not ini.exists()
        with open(init, "wb") as fifo:
            fifo.write((TUNE / "init.yaml").read_bytes())
        _, errors = first.communicate(timeout=300)
        assert first.returncode == 0, errors
    finally:
        first.kill()
    tuned = load_weights(weights)
    assert MosesIni.read(ini).weights()["lm"] == pytest.approx(tuned["lm"], rel=1e-9)  # one run's pair
    assert sorted(p.name for p in tmp_path.iterdir()) == ["init", "t.ini", "t.yaml"]


@pytest.mark.parametrize("kind", ["cut-nbest", "average", "prepare", "experiment"])
def test_every_kind_of_output_is_refused_while_another_run_writes_it(kind: str, nbest: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A file (``-o``), a model directory (``average``), prepared data (``prepare``) and a study's output_dir
    (``experiment``): each refused before any work while another run holds it, with the line that names that run."""
    out = tmp_path / "out"
    argv = {"cut-nbest": ["cut-nbest", str(nbest), "-n", "1", "-o", str(out)],
            "average": ["average", str(_averageable(tmp_path / "m")), str(out), "--last", "2"],
            "prepare": ["prepare", str(DATA / "toy.en"), str(DATA / "toy.fr"), "-o", str(out)],
            "experiment": ["experiment", str(REPO / "configs/experiments/sample.yaml"), "--output-dir", str(out)]}[kind]
    before = sorted(p.name for p in tmp_path.iterdir())
    with another_run_writing(out, "rerank train --config a.yaml") as first:
        assert main(["-q", *argv]) == 2
    err = capsys.readouterr().err
    assert "cannot write: another run is writing it (rerank train --config a.yaml: pid " in err
    assert f"pid {first.pid} on " in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no lock file left


# -- a full disk while torch writes


def _averageable(directory: Path, words: int = 1000) -> Path:
    """A model directory (of about 150 KB: a vocabulary of ``words``) with two kept checkpoints to average."""
    vocabulary = Vocabulary([*SPECIALS, *(f"w{i}" for i in range(words))])
    save_model_dir(directory, tiny_model(tiny_config(), len(vocabulary), len(vocabulary)), vocabulary, vocabulary)
    state = load_state(directory / "model.pt")["model"]
    for updates in (1, 2):
        checkpoint_path(directory, updates).parent.mkdir(exist_ok=True)
        save_state({"model": {name: value + updates for name, value in state.items()}},
                   checkpoint_path(directory, updates))
    history = [{"updates": 1.0, "valid_ppl": 3.0}, {"updates": 2.0, "valid_ppl": 2.0}]
    save_state({"progress": {"history": history}}, directory / CHECKPOINT)
    return directory


def test_average_into_a_64k_file_system_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _averageable(tmp_path / "m")
    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 64 KiB tmpfs needs root (the file-size limit test covers the rest)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        assert main(["-q", "average", str(source), str(small / "avg"), "--last", "2"]) == 2
        assert capsys.readouterr().err == (f"rerank: error: {small / 'avg' / 'model.pt'}: cannot write: No space left "
                                           "on device; nothing was kept\n")
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=False)


def _file_size_limit(size: int) -> Callable[[], None]:
    def limit() -> None:  # in the child, before rerank starts: a write beyond it fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return limit


def test_average_beyond_the_file_size_limit_is_one_clear_error(tmp_path: Path) -> None:
    """The same without root: RLIMIT_FSIZE (``ulimit -f``) makes the model's write fail as a full disk does."""
    source = _averageable(tmp_path / "m")
    done = subprocess.run([sys.executable, "-m", "rerank", "-q", "average", str(source), str(tmp_path / "avg"),
                           "--last", "2"], cwd=REPO, capture_output=True, text=True, check=False,
                          preexec_fn=_file_size_limit(50_000), env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2
    model = tmp_path / "avg" / "model.pt"
    assert done.stderr == f"rerank: error: {model}: cannot write: File too large; nothing was kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
