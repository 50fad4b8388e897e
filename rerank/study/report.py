"""The study's results table: mean ± sd over seeds, one line per system, and the models' summary."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Score:
    dev: list[float] = field(default_factory=list)
    test: list[float] = field(default_factory=list)



def mean_spread(values: Sequence[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def table_row(title: str, scores: dict[str, Score], optimizers: Sequence[str],
               oracle: dict[str, float] | None = None) -> str:
    """``| title | dev | test | test with the other optimisers | oracle dev / test |``; blank where a system has
    no such value."""
    first = scores[optimizers[0]]
    others = [mean_spread(scores[o].test) if o in scores else "" for o in optimizers[1:]]
    pool = f"{oracle['dev']:.2f} / {oracle['test']:.2f}" if oracle else ""
    return " | ".join(["", title, mean_spread(first.dev), mean_spread(first.test), *others, pool, ""]).strip()


def model_summary(models: dict[str, Path]) -> list[str]:
    """One line per model of the study: its size, and how it was trained where the study trained it."""
    from rerank.models.checkpoint import CHECKPOINT, load_model, load_state
    from rerank.models.cslm import load_cslm_net

    lines = []
    for name, directory in models.items():
        if name == "cslm":
            net, vocab = load_cslm_net(directory)
            parameters = sum(p.numel() for p in net.parameters())
            line = f"- {name} ({directory}): {parameters / 1e6:.1f}M parameters, shortlist {len(vocab)}"
            perplexity = "validation perplexity of the network on shortlist n-grams"
        else:
            loaded = load_model(directory)
            parameters = sum(p.numel() for p in loaded.model.parameters())
            line = (f"- {name} ({directory}): {parameters / 1e6:.1f}M parameters, vocabularies "
                    f"{len(loaded.src_vocab)}/{len(loaded.trg_vocab)}")
            perplexity = "validation perplexity"
        if (directory / CHECKPOINT).exists():  # trained by this study
            progress = load_state(directory / CHECKPOINT)["progress"]
            line += (f", {progress['updates']} updates in {progress['seconds'] / 60:.0f} min, best {perplexity} "
                     f"{progress['best_ppl']:.2f}")
        lines.append(line)
    return lines
