"""Every benchmark runs in its quick mode (``--quick``: tiny sizes) and prints its figures, and the GPU script
runs every step on the CPU (``QUICK=1 DEVICE=cpu bash bench/gpu.sh``), so that a change of the code they call
breaks a test here rather than a run on a GPU months later. The figures themselves are not checked (they
are the benchmarks' to print, not a test's to time). The benchmarks read the real data in ../shared: they skip
where it is absent."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
MOSES = SHARED / "tools" / "moses"
SHIPPED_RNNSEARCH = REPO / "examples" / "models" / "rnnsearch"

pytestmark = pytest.mark.slow


def run(command: list[str], cwd: Path = REPO, **environment: str) -> str:
    """``command``'s output (stdout and stderr); the test fails, showing its end, unless it exits with 0."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **environment}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited with {done.returncode}:\n{output[-4000:]}"
    return output


def test_the_gpu_script_runs_every_step_on_the_cpu(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    output = run(["bash", "bench/gpu.sh", str(shared_data)], QUICK="1", DEVICE="cpu", PYTHON=sys.executable,
                 OUT=str(out))
    summary = (out / "summary.txt").read_text(encoding="utf-8").splitlines()
    steps = ["machine", "full-table", "scoring-rnnsearch-small", "scoring-encdec-small", "train", "translate"]
    assert [line.split(":")[0] for line in summary[:-1]] == steps, summary
    assert all(line.split(": ")[1].startswith("ok,") for line in summary[:-1]), summary
    assert "fp32 torch.mm" in (out / "machine.txt").read_text(encoding="utf-8")
    for step in ("scoring-rnnsearch-small", "scoring-encdec-small"):
        text = (out / f"{step}.txt").read_text(encoding="utf-8")
        assert "pairs/s median" in text and "hyps/s median" in text and "fast/reference" in text, text
    train = (out / "train.txt").read_text(encoding="utf-8")
    assert "tokens/s" in train and "fast/reference" in train and "largest relative difference" in train, train
    assert "sent/s" in (out / "translate.txt").read_text(encoding="utf-8")
    assert "all in" in output


BENCHMARKS = {  # script, its arguments beside --quick, and what its output must show
    "bench_compile.py": ([], "compiled/eager by CPU time"),
    "bench_distributed.py": ([], "load average after the runs"),
    "bench_host.py": ([], "outputs identical"),
    "bench_forced.py": ([f"--moses-dir={MOSES}"], "per 1,000 hypotheses"),
    "bench_int8_rescoring.py": ([], "int8 − fp32 per hypothesis"),
    "bench_prepare.py": ([], "training at 30,000 pairs against 29k"),
    "bench_pretrained.py": ([], "ctranslate2 fp32 against hf"),
    "bench_ray.py": ([], "pairs/s"),
    "bench_score_nbest.py": ([], "LM + WP + UNK"),
    "bench_tune.py": ([], "MERT 5 tuning lists"),
    "recipe_table.py": ([f"shipped={SHIPPED_RNNSEARCH}"], "| shipped |"),
}


@pytest.mark.parametrize("script", sorted(BENCHMARKS))
def test_each_benchmark_runs_in_its_quick_mode(script: str, shared_data: Path, tmp_path: Path) -> None:
    arguments, shown = BENCHMARKS[script]
    if script == "bench_forced.py" and not (MOSES / "bin" / "moses").exists():
        pytest.skip(f"{MOSES / 'bin' / 'moses'} not found: this benchmark runs Moses")
    if script == "bench_ray.py" and importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed: pip install 'rerank[ray]'")
    if script == "bench_pretrained.py" and not all(map(importlib.util.find_spec, ("transformers", "ctranslate2"))):
        pytest.skip("the hf and ctranslate2 extras are not installed (bash scripts/setup.sh test,hf,ctranslate2)")
    if script == "bench_int8_rescoring.py":
        arguments = [*arguments, "--work", str(tmp_path / "work")]
    output = run([sys.executable, f"bench/{script}", "--quick", *arguments], cwd=REPO)
    assert shown in output, output[-4000:]


def test_every_benchmark_has_a_quick_mode() -> None:
    """Each benchmark is run here or by the GPU script, and each takes --quick."""
    scripts = {path.name for path in (REPO / "bench").glob("*.py")} - {"quick.py"}
    in_gpu_script = {"machine.py", "bench_scoring.py", "bench_train.py", "bench_translate.py"}
    assert scripts == set(BENCHMARKS) | in_gpu_script
    for script in scripts:
        assert "parse_args(parser" in (REPO / "bench" / script).read_text(encoding="utf-8"), script
