"""Forced decoding before Moses runs: the hypotheses Moses cannot be asked for, the decoder found, and the
moses.ini checked (feature functions, no constraint of its own, every path an existing file).

Moses' own features for given hypotheses, with the decoder, are tested in tests/integration/test_forced_decoding.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rerank.errors import FormatError, RerankError
from rerank.rescore.forced import ForcedDecoding, constrained_ini, decodable, find_moses, force_decode

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "data"


@pytest.fixture
def moses_ini(multi30k_slice: dict[str, Path], tmp_path: Path) -> Path:
    """The slice's moses.ini with its tables' paths made real."""
    text = multi30k_slice["moses_ini"].read_text(encoding="utf-8")
    text = text.replace("path=MODEL_DIR/phrase-table.gz", f"path={multi30k_slice['phrase_table']}")
    text = re.sub(r"path=LM_DIR/\S+", f"path={EXAMPLES / 'lm.fr.4.sample.arpa.gz'}", text)
    path = tmp_path / "moses.ini"
    path.write_text(text, encoding="utf-8")
    return path


def test_empty_hypotheses_and_factor_delimiters_are_not_asked(moses_ini: Path) -> None:
    assert decodable(["un", "chien"]) and not decodable([]) and not decodable(["a|b"])
    result = force_decode(ForcedDecoding("true", str(moses_ini)), ["a dog"], [(0, ()), (0, ("a|b",))])
    assert result.derivations == [None, None] and result.layout is None
    assert (result.skipped, result.reachable, result.unreachable) == (2, 0, 2)


def test_a_missing_decoder_or_source_line_is_refused_before_moses_runs(moses_ini: Path) -> None:
    assert Path(find_moses("sh")).name == "sh"
    with pytest.raises(RerankError, match=r"^no-such-moses: the Moses decoder was not found or is not executable"):
        find_moses("no-such-moses")
    with pytest.raises(RerankError, match=r"sentence id 3 has no source line \(the source has 1 line\)"):
        force_decode(ForcedDecoding("true", str(moses_ini)), ["a dog"], [(3, ("un", "chien"))])
    with pytest.raises(RerankError, match=r"filter.pl: cannot read: no such file \(the phrase-table filter script\)"):
        force_decode(ForcedDecoding("true", str(moses_ini), filter_script="filter.pl"), ["a"], [(0, ("un",))])


def test_the_moses_ini_is_checked(moses_ini: Path, tmp_path: Path) -> None:
    assert "feature" in constrained_ini(str(moses_ini)).headers
    text = moses_ini.read_text(encoding="utf-8")
    cases = {
        "old.ini": (re.sub(r"\[feature\].*?\n\n", "", text, flags=re.S),
                    r"old.ini: expected a \[feature\] section"),
        "constrained.ini": (text.replace("[feature]\n", "[feature]\nConstrainedDecoding path=refs.txt\n"),
                            r"constrained.ini:\d+: expected no ConstrainedDecoding feature"),
        "missing.ini": (text.replace(str(EXAMPLES / "lm.fr.4.sample.arpa.gz"), str(tmp_path / "lm.arpa")),
                        r"missing.ini:\d+: expected path= naming an existing file for LM0"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        with pytest.raises(FormatError, match=message):
            constrained_ini(str(tmp_path / name))
    with pytest.raises(RerankError, match=r"nowhere.ini: cannot read: no such file"):
        constrained_ini(str(tmp_path / "nowhere.ini"))
