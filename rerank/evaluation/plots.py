"""Figures: BLEU by source length (Bahdanau et al. 2014, Fig. 2) and attention heatmaps (their Fig. 3).

matplotlib is imported inside each function, so that importing this module costs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from rerank.errors import RerankError
from rerank.evaluation.metrics import Evaluation
from rerank.formats.files import atomic_binary_output

INCHES_PER_WORD = 0.32


def draw_attention(weights: np.ndarray, source: Sequence[str], target: Sequence[str], path: str | os.PathLike[str],
                   title: str = "") -> None:
    """A grey-scale heatmap of ``weights`` (target x source) with the words along the axes, written atomically."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(INCHES_PER_WORD * len(source) + 1.5, INCHES_PER_WORD * len(target) + 1.5))
    axes = figure.add_subplot()
    axes.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
    axes.set_xticks(range(len(source)), labels=source, rotation=90)
    axes.set_yticks(range(len(target)), labels=target)
    axes.xaxis.tick_top()
    if title:
        axes.set_xlabel(title)
    figure.tight_layout()
    with atomic_binary_output(path) as out:
        figure.savefig(out, format=image_format(path), dpi=150)


def image_format(path: str | os.PathLike[str]) -> str:
    """The image format matplotlib will write, from the suffix of ``path``."""
    from matplotlib.figure import Figure

    suffix = os.path.splitext(str(path))[1].lstrip(".").lower()
    formats = Figure().canvas.get_supported_filetypes()
    if suffix not in formats:
        raise RerankError(f"{path}: unknown image format {suffix!r}: use one of {', '.join(sorted(formats))}")
    return suffix


def plot_bucket_bleu(evaluation: Evaluation, path: str | os.PathLike[str]) -> None:
    """A PNG with BLEU against source length, one line per system (Bahdanau et al. 2014, Fig. 2)."""
    if not evaluation.buckets:
        raise RerankError("a plot of BLEU by sentence length needs the source text (--source)")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.0))
    axes = figure.add_subplot()
    x = np.arange(len(evaluation.buckets))
    for system in evaluation.systems:
        axes.plot(x, system.bucket_bleu, marker="o", label=system.name)
    axes.set_xticks(x, [b.label for b in evaluation.buckets])
    axes.set_xlabel(f"source sentence length (words of {os.path.basename(evaluation.source or '')})")
    axes.set_ylabel("BLEU")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    with atomic_binary_output(path) as out:
        figure.savefig(out, format="png", dpi=120)
