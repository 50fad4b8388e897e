"""The documentation's figures come from runs: the sample table in docs/results/sample.md is what
`rerank experiment configs/experiments/sample.yaml` (scripts/example.sh) writes, copied there by
examples/sample_table.py with the fingerprint of the experiment's inputs."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from types import ModuleType

import kenlm
import pytest
import yaml

from rerank.cli import main

REPO = Path(__file__).resolve().parents[2]
REMAKE = "bash scripts/example.sh, then python examples/sample_table.py"


def load_sample_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sample_table", REPO / "examples" / "sample_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sample_table = load_sample_table()


def table_rows(text: str) -> list[list[str]]:
    """The cells of a markdown table's rows (header and separator included), stripped."""
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]


def documented() -> tuple[str, str, str | None]:
    return sample_table.documented(sample_table.PAGE.read_text(encoding="utf-8"))


def test_the_page_holds_a_table_of_every_row() -> None:
    table, config, _ = documented()
    rows = table_rows(table)
    assert config == "configs/experiments/sample.yaml"
    assert rows[0][0] == "system" and len(rows) >= 9
    assert {len(row) for row in rows} == {len(rows[0])}


def test_the_table_was_written_from_the_models_and_data_as_they_are() -> None:
    """A change of the sample's data, the shipped models or the config fails here until the page is made anew."""
    _, _, recorded = documented()
    assert recorded == sample_table.fingerprint(), f"the sample's inputs changed since the table was written: {REMAKE}"


def test_the_fingerprint_sees_every_named_file() -> None:
    config = yaml.safe_load((REPO / sample_table.CONFIG).read_text(encoding="utf-8"))
    named = {p.relative_to(REPO).as_posix() for p in sample_table.named_files(config)}
    assert {"examples/data/lm.fr.4.sample.arpa.gz", "examples/data/val.100best.gz", "examples/data/test.fr",
            "examples/models/rnnsearch/model.pt", "examples/models/encdec/vocab.trg.txt"} <= named
    assert not any(name.startswith("runs/") for name in named)


def test_the_table_is_copied_from_the_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "sample.md"
    page.write_text("# Title\n\n<!-- sample table: written by rerank experiment configs/experiments/sample.yaml -->\n"
                    "| old |\n|---|\n<!-- end of the sample table -->\n\nAfter.\n", encoding="utf-8")
    results = tmp_path / "results.md"
    results.write_text("# Results\n\nText.\n\n| system | BLEU |\n|---|---|\n| Moses | 55.73 |\n\nMore.\n",
                       encoding="utf-8")
    monkeypatch.setattr(sample_table, "PAGE", page)
    assert sample_table.main(["--results", str(results)]) == 0
    table, config, recorded = sample_table.documented(page.read_text(encoding="utf-8"))
    assert table == "| system | BLEU |\n|---|---|\n| Moses | 55.73 |\n"
    assert recorded == sample_table.fingerprint()
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\n<!-- sample table")
    assert text.endswith("<!-- end of the sample table -->\n\nAfter.\n")


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The experiment of scripts/example.sh, run afresh (about 2.5 minutes of CPU): its output directory."""
    out = tmp_path_factory.mktemp("sample")
    experiment = yaml.safe_load((REPO / sample_table.CONFIG).read_text(encoding="utf-8"))
    experiment["output_dir"] = str(out)
    config = out / "sample.yaml"
    config.write_text(yaml.safe_dump(experiment), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)  # the config's paths are relative to the repository root
        assert main(["-q", "experiment", str(config)]) == 0
    return out


@pytest.mark.slow
def test_the_sample_table_is_what_the_example_writes(fresh_run: Path) -> None:
    written = table_rows((fresh_run / "results.md").read_text(encoding="utf-8"))
    assert written == table_rows(documented()[0]), f"the documented table is not what the run writes: {REMAKE}"


@pytest.mark.slow
def test_the_sample_lm_scores_the_union_exactly(fresh_run: Path, multi30k_moses: Path) -> None:
    """The union rows score RNNsearch's hypotheses with LM1: the filtered LM gives each the full model's score
    (examples/make_sample.py --lm-nbest; a change of the model that breaks this fails here)."""
    options = kenlm.Config()
    options.show_progress = False
    sample = kenlm.Model(str(REPO / "examples" / "data" / "lm.fr.4.sample.arpa.gz"), options)
    full = kenlm.Model(str(multi30k_moses / "lm" / "train.fr.4.arpa"), options)
    for split in ("dev", "test"):
        with gzip.open(fresh_run / f"{split}.rnnsearch.nbest.gz", "rt", encoding="utf-8") as lines:
            hypotheses = [" ".join(line.split(" ||| ")[1].split()) for line in lines]
        assert len(hypotheses) > 2000
        differ = [h for h in hypotheses if sample.score(h) != full.score(h)]
        assert not differ, f"{len(differ)} of RNNsearch's {split} hypotheses, e.g. {differ[0]!r}: remake the LM " \
                           "with python examples/make_sample.py --lm-nbest (examples/README.md)"
