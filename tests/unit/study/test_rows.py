"""The rows of the results table: the base rows and the rows each option adds, every key once, each extra
feature added once and left out once."""

from __future__ import annotations

from rerank.rescore.union import UNREACHABLE
from rerank.study.rows import (
    ABLATED,
    CONSENSUS_FEATURES,
    EXTRA_FEATURES,
    NEW_FEATURES,
    ROWS,
    consensus_rows,
    extended_rows,
    forced_rows,
    size_rows,
)

EXTRAS = tuple(EXTRA_FEATURES.values())


def test_every_row_has_its_own_key() -> None:
    rows = (*ROWS, *extended_rows(EXTRAS), *consensus_rows(NEW_FEATURES), *forced_rows(NEW_FEATURES, True),
            *size_rows(NEW_FEATURES, [1, 10], True))
    keys = [row.key for row in rows]
    assert len(keys) == len(set(keys)) == 5 + (4 + 1 + 7 + 1) + 2 + 2 + 4


def test_no_extra_feature_adds_no_row() -> None:
    assert extended_rows(()) == ()


def test_each_extra_feature_is_added_once_and_each_left_out_once() -> None:
    rows = {row.key: row for row in extended_rows(("Ens0", "R2L0"))}
    assert rows["plus-Ens0"].features == (*NEW_FEATURES, "Ens0") and rows["plus-R2L0"].features[-1] == "R2L0"
    everything = set(rows["extended"].features)
    assert everything == {*NEW_FEATURES, "Ens0", "R2L0"}
    for label in (*ABLATED, "Ens0", "R2L0"):
        assert set(rows[f"without-{label}"].features) == everything - {label}
    union = rows["union-extended"]
    assert union.nbest == "union" and not union.moses_features and union.features[:2] == ("InMoses", "InRNNsearch")


def test_consensus_forced_and_size_rows() -> None:
    moses, union = consensus_rows(("RNN0",))
    assert (moses.nbest, moses.features) == ("moses-mbr", ("RNN0", *CONSENSUS_FEATURES)) and moses.moses_features
    assert union.nbest == "union-mbr" and not union.moses_features
    (alone,) = forced_rows(("RNN0",), consensus=False)
    assert alone.features == (UNREACHABLE, "InMoses", "InRNNsearch", "RNN0") and alone.moses_features
    assert [row.nbest for row in forced_rows(("RNN0",), consensus=True)] == ["union-moses", "union-moses-mbr"]
    rows = size_rows(("RNN0",), [5], consensus=False)
    assert [(row.key, row.nbest, row.features) for row in rows] == [("moses5-alone", "moses5", ()),
                                                                    ("moses5", "moses5", ("RNN0",))]
    assert size_rows(("RNN0",), [5], consensus=True)[1].features == ("RNN0", *CONSENSUS_FEATURES)
