"""Features derived while tuning: tied features (one weight for their mean, shared out after) and per-word forms."""

from __future__ import annotations

import numpy as np
import pytest

from rerank.errors import RerankError
from rerank.formats.nbest import FeatureLayout
from rerank.tune.data import TuningData
from rerank.tune.derived import hold, per_word, tie


def toy() -> TuningData:
    """Two sentences, three hypotheses at most, features A (one value), B (two) and C, D (one each)."""
    rng = np.random.default_rng(0)
    layout = FeatureLayout(("A", "B", "C", "D"), (1, 2, 1, 1))
    return TuningData(layout, rng.normal(size=(2, 3, 5)), np.ones((2, 3, 10), dtype=np.int64), np.array([3, 2]))


def test_a_tie_is_the_mean_of_its_members_and_its_weight_scores_as_the_members_weights():
    data = toy()
    tied = tie(data, {"AD": ["A", "D"]})
    assert tied.data.layout == FeatureLayout(("AD", "B", "C"), (1, 2, 1))
    assert np.allclose(tied.data.features[:, :, 0], (data.features[:, :, 0] + data.features[:, :, 4]) / 2)
    assert np.allclose(tied.data.features[:, :, 1:], data.features[:, :, 1:4])
    weights = np.array([0.6, -0.1, 0.2, 0.3])
    original = tied.weights(weights)
    assert np.allclose(original, [0.3, -0.1, 0.2, 0.3, 0.3])  # the tie's weight shared out: 0.6 / 2 each
    assert np.allclose(data.features @ original, tied.data.features @ weights)
    assert np.allclose(tied.start(np.array([1.0, 2.0, 3.0, 4.0, 5.0])), [6.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("groups, message", [
    ({"X": ["A"]}, "at least two features"),
    ({"X": ["A", "E"]}, "no feature E"),
    ({"X": ["A", "B"]}, "B has several values"),
    ({"C": ["A", "D"]}, "a feature of that name already"),
    ({"X": ["A", "D"], "Y": ["D", "C"]}, "a feature is in two groups"),
    ({"X$(touch PWN)": ["A", "D"]}, r"tie X\$\(touch PWN\): feature label .* must be a letter"),
])
def test_bad_ties_are_refused(groups, message):
    with pytest.raises(RerankError, match=message):
        tie(toy(), groups)


def test_per_word_divides_by_the_words_and_end_of_sentence():
    data = toy()
    words = np.array([[3, 1, 0], [4, 2, 0]])
    derived = per_word(data, "C", words)
    assert derived.layout.labels == ("A", "B", "C", "D", "Cw") and derived.dims == 6
    assert np.allclose(derived.features[:, :, 5], data.features[:, :, 3] / (words + 1))
    with pytest.raises(RerankError, match="no feature B of one value"):
        per_word(data, "B", words)


def test_held_features_become_one_under_their_weights_and_keep_them():
    data = toy()
    weights = np.array([0.5, 0.1, -0.2, 0.3, 0.4])
    held, start = hold(data, weights, ["B_1", "D"])
    assert held.data.layout == FeatureLayout(("B", "D", "Held"), (1, 1, 1))
    assert np.allclose(start, [-0.2, 0.4, 1.0])
    assert np.allclose(held.data.features[:, :, 2], data.features[:, :, [0, 1, 3]] @ [0.5, 0.1, 0.3])
    back = held.weights(np.array([0.7, -0.6, 2.0]))
    assert np.allclose(back, [1.0, 0.2, 0.7, 0.6, -0.6])  # the held ones twice theirs, ratios kept
    assert np.allclose(held.weights(start), weights)  # the start scores as the weights it came from


@pytest.mark.parametrize("tuned, weights, message", [
    (["E"], [1, 1, 1, 1, 1], r"activate E: not a feature or value of the n-best list \(those are A, B_0, "),
    (["A", "B", "C", "D"], [1, 1, 1, 1, 1], "every feature would be tuned"),
    (["A"], [1, 0, 0, 0, 0], "nothing to hold them at"),
])
def test_bad_holds_are_refused(tuned, weights, message):
    with pytest.raises(RerankError, match=message):
        hold(toy(), np.array(weights, dtype=np.float64), tuned)
