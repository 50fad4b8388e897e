"""Command templates (``tune --decoder``, ``--submit``): values never run as commands, a template's own quotes
around a placeholder are handled, and the decoder's whole process tree ends with rerank."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rerank.cli import main
from rerank.errors import RerankError
from rerank.tune.loop import DecoderCommand
from rerank.tune.templates import Template

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tune"
DECODER = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'toy_decoder.py'))}"
HOSTILE = "a b $(touch PWNED) `touch PWNED` 'q' \"d\" ; touch PWNED"


@pytest.mark.parametrize("template", ["run {x}", "run '{x}'", 'run "{x}"'])
def test_every_value_is_one_quoted_word_however_the_template_quotes_it(template: str, tmp_path: Path) -> None:
    line = Template(template, "--decoder", ("x",)).render({"x": HOSTILE})
    words = shlex.split(line)
    assert words == ["run", HOSTILE]
    subprocess.run(line.replace("run", "true", 1), shell=True, cwd=tmp_path, check=True)
    assert not (tmp_path / "PWNED").exists()


def test_a_placeholder_inside_a_longer_quoted_string_is_refused() -> None:
    with pytest.raises(RerankError, match=r"--decoder: the placeholder \{nbest\} is inside a quoted string"):
        DecoderCommand('moses "--n-best-list={nbest}" -weight-overwrite {weights_overwrite}')
    with pytest.raises(RerankError, match="never closed"):
        DecoderCommand("moses {weights_overwrite} 'oops")


def test_shell_variables_are_not_placeholders() -> None:
    template = Template("srun --job-name ${command} {command}", "--submit", ("command",))
    assert template.render({"command": ["sh", "/w/a b.sh"]}) == "srun --job-name ${command} sh '/w/a b.sh'"
    quoted = Template("bash -c '{command}'", "--submit", ("command",))
    assert shlex.split(quoted.render({"command": ["sh", "/w/a b.sh"]})) == ["bash", "-c", "sh '/w/a b.sh'"]


@pytest.fixture
def tuning_set(regression_slice, tmp_path: Path) -> dict[str, Path]:
    data = regression_slice / "tests/mert.extractor-txt/data"
    source = tmp_path / "dev.src"
    source.write_text("".join(f"source sentence {i}\n" for i in range(10)))
    return {"space": data / "nbest.1.gz", "reference": data / "reference", "source": source}


def test_a_hostile_work_directory_in_a_quoted_placeholder_runs_nothing(tuning_set, tmp_path: Path) -> None:
    work = tmp_path / "w $(touch PWNED) `touch PWNED`"
    decoder = (f"cd {shlex.quote(str(tmp_path))} && {DECODER} --space {tuning_set['space']} --nbest-size "
               "{nbest_size} --weight-overwrite '{weights_overwrite}' > \"{nbest}\"")
    code = main(["tune", "--decoder", decoder, "--source", str(tuning_set["source"]), "-r",
                 str(tuning_set["reference"]), "--init", str(FIXTURES / "init.yaml"), "-o", str(tmp_path / "t.yaml"),
                 "--work-dir", str(work), "--nbest-size", "20", "--restarts", "2", "--iterations", "1"])
    assert code == 0 and not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_a_hostile_label_is_refused_before_any_command_runs(tuning_set, tmp_path: Path, capsys) -> None:
    init = tmp_path / "init.yaml"
    init.write_text("'lm$(touch PWNED)': 1\nd: 1\n")
    decoder = f"cd {shlex.quote(str(tmp_path))} && touch RAN && echo \"{{weights_overwrite}}\""
    code = main(["tune", "--decoder", decoder, "--source", str(tuning_set["source"]), "-r",
                 str(tuning_set["reference"]), "--init", str(init), "-o", str(tmp_path / "t.yaml")])
    assert code == 2 and "cannot go to the decoder" in capsys.readouterr().err
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "RAN").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it: a job started in the background of a shell (or under nohup)
    inherits SIGINT ignored, and rerank, as every program, keeps it ignored there."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to see which processes live")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_decoder_and_its_children_end_with_rerank(tuning_set, tmp_path: Path, sig: int) -> None:
    pids = tmp_path / "pids"
    # the decoder starts a grandchild and waits for it, as a shell script around moses would
    decoder = (f"sleep 300 & echo $$ $! > {shlex.quote(str(pids))}; wait # {{weights_file}}")
    process = subprocess.Popen(
        [sys.executable, "-m", "rerank", "tune", "--decoder", decoder, "--source", str(tuning_set["source"]),
         "-r", str(tuning_set["reference"]), "--init", str(FIXTURES / "init.yaml"), "-o", str(tmp_path / "t.yaml")],
        stderr=subprocess.PIPE, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and len(pids.read_text().split()) == 2):
            assert time.monotonic() < deadline and process.poll() is None, "the decoder never started"
            time.sleep(0.05)
        children = [int(pid) for pid in pids.read_text().split()]
        assert all(_alive(pid) for pid in children)
        process.send_signal(sig)
        process.wait(timeout=60)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in children)
    finally:
        process.kill()
        process.wait()
