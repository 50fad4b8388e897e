"""Feature standardisation for PRO and MIRA: optimise with every feature on one scale.

The raw features of a scored n-best list are far apart in range: a log-probability summed over a
sentence spans tens of nats, a penalty a few units. PRO's Gaussian prior and MIRA's capped steps
along feature differences treat every dimension alike, so a feature with a small range gets too
little weight. Dividing each feature by its standard deviation over the tuning set's distinct
hypotheses puts them on one scale; the weights found for the scaled features, divided by the
same deviations, score the raw features exactly as they scored the scaled ones.

Subtracting the mean would change nothing: PRO learns from feature differences of two
hypotheses of one sentence and MIRA from their margins, and a shift of a feature cancels in both
(it adds the same amount to every hypothesis' score, which no argmax notices).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rerank.tune.data import TuningData

CONSTANT = 1e-12  # a deviation below this fraction of the feature's largest |value| is rounding: a constant


def feature_scales(data: TuningData) -> np.ndarray:
    """Each feature's standard deviation over the distinct hypotheses (D,); 1 for a constant feature."""
    values = data.features[data.valid]                                # (N, D)
    deviation = values.std(axis=0)
    spread = np.abs(values).max(axis=0)
    return np.where(deviation > CONSTANT * spread, deviation, 1.0)


def standardised(data: TuningData, scales: np.ndarray) -> TuningData:
    """``data`` with each feature divided by its scale (padding stays 0)."""
    return replace(data, features=data.features / scales)
