"""The record of a scored n-best list: digests of content (a gzipped file's text), the record read back or refused,
what differs between two entries of a feature, and the record of a list joined from shards."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from rerank.errors import FormatError, RerankError
from rerank.formats.scored import (
    carry_record,
    content_digest,
    describing_record,
    difference,
    file_entry,
    read_record,
    record_path,
    write_joined_record,
    write_record,
)

LINES = "0 ||| a b ||| WP1= -2 ||| -2\n1 ||| c ||| WP1= -1 ||| -1\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_digest_is_of_the_text_gzipped_or_not_and_none_for_what_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text(LINES)
    (tmp_path / "packed.gz").write_bytes(gzip.compress(LINES.encode()))
    assert content_digest(tmp_path / "plain") == content_digest(tmp_path / "packed.gz") == sha256(LINES)
    assert content_digest("-") is None and content_digest(tmp_path / "no") is None
    (tmp_path / "plain").write_text(LINES + "2 ||| d ||| WP1= -1 ||| -1\n")  # a new size: not the kept digest
    assert content_digest(tmp_path / "plain") != sha256(LINES)


def test_a_directory_digest_is_of_its_files_names_and_contents(tmp_path: Path) -> None:
    """A pretrained model's directory (no model.pt): its copy has its digest; a changed or renamed file, another."""
    model = tmp_path / "model"
    (model / "tokenizer").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "tokenizer" / "vocab.json").write_text('{"a": 0}')
    (model / ".hidden.lock").write_text("pid 1")
    digest = content_digest(model)
    assert digest is not None
    copy = tmp_path / "copy"
    (copy / "tokenizer").mkdir(parents=True)
    (copy / "config.json").write_text("{}")
    (copy / "tokenizer" / "vocab.json").write_text('{"a": 0}')
    assert content_digest(copy) == digest
    (copy / "tokenizer" / "vocab.json").write_text('{"a": 1}')
    assert content_digest(copy) != digest
    (model / "config.json").rename(model / "settings.json")
    assert content_digest(model) != digest


def test_a_record_is_read_back_and_describes_its_list_only_while_the_list_is_unchanged(tmp_path: Path) -> None:
    nbest = tmp_path / "scored"
    nbest.write_text(LINES)
    features = {"WP1": {"kind": "word-penalty"}, "LM1": {"kind": "kenlm", "oov": False, "path": file_entry(nbest)}}
    write_record(nbest, sha256(LINES), features)
    assert record_path(nbest) == tmp_path / "scored.features.yaml"
    record = read_record(nbest)
    assert record is not None and record.features == features and record.nbest == sha256(LINES)
    assert describing_record(nbest) == record
    nbest.write_text(LINES.replace("-1", "-9"))
    assert read_record(nbest) == record and describing_record(nbest) is None
    assert read_record(tmp_path / "other") is None


@pytest.mark.parametrize("text", ["features: {}\n", "nbest: {sha256: x}\nfeatures: [WP1]\n", "- 1\n"])
def test_a_record_that_is_not_one_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    record_path(tmp_path / "scored").write_text(text)
    with pytest.raises(FormatError, match=r"scored.features.yaml: expected a record of a scored n-best list"):
        read_record(tmp_path / "scored")


def test_entries_differ_in_content_or_options_not_in_file_names() -> None:
    lm = {"kind": "kenlm", "oov": False, "path": {"file": "/a/lm.arpa", "sha256": "1" * 64}}
    assert difference(lm, {**lm, "path": {"file": "/b/copy.arpa", "sha256": "1" * 64}}) is None
    assert difference(lm, {**lm, "path": {"file": "/a/lm.arpa", "sha256": "2" * 64}}) == \
        f"path /a/lm.arpa (sha256 {'1' * 12}), not /a/lm.arpa (sha256 {'2' * 12})"
    assert difference(lm, {**lm, "oov": True}) == "oov false, not true"
    assert difference(lm, {"kind": "word-penalty"}) == "kind 'kenlm', not 'word-penalty'"
    unknown = {"kind": "nmt", "source": {"file": "<stdin>", "sha256": None}}
    assert difference(unknown, unknown) == "source <stdin> (content unknown: not a file), not <stdin> (content " \
        "unknown: not a file)"  # a source read from a pipe matches nothing


def test_the_record_of_joined_shards_is_theirs_when_they_agree(tmp_path: Path) -> None:
    first, second = "0 ||| a ||| WP1= -1 ||| -1\n", "1 ||| b c ||| WP1= -2 ||| -2\n"
    parts = [tmp_path / "part1", tmp_path / "part2"]
    features = {"WP1": {"kind": "word-penalty"}}
    for part, text in zip(parts, (first, second), strict=True):
        part.write_text(text)
        write_record(part, sha256(text), features)
    (tmp_path / "whole").write_text(first + second)
    assert write_joined_record(parts, tmp_path / "whole")
    assert describing_record(tmp_path / "whole") is not None
    write_record(parts[1], sha256(second), {"WP1": {"kind": "word-penalty", "extra": 1}})
    with pytest.raises(RerankError, match=r"part2: WP1 was not scored as in .*part1 \(extra none, not 1\)"):
        write_joined_record(parts, tmp_path / "whole")
    record_path(parts[1]).unlink()
    assert not write_joined_record(parts, tmp_path / "other")
    assert not record_path(tmp_path / "other").exists()


def test_a_list_cut_or_resorted_from_a_scored_one_keeps_its_record(tmp_path: Path) -> None:
    scored, cut = tmp_path / "scored", tmp_path / "cut.gz"
    scored.write_text(LINES)
    features = {"WP1": {"kind": "word-penalty"}}
    write_record(scored, sha256(LINES), features)
    first = LINES.splitlines(keepends=True)[0]
    cut.write_bytes(gzip.compress(first.encode()))
    assert carry_record(scored, cut)
    record = describing_record(cut)
    assert record is not None and record.features == features and record.nbest == sha256(first)
    assert not carry_record(scored, "-") and not record_path(tmp_path / "-").exists()
    scored.write_text(LINES + first)  # the record no longer describes the list: nothing is carried
    assert not carry_record(scored, tmp_path / "other") and not record_path(tmp_path / "other").exists()
