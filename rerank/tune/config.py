"""Settings of ``rerank tune``: the optimisers, BLEU, and the decoder loop. Defaults are Moses', but that
PRO and MIRA standardise the features (``standardize: false`` gives Moses' ``pro`` and ``kbmira``).

``configs/tuning/tune.yaml`` spells out every default; command-line flags override single values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rerank.config import InvalidValue, at_least, below

Optimizer = str  # a name of rerank.tune.registry.OPTIMIZERS


@dataclass(frozen=True)
class BleuConfig:
    """How hypotheses are compared with the references."""

    tokenize: str = "none"   # a sacrebleu tokenizer; "none": split on whitespace, for tokenized text, as Moses' mert
    lowercase: bool = False  # case-insensitive BLEU (Moses' mert: case:false)

    def __post_init__(self) -> None:
        from rerank.tune.stats import check_tokenizer

        check_tokenizer(self.tokenize)


@dataclass(frozen=True)
class MertConfig:
    """Och (2003) with Moses' settings (``mert -n 20``, ``mert-moses.pl --range``)."""

    restarts: int = 20             # runs of coordinate ascent: the first from the initial weights, the rest random
    bounds: tuple[float, float] = (0.0, 1.0)  # random starting weights are uniform in [low, high] ...
    feature_bounds: dict[str, tuple[float, float]] = field(default_factory=dict)  # ... or per label: {LM0: [-1, 1]}
    random_directions: int = 0     # random unit directions searched besides the axes (Cer et al. 2008)
    min_gain: float = 1e-4         # stop a run when an iteration gains less BLEU, in points (0-100, as printed);
                                   # Moses' mert stops at 1e-4 on its 0-1 scale, 100 times sooner
    max_iterations: int = 1000     # a bound on iterations per run, never reached in practice
    average: int = 1               # the weights (L1-normalised) of the best N runs averaged; 1: the best run's
    # K (at least 2): the best run is that of the starting point whose runs on K-1 folds of the sentences choose
    # the best held-out 1-bests, all K folds' pooled (K+1 times the runs); 0: that of the highest tuning-set BLEU
    restart_folds: int = 0

    def __post_init__(self) -> None:
        at_least(self, 1, "restarts")
        for label, pair in {"bounds": self.bounds, **self.feature_bounds}.items():
            if len(pair) != 2:
                raise ValueError(f"bounds for {label}: expected [low, high], got {list(pair)}")
            low, high = pair
            if low > high:
                raise ValueError(f"bounds for {label}: low {low} is above high {high}")
        at_least(self, 0, "random_directions")
        at_least(self, 1, "average")
        if self.restart_folds == 1 or self.restart_folds < 0:
            raise InvalidValue("restart_folds", "0 (the tuning set's best run) or at least 2", self.restart_folds)


@dataclass(frozen=True)
class ProConfig:
    """Hopkins & May (2011), as Moses' ``pro`` and its MegaM call (``-maxi 30 -nobias binary``)."""

    samples: int = 5000    # hypothesis pairs drawn per sentence (Γ)
    keep: int = 50         # of those, the pairs with the largest sentence-BLEU difference kept (Ξ)
    min_diff: float = 0.05  # pairs closer than this in sentence BLEU are not kept (α)
    l2: float = 1.0        # Gaussian prior precision of the logistic regression (MegaM's default λ)
    max_iterations: int = 100  # Newton steps (each converges far more than one of MegaM's)
    standardize: bool = True   # divide each feature by its standard deviation for the regression (False: Moses')

    def __post_init__(self) -> None:
        at_least(self, 1, "samples", "keep", "max_iterations")
        at_least(self, 0, "min_diff", "l2")


@dataclass(frozen=True)
class MiraConfig:
    """Cherry & Foster (2012), batch k-best MIRA as Moses' ``kbmira``."""

    c: float = 0.01        # step-size cap C
    decay: float = 0.999   # decay of the background BLEU statistics
    epochs: int = 60       # passes over the sentences (J); the averaged weights of the best epoch win
    standardize: bool = True  # run on each feature divided by its standard deviation (False: Moses')
    shuffle: bool = True   # visit the sentences in a new random order each epoch (False: in order, kbmira --no-shuffle)

    def __post_init__(self) -> None:
        at_least(self, 1, "epochs")
        at_least(self, 0, "c", "decay", strictly=True)
        below(self, 1, "decay", or_equal=True)


@dataclass(frozen=True)
class LoopConfig:
    """The decoder-in-the-loop iterations, as ``mert-moses.pl``."""

    max_iterations: int = 25    # decoder runs at most
    min_change: float = 1e-5    # stop when no weight moves by this much
    nbest_size: int = 100       # {nbest_size} in the decoder command

    def __post_init__(self) -> None:
        at_least(self, 1, "max_iterations", "nbest_size")


@dataclass(frozen=True)
class CrossValidationConfig:
    """k-fold cross-validation of tuning on fixed n-best lists (:mod:`rerank.tune.crossval`)."""

    folds: int = 0  # k: tune on k-1 folds of the sentences, rerank the held-out one, rotate; 0: none
    seed: int = 1   # the random assignment of sentences to folds (kept across tuning seeds)
    # settings chosen by the cross-validated BLEU before the final tuning, e.g. {pro.l2: [0.01, 0.1, 1, 10]}; with
    # several keys, every combination
    choose: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.folds == 1 or self.folds < 0:
            raise InvalidValue("folds", "0 (none) or at least 2", self.folds)
        at_least(self, 0, "seed")
        if self.choose and not self.folds:
            raise InvalidValue("choose", "folds of at least 2 to choose by", self.choose)
        for key, values in self.choose.items():
            if not values:
                raise InvalidValue(f"choose.{key}", "at least one value", list(values))


@dataclass(frozen=True)
class TuneConfig:
    optimizer: Optimizer = "mert"  # mert, pro or mira: a name of rerank.tune.registry.OPTIMIZERS
    seed: int = 1  # every random choice (restarts, directions, PRO's pairs, MIRA's order) comes from it
    average_seeds: int = 1  # runs with seeds seed, seed+1, ...: their L1-normalised weights averaged
    bleu: BleuConfig = field(default_factory=BleuConfig)
    mert: MertConfig = field(default_factory=MertConfig)
    pro: ProConfig = field(default_factory=ProConfig)
    mira: MiraConfig = field(default_factory=MiraConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    cv: CrossValidationConfig = field(default_factory=CrossValidationConfig)
    # tune only these features (labels, or values as TranslationModel0_4); the others keep their starting weights'
    # ratios (mert-moses.pl's --activate-features); empty: every feature is tuned
    activate: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        at_least(self, 0, "seed")
        at_least(self, 1, "average_seeds")
        if self.cv.choose:  # every candidate a valid config, checked before any tuning
            alone = dataclasses.replace(self, cv=CrossValidationConfig())
            for key, values in self.cv.choose.items():
                for value in values:
                    with_choice(alone, key, value)


def with_choice(config: TuneConfig, key: str, value: float) -> TuneConfig:
    """``config`` with the setting ``key`` (a dotted path: ``pro.l2``) at ``value``, one of ``cv.choose``'s
    candidates (an int where the setting is one), its range checked; an InvalidValue names ``cv.choose.KEY``."""
    name = f"cv.choose.{key}"
    if key.split(".")[0] == "cv":
        raise InvalidValue("cv.choose", "settings of the tuning, not of the cross-validation that chooses them", key)
    current: Any = config
    for part in key.split("."):
        if not dataclasses.is_dataclass(current) or part not in {f.name for f in dataclasses.fields(current)}:
            raise InvalidValue(name, "a setting of the tuning config, e.g. pro.l2", key)
        current = getattr(current, part)
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        raise InvalidValue(name, "a number setting", key)
    typed: float | int = float(value)
    if isinstance(current, int):
        if value != int(value):
            raise InvalidValue(name, "whole numbers", value)
        typed = int(value)
    try:
        return _replaced(config, key.split("."), typed)
    except InvalidValue as e:
        raise InvalidValue(name, e.expected, e.value) from None
    except ValueError as e:
        raise InvalidValue(name, f"a value its checks accept ({e})", value) from None


def _replaced(config: Any, path: list[str], value: object) -> Any:
    head, *rest = path
    return dataclasses.replace(config, **{head: _replaced(getattr(config, head), rest, value) if rest else value})
