"""ARPA files read for their structure (the n-grams a back-off model holds): a file cut short or a bad line is
refused at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.errors import FormatError
from rerank.formats.arpa import read_arpa_structure


def test_an_arpa_file_cut_short_is_refused_at_its_line(tmp_path: Path, arpa: Path) -> None:
    lines = arpa.read_text().splitlines()
    cut = tmp_path / "cut.arpa"
    cut.write_text("\n".join(lines[:12]) + "\n")
    with pytest.raises(FormatError, match=r"cut\.arpa:13: expected .*grams as the header says|cut\.arpa"):
        read_arpa_structure(cut)
    bad = tmp_path / "bad.arpa"
    bad.write_text("\n".join(lines[:8] + ["-0.5 two words -0.1"] + lines[9:]) + "\n")
    with pytest.raises(FormatError, match=r"bad\.arpa:9: expected log10 p, 1 word"):
        read_arpa_structure(bad)
