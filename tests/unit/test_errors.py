"""Error messages: a mistyped name, or path, gets the closest known one."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.errors import did_you_mean, did_you_mean_path


def test_the_closest_name_or_none() -> None:
    assert did_you_mean("score-nbset", ["score-nbest", "score-table"]) == " (did you mean 'score-nbest'?)"
    assert did_you_mean("learnin_rate", ["learning_rate"], "training.") == " (did you mean 'training.learning_rate'?)"
    assert did_you_mean("zzz", ["score-nbest", "tune"]) == ""


def test_the_closest_existing_path_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models" / "rnnsearch").mkdir(parents=True)
    (tmp_path / "models" / "encdec").mkdir()
    (tmp_path / "test.1best").write_text("a\n")
    models = tmp_path / "models"
    assert did_you_mean_path(models / "rnnserch") == f" (did you mean {str(models / 'rnnsearch')!r}?)"
    assert did_you_mean_path(tmp_path / "modles" / "rnnserch") == f" (did you mean {str(models / 'rnnsearch')!r}?)"
    assert did_you_mean_path(tmp_path / "test.1bes") == f" (did you mean {str(tmp_path / 'test.1best')!r}?)"
    assert did_you_mean_path(models / "transformer") == ""  # nothing close
    assert did_you_mean_path(models / "rnnsearch") == ""  # it exists
    assert did_you_mean_path(tmp_path / "absent" / "rnnsearch") == ""  # no directory above to look in
    monkeypatch.chdir(tmp_path)
    assert did_you_mean_path("models/rnnserch") == " (did you mean 'models/rnnsearch'?)"  # relative, as given
    assert did_you_mean_path("modles") == " (did you mean 'models'?)"
