"""The rows of the study's results table: which n-best list each tunes, with which features besides Moses'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rerank.rescore.union import UNREACHABLE


@dataclass(frozen=True)
class Row:
    """One line of the results table: which n-best list, and which of its features are tuned."""

    key: str
    title: str
    nbest: str  # the scored list tuned: "moses" (Moses' with the new features), "union", "moses-mbr", "moses100", ...
    features: tuple[str, ...] = ()  # besides Moses' own (for "moses") or alone (for "union")
    moses_features: bool = True


NEW_FEATURES = ("RNN0", "RNNsearch0", "LM1", "WP1", "UNK1")
ROWS = (
    Row("moses-retuned", "Moses features, retuned by us", "moses"),
    Row("rnn", "+ RNN encoder-decoder feature (n-best), retuned", "moses", ("RNN0",)),
    Row("rnnsearch", "+ RNNsearch feature", "moses", ("RNNsearch0",)),
    Row("all", "+ RNN + RNNsearch + LM + word/UNK penalties", "moses", NEW_FEATURES),
    Row("union", "Moses ∪ RNNsearch n-best, reranked", "union", ("InMoses", "InRNNsearch", *NEW_FEATURES),
        moses_features=False),
)


EXTRA_FEATURES = {"ensemble": "Ens0", "right_to_left": "R2L0", "channel": "Chan0", "cslm": "CSLM0"}  # their labels


ABLATED = ("RNN0", "RNNsearch0", "LM1")  # the base features each left out once, beside the extra ones


def extended_rows(extras: Sequence[str]) -> tuple[Row, ...]:
    """The rows of the extra features ``extras`` (labels): the base features with each extra one, all features,
    then all but each of the :data:`ABLATED` and extra ones, and the union with all features."""
    if not extras:
        return ()
    everything = (*NEW_FEATURES, *extras)
    return (*(Row(f"plus-{label}", f"+ RNN + RNNsearch + LM + penalties + {label}", "moses", (*NEW_FEATURES, label))
              for label in extras),
            Row("extended", f"+ {' + '.join(extras)} (all features)", "moses", everything),
            *(Row(f"without-{label}", f"all features but {label}", "moses",
                  tuple(f for f in everything if f != label)) for label in (*ABLATED, *extras)),
            Row("union-extended", "Moses ∪ RNNsearch n-best, all features", "union",
                ("InMoses", "InRNNsearch", *everything), moses_features=False))


CONSENSUS_FEATURES = ("MBRbleu0", "MBRchrf0")


def consensus_rows(everything: Sequence[str]) -> tuple[Row, ...]:
    """Every feature and the consensus features, on Moses' list and on the union."""
    return (Row("consensus", f"+ {' + '.join(CONSENSUS_FEATURES)} (all features and consensus)", "moses-mbr",
                (*everything, *CONSENSUS_FEATURES)),
            Row("union-consensus", "Moses ∪ RNNsearch n-best, all features and consensus", "union-mbr",
                ("InMoses", "InRNNsearch", *everything, *CONSENSUS_FEATURES), moses_features=False))


def forced_rows(everything: Sequence[str], consensus: bool) -> tuple[Row, ...]:
    """The union in which every hypothesis has Moses' features, with every feature (and the consensus ones)."""
    features = (UNREACHABLE, "InMoses", "InRNNsearch", *everything)
    title = "Moses ∪ RNNsearch n-best, Moses' features for every hypothesis, all features"
    rows = [Row("union-moses", title, "union-moses", features)]
    if consensus:
        rows.append(Row("union-moses-consensus", f"{title} and consensus", "union-moses-mbr",
                        (*features, *CONSENSUS_FEATURES)))
    return tuple(rows)


def size_rows(everything: Sequence[str], sizes: Sequence[int], consensus: bool) -> tuple[Row, ...]:
    """On each sentence's first N hypotheses of Moses' list: Moses' features alone, and every feature (and the
    consensus ones)."""
    features = (*everything, *CONSENSUS_FEATURES) if consensus else tuple(everything)
    with_consensus = " and consensus" if consensus else ""
    return tuple(row for size in sizes for row in (
        Row(f"moses{size}-alone", f"Moses features, retuned, Moses' first {size} per sentence", f"moses{size}"),
        Row(f"moses{size}", f"all features{with_consensus}, Moses' first {size} per sentence", f"moses{size}",
            features)))
