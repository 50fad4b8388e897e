"""Och's exact line search: the upper envelope of each sentence's hypotheses along a line.

Along ``w + γ·d`` the model score of hypothesis i is a line ``a_i + γ·b_i`` (``a = f·w``,
``b = f·d``), and a sentence's 1-best is the line on top: the upper envelope of its lines
(Och 2003, Sec. 6; Macherey et al. 2008, Alg. 1). The envelope's lines are the vertices of the
upper convex hull of the points ``(b_i, a_i)``, and its breakpoints are where consecutive
vertices' lines cross. Between breakpoints every sentence keeps its 1-best, so corpus BLEU is
constant there; sweeping the merged breakpoints of all sentences from left to right and adding
each sentence's change of statistics gives BLEU on every interval, exactly.

Everything is computed for all sentences, and for the searches along all axes, at once. Lines
are sorted by slope in each sentence (once per feature for the axes); a line can be on the
envelope only if its intercept is a running maximum from the left or from the right of that
order, which leaves a few lines per sentence; the hull of those is found by removing, in rounds,
every line that lies on or below the chord of its two neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.tune.data import TuningData
from rerank.tune.stats import log_bleu

OUTER_STEP = 0.1  # past the last breakpoint, step this far (relative to max(|γ|, 1)) into the open interval


@dataclass(frozen=True)
class LineOptimum:
    """The best point ``w + gamma·d`` of a line and its corpus BLEU (ln, 0-1 scale)."""

    gamma: float
    log_bleu: float
    breakpoints: int


@dataclass(frozen=True)
class _SlopeOrder:
    """Every sentence's hypotheses sorted by slope along G directions, stored rank by rank without padding.

    A column is a (sentence, direction) pair. Sentences are ranked by their number of hypotheses,
    largest first, and column ``c = rank * G + direction``; so rank r (the r-th smallest slope)
    has an entry for each of the first ``widths[r]`` columns, and the entries of rank r + 1 are
    those of the first ``widths[r + 1]`` columns of rank r, one rank further.
    """

    rows: np.ndarray     # (G*N,) int32: flat index into the (K, S) arrays of the hypothesis
    slopes: np.ndarray   # (G*N,) float64: its slope
    columns: np.ndarray  # (G*N,) int32: its column
    widths: np.ndarray   # (K,) entries of each rank
    directions: int      # G


class LineSearch:
    """Exact line searches over one set of n-best lists.

    Hypotheses with the same features as an earlier one of their sentence are left out: a linear
    model never prefers them (the first of equal scores wins, as in :meth:`TuningData.best`).
    """

    def __init__(self, data: TuningData):
        valid = data.valid & ~_repeated_features(data.features, data.valid)
        self.dims = data.dims
        self.valid = np.ascontiguousarray(valid.T)                               # (K, S)
        self.features = np.ascontiguousarray(data.features.transpose(1, 0, 2))   # (K, S, D)
        small = np.int16 if data.stats.max(initial=0) < 2 ** 15 else np.int32  # less memory to gather from
        self.stats = data.stats.transpose(2, 1, 0).reshape(data.stats.shape[2], -1).astype(small)  # (NS, K*S)
        self._columns = np.arange(self.valid.shape[1])
        counts = self.valid.sum(axis=0)
        self._ranked = np.argsort(-counts, kind="stable")                        # (S,) sentences, largest first
        # (K, S): whether the c-th largest sentence has an r-th hypothesis
        self._present = np.arange(len(self.valid))[:, None] < counts[self._ranked][None, :]
        self._axes: _SlopeOrder | None = None

    def hypothesis_scores(self, weights: np.ndarray) -> np.ndarray:
        """``f·w``, hypothesis-major (K, S) as the line search works (the transpose of
        :meth:`TuningData.scores`), -inf where there is no hypothesis."""
        return np.where(self.valid, self.features @ weights, -np.inf)

    def best_stats(self, scores: np.ndarray) -> np.ndarray:
        """Summed statistics of each sentence's best hypothesis under ``scores`` (K, S): (NUM_STATS,)."""
        best = np.argmax(scores, axis=0) * len(self._columns) + self._columns
        return self.stats[:, best].sum(axis=1, dtype=np.int64)

    def axes(self, scores: np.ndarray, here: float | None = None) -> list[LineOptimum]:
        """The best point along each unit vector from the point whose ``scores`` are given: D optima.

        :param here: ln BLEU at that point, if it is known already.
        """
        if self._axes is None:
            self._axes = self._sort(self.features.transpose(0, 2, 1))  # (K, D, S): slopes along each axis
        return self._search(scores, self._axes, here)

    def directions(self, scores: np.ndarray, directions: np.ndarray, here: float | None = None) -> list[LineOptimum]:
        """The best point along each of the directions (G, D) from the point whose ``scores`` are given."""
        return self._search(scores, self._sort((self.features @ directions.T).transpose(0, 2, 1)), here)

    def _sort(self, slopes: np.ndarray) -> _SlopeOrder:
        """Sort each sentence's hypotheses by slope, for G directions: ``slopes`` (K, G, S)."""
        size, directions, sentences = slopes.shape
        slopes = np.where(self.valid[:, None, :], slopes, np.inf)
        rows = np.argsort(slopes, axis=0, kind="stable")                         # (K, G, S); ties keep hypothesis order
        slopes = np.take_along_axis(slopes, rows, axis=0)
        rank, ranked = np.nonzero(self._present)                                 # by rank, then sentence rank
        rank, ranked = np.repeat(rank, directions), np.repeat(ranked, directions)
        direction = np.tile(np.arange(directions), len(rank) // directions)
        sentence = self._ranked[ranked]
        return _SlopeOrder((rows[rank, direction, sentence] * sentences + sentence).astype(np.int32),
                           slopes[rank, direction, sentence], (ranked * directions + direction).astype(np.int32),
                           self._present.sum(axis=1) * directions, directions)

    def _search(self, scores: np.ndarray, order: _SlopeOrder, here: float | None) -> list[LineOptimum]:
        columns = order.directions * len(self._columns)
        # candidates, found in single precision: rounding is monotonic, so a line whose intercept is a
        # running maximum still is one (a few more lines may pass, which the hull removes)
        at = np.flatnonzero(_candidates(scores.astype(np.float32).ravel()[order.rows], order.widths))
        column, rows, b = order.columns[at], order.rows[at], order.slopes[at]    # (C,) by slope, then column
        by_column = np.argsort(column.astype(np.uint16) if columns <= 2 ** 16 else column, kind="stable")
        column, rows, b = column[by_column], rows[by_column], b[by_column]       # by column, then slope
        a = scores.ravel()[rows]
        keep = _upper_hull(column, b, a)
        column, a, b, rows = column[keep], a[keep], b[keep], rows[keep]
        stats: np.ndarray = self.stats[:, rows]                                  # (NUM_STATS, L)
        # each sentence starts on its line of least slope; at each breakpoint it moves to the next
        starts = np.ones(len(column), dtype=bool)
        starts[1:] = column[1:] != column[:-1]
        moves = ~starts[1:]                                                      # (L-1,)
        with np.errstate(divide="ignore", invalid="ignore"):
            gammas = ((a[:-1] - a[1:]) / (b[1:] - b[:-1]))[moves]                # (M,)
        changes = (stats[:, 1:] - stats[:, :-1])[:, moves]                       # (NUM_STATS, M)
        direction = column[1:][moves] % order.directions                         # (M,)
        start = stats[:, starts].reshape(len(stats), -1, order.directions).sum(axis=1, dtype=np.float64)  # (NS, G)
        # the point itself: where lines tie at γ = 0 (all weights 0, say) the first hypothesis wins, and
        # BLEU there may differ from that of both intervals around it
        if here is None:
            here = float(log_bleu(self.best_stats(scores)))
        return [optimum if optimum.log_bleu > here else LineOptimum(0.0, here, optimum.breakpoints)
                for optimum in _sweep(start, direction, gammas, changes)]


def _repeated_features(features: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(S, K) bool: True for a hypothesis whose features equal an earlier one of its sentence."""
    repeated = np.zeros(valid.shape, dtype=bool)
    for s, count in enumerate(valid.sum(axis=1)):
        _, first = np.unique(features[s, :count], axis=0, return_index=True)
        repeated[s, :count] = True
        repeated[s, first] = False
    return repeated


def _candidates(intercepts: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Lines that may be on their sentence's envelope: (G*N,) bool, for the layout of :class:`_SlopeOrder`.

    On the envelope left of γ = 0 a line's intercept is at least that of every line of smaller
    slope, right of it at least that of every line of larger slope (ties are settled later). The
    running maxima go rank by rank, each rank's entries vectorised over columns.
    """
    ends = np.cumsum(widths)
    starts = ends - widths
    ranks = int(np.count_nonzero(widths))
    candidate = np.ones(len(intercepts), dtype=bool)  # every column's first line
    best = intercepts.copy()                          # running maximum from the left
    for r in range(1, ranks):
        now, before = slice(starts[r], ends[r]), slice(starts[r - 1], starts[r - 1] + widths[r])
        candidate[now] = intercepts[now] >= best[before]
        np.maximum(best[before], intercepts[now], out=best[now])
    best[:] = intercepts                              # running maximum from the right
    candidate[starts[ranks - 1]:ends[ranks - 1]] = True
    for r in range(ranks - 2, -1, -1):
        here, after = slice(starts[r], starts[r] + widths[r + 1]), slice(starts[r + 1], ends[r + 1])
        candidate[here] |= intercepts[here] >= best[after]
        candidate[here.stop:ends[r]] = True           # the last line of a column
        np.maximum(best[after], intercepts[here], out=best[here])
    return candidate


def _upper_hull(column: np.ndarray, b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Which points ``(b, a)`` are vertices of the upper convex hull of their column: (C,) bool.

    Points come sorted by column (sentence), then slope ``b``. Round after round, of two
    neighbours with equal slope the lower one is removed (the later one on a tie), and so is
    every point on or below the chord of its two neighbours, until nothing changes.
    """
    index = np.arange(len(column))
    s, x, y = column, b, a
    while len(index) > 1:
        same = s[1:] == s[:-1]
        dx, dy = np.diff(x), np.diff(y)
        equal = same & (dx == 0)
        drop = np.zeros(len(index), dtype=bool)
        if equal.any():
            later_lower = dy <= 0
            drop[1:] = equal & later_lower
            drop[:-1] |= equal & ~later_lower
            same &= ~equal
        # the middle of three points is on or below their chord when the slope does not drop after it
        drop[1:-1] |= same[:-1] & same[1:] & (dy[:-1] * dx[1:] <= dy[1:] * dx[:-1])
        if not drop.any():
            break
        keep = ~drop
        index, s, x, y = index[keep], s[keep], x[keep], y[keep]
    result = np.zeros(len(column), dtype=bool)
    result[index] = True
    return result


def _sweep(start: np.ndarray, direction: np.ndarray, gammas: np.ndarray, changes: np.ndarray) -> list[LineOptimum]:
    """Corpus BLEU on every interval between breakpoints, and the best point of each of G lines.

    Line g has ``m_g`` breakpoints and ``m_g + 1`` intervals; all lines' intervals are laid end to
    end (M + G of them), and one cumulative sum gives the statistics of every interval.

    :param start: summed statistics left of every breakpoint, per line: (NUM_STATS, G).
    :param direction: the line (0..G-1) of each breakpoint: (M,).
    :param gammas: the breakpoints: (M,); ``changes``: the change of statistics at each: (NUM_STATS, M),
        small integers.
    """
    lines = start.shape[1]
    order = np.argsort(gammas)
    order = order[np.argsort(direction[order].astype(np.uint16), kind="stable")]  # by line, then γ
    gammas, changes = gammas[order], changes[:, order]
    counts = np.bincount(direction, minlength=lines)                        # (G,) m_g
    begins = np.cumsum(counts + 1) - (counts + 1)                           # (G,) first interval of each line
    opened = np.ones(len(gammas) + lines, dtype=bool)                       # intervals opened by a breakpoint
    opened[begins] = False
    # per interval: the change that opens it, or, at a line's start, its start minus the previous line's end
    sums = np.zeros_like(start)                                             # (NUM_STATS, G) changes per line
    if len(gammas):
        sums[:, counts > 0] = np.add.reduceat(changes, begins[counts > 0] - np.flatnonzero(counts > 0), axis=1,
                                              dtype=np.float64)
    ends = start + sums
    steps = np.empty((len(changes), len(opened)))
    steps[:, opened] = changes
    steps[:, begins] = start - np.hstack([np.zeros((len(start), 1)), ends[:, :-1]])
    stats = np.cumsum(steps, axis=1)                                        # (NUM_STATS, M+G)
    lows = np.full(len(opened), -np.inf)
    lows[opened] = gammas
    highs = np.full(len(opened), np.inf)
    highs[np.flatnonzero(opened) - 1] = gammas
    scores = np.where(lows < highs, log_bleu(stats.T), -np.inf)             # empty intervals never win
    line = np.repeat(np.arange(lines), counts + 1)
    best = np.maximum.reduceat(scores, begins)                              # (G,)
    winners = np.flatnonzero(scores == best[line])
    points = _inside(lows[winners], highs[winners])
    first = np.lexsort((np.abs(points), line[winners]))                      # by line, the smallest step first
    first = first[np.append(True, line[winners][first][1:] != line[winners][first][:-1])]
    return [LineOptimum(float(points[i]), float(best[g]), int(counts[g])) for g, i in enumerate(first)]


def _inside(lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """A point of each open interval (low, high): 0 if it is there, else the middle, or a step into it."""
    with np.errstate(invalid="ignore"):
        points = np.where(np.isinf(lows), highs - OUTER_STEP * np.maximum(np.abs(highs), 1.0),
                          np.where(np.isinf(highs), lows + OUTER_STEP * np.maximum(np.abs(lows), 1.0),
                                   0.5 * (lows + highs)))
    points = np.where(np.isinf(lows) & np.isinf(highs), 0.0, points)
    return np.where((lows < 0.0) & (highs > 0.0), 0.0, points)
