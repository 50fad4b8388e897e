"""The registry of optimisers: each one's name, its settings (a section of :class:`~rerank.tune.config.TuneConfig`
of the same name) and the function that tunes with them, listed in this one place.

``rerank tune --optimizer``, the ``optimizer`` of a tuning config (checked where it is used: this module is
above :mod:`rerank.tune.config`) and the ``optimizers`` of an experiment config accept exactly the names below.
Adding an optimiser is its module, its settings section in ``TuneConfig`` and one line here. The algorithms are
imported when they run, so that reading the names costs no numpy import.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rerank.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from rerank.tune.config import TuneConfig
    from rerank.tune.data import TuningData

logger = logging.getLogger(__name__)

TuneFunction = Callable[["TuningData", "np.ndarray", "TuneConfig", "np.random.Generator"], "np.ndarray"]


@dataclass(frozen=True)
class OptimizerKind:
    """An optimiser: what it is (for help texts) and its function, ``(data, initial, config, rng) -> weights``
    (D,), L1-normalised; its settings are ``getattr(config, name)``."""

    description: str
    tune: TuneFunction


def _mert(data: TuningData, initial: np.ndarray, config: TuneConfig, rng: np.random.Generator) -> np.ndarray:
    from rerank.tune.mert import MertRun, mert, mert_bounds

    def report(run: int, result: MertRun) -> None:
        logger.debug("MERT run %d/%d: BLEU %.2f after %d iterations (%s start)", run + 1, config.mert.restarts,
                     result.bleu, result.iterations, "initial" if run == 0 else "random")

    return mert(data, initial, config.mert, mert_bounds(data.layout, config.mert), rng, report).weights


def _pro(data: TuningData, initial: np.ndarray, config: TuneConfig, rng: np.random.Generator) -> np.ndarray:
    from rerank.tune.pro import pro

    trained = pro(data, config.pro, rng)
    logger.debug("PRO: %d pairs, logistic regression converged in %d Newton steps", trained.pairs,
                 trained.iterations)
    return trained.weights


def _mira(data: TuningData, initial: np.ndarray, config: TuneConfig, rng: np.random.Generator) -> np.ndarray:
    from rerank.tune.mira import mira

    result = mira(data, initial, config.mira, rng,
                  lambda epoch, bleu: logger.debug("MIRA epoch %d/%d: BLEU %.2f", epoch, config.mira.epochs, bleu))
    logger.debug("MIRA: the weights of epoch %d win", result.epoch)
    return result.weights


OPTIMIZERS: dict[str, OptimizerKind] = {
    "mert": OptimizerKind("MERT (Och 2003)", _mert),
    "pro": OptimizerKind("PRO (Hopkins & May 2011)", _pro),
    "mira": OptimizerKind("batch k-best MIRA (Cherry & Foster 2012)", _mira),
}


def check_optimizer(name: str, source: str | None = None) -> str:
    """``name`` if it is a registered optimiser, else a ValueError listing them (a ConfigError naming ``source``,
    the file or the command line it came from, where given)."""
    if name not in OPTIMIZERS:
        message = f"optimizer: expected one of {', '.join(OPTIMIZERS)}, got {name!r}"
        raise ConfigError(f"{source}: {message}") if source else ValueError(message)
    return name
