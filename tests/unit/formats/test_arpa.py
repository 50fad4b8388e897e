"""ARPA files read for their structure (the n-grams a back-off model holds): a file cut short or a bad line is
refused at its line."""

from __future__ import annotations

import gzip
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


def test_a_language_model_is_told_from_its_first_line(tmp_path: Path) -> None:
    """An ARPA file (gzipped or not, blank lines first) or a KenLM binary model passes; a text file is refused at
    its first line, an empty file as one, and a binary model where ARPA text is needed."""
    from rerank.formats.arpa import KENLM_BINARY_MAGIC, check_language_model

    (tmp_path / "lm.arpa.gz").write_bytes(gzip.compress(b"\n\n\\data\\\nngram 1=1\n"))
    (tmp_path / "lm.binary").write_bytes(KENLM_BINARY_MAGIC + b" format version 5\n\0")
    (tmp_path / "text.fr").write_text("\nun homme .\n")
    (tmp_path / "empty").write_text("\n")
    check_language_model(tmp_path / "lm.arpa.gz")
    check_language_model(tmp_path / "lm.binary")
    with pytest.raises(FormatError, match=r"text.fr:2: expected an ARPA language model \(\\data\\ first\) or a "
                                          r"KenLM binary model, got 'un homme .'"):
        check_language_model(tmp_path / "text.fr")
    with pytest.raises(FormatError, match=r"empty: expected an ARPA language model .*, got 'an empty file'"):
        check_language_model(tmp_path / "empty")
    with pytest.raises(FormatError, match=r"lm.binary: expected an ARPA language model \(text\): a KenLM binary"):
        check_language_model(tmp_path / "lm.binary", binary=False)
