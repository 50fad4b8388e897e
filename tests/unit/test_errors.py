"""Error messages: a mistyped name gets the closest known one."""

from __future__ import annotations

from rerank.errors import did_you_mean


def test_the_closest_name_or_none() -> None:
    assert did_you_mean("score-nbset", ["score-nbest", "score-table"]) == " (did you mean 'score-nbest'?)"
    assert did_you_mean("learnin_rate", ["learning_rate"], "training.") == " (did you mean 'training.learning_rate'?)"
    assert did_you_mean("zzz", ["score-nbest", "tune"]) == ""
