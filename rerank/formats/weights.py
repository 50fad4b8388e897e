"""Log-linear weights: YAML weights files and moses.ini weights, and their vector for an n-best list's features.

A weights file is YAML, one entry per feature label, a number or a list of numbers::

    LM0: 0.15949
    TranslationModel0: [0.126263, 0.0567749, 0.12818, 0.0607768]

or a ``moses.ini``, whose ``[weight]`` section (or old ``[weight-x]`` sections) is read.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import yaml

from rerank.config import parse_yaml, read_config_bytes
from rerank.errors import ConfigError, FormatError, RerankError, brief, check_finite, counted, log_once
from rerank.formats.files import atomic_output, display_name, lines_of
from rerank.formats.moses_ini import SECTION, MosesIni, Weights
from rerank.formats.nbest import FeatureLayout

logger = logging.getLogger(__name__)
FROM_COMMAND_LINE = "--weight"  # the origin of a weight given as --weight LABEL=V


@dataclass(frozen=True)
class WeightsFile:
    """A weights file read once (a pipe, ``<(...)``, or a FIFO is read as a file is): its name, its weights by
    label, the moses.ini it is (None for a YAML weights file) and, for YAML, its lines (to name a label's)."""

    name: str
    weights: Weights
    ini: MosesIni | None
    text: tuple[str, ...] = ()

    def line_of(self, label: str) -> int | None:
        """The line of a YAML weights file where ``label`` is given, if it can be found."""
        pattern = re.compile(rf"\s*['\"]?{re.escape(label)}['\"]?\s*:")
        return next((lineno for lineno, line in enumerate(self.text, 1) if pattern.match(line)), None)


Origin = WeightsFile | str | os.PathLike[str]  # where weights came from: a file as read, --weight, or a file's path


def is_moses_ini(lines: Iterable[str]) -> bool:
    """Whether a file of these lines is a ``moses.ini`` (its first line that is not blank or a comment is a
    ``[section]``) rather than a YAML weights file, whatever its name."""
    for line in lines:
        text = line.strip()
        if text and not text.startswith("#"):
            return SECTION.fullmatch(text) is not None
    return False


def read_weights(path: str | os.PathLike[str]) -> WeightsFile:
    """Weights by label from a YAML weights file or a ``moses.ini`` (told apart by their content), the file read
    once.

    A ``moses.ini`` without any weights is an error: it is not the file the user meant."""
    name = display_name(path)
    data = read_config_bytes(path)
    text = data.decode("utf-8", errors="replace").split("\n")
    if is_moses_ini(text):
        return ini_weights(MosesIni(lines_of(data, name), name))
    loaded = parse_yaml(data, name)
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path}: expected a mapping 'Label: weight' or 'Label: [w1, w2, ...]'")
    weights: Weights = {}
    for label, value in loaded.items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise ConfigError(f"{path}: {brief(label)}: expected a number or a list of numbers, got {brief(value)}")
        if not all(math.isfinite(v) for v in values):
            raise ConfigError(f"{path}: {brief(label)}: expected finite numbers, got {brief(value)}")
        weights[str(label)] = tuple(float(v) for v in values)
    return WeightsFile(name, weights, None, tuple(text))


def ini_weights(ini: MosesIni) -> WeightsFile:
    """The weights of a moses.ini already read; one without any is an error."""
    weights = ini.weights()
    if not weights:
        raise ConfigError(f"{ini.path}: a moses.ini without weights: expected a [weight] section "
                          "(or old [weight-x] sections)")
    return WeightsFile(ini.path, weights, ini)


def load_weights(path: str | os.PathLike[str]) -> Weights:
    """The weights by label of :func:`read_weights`."""
    return read_weights(path).weights


def save_weights(weights: Mapping[str, Sequence[float]], path: str | os.PathLike[str]) -> None:
    """Write weights as YAML (a single value as a number, several as a list), atomically; a NaN or infinite
    weight is a :class:`~rerank.errors.NonFiniteScore` and nothing is written."""
    check_finite(((f"the weight of {label}", values) for label, values in weights.items()), lambda: str(path))
    data = {label: float(v[0]) if len(v) == 1 else [float(x) for x in v] for label, v in weights.items()}
    with atomic_output(path) as out:
        yaml.safe_dump(data, out, sort_keys=False, default_flow_style=None)


def parse_weight_assignment(text: str) -> tuple[str, tuple[float, ...]]:
    """``'LM1=0.5'`` or ``'TM0=0.1,0.2'`` (from the command line) as a label and its values."""
    label, sep, values = text.partition("=")
    try:
        numbers = tuple(float(v) for v in values.replace(",", " ").split())
        if not sep or not label.strip() or not numbers or not all(map(math.isfinite, numbers)):
            raise ValueError
        return label.strip(), numbers
    except ValueError:
        raise RerankError(f"--weight {text!r}: expected Label=value or Label=v1,v2,..., finite numbers") from None


def weight_vector(weights: Mapping[str, Sequence[float]], layout: FeatureLayout, *, source: str,
                  ignore_unknown: bool = False, missing: float | None = None,
                  owner: str = "the n-best list") -> np.ndarray:
    """The weights as a vector aligned with ``layout``'s dense features: the one way weights by label
    become the vector that scores hypotheses (reranking, tuning, search).

    :param ignore_unknown: skip weights of labels the n-best list does not have (a ``moses.ini``
        also weights features Moses does not print, such as ``UnknownWordPenalty0``).
    :param missing: the weight of a feature with no weight; ``None`` makes that an error.
    :param owner: what has the features of ``layout``, for messages.
    """
    unknown = [label for label in weights if label not in layout.labels]
    if unknown and not ignore_unknown:
        raise RerankError(f"{source}: weights for features {owner} does not have: {', '.join(unknown)} "
                          f"(it has {', '.join(layout.labels)})")
    vector = np.empty(layout.dims)
    absent = []
    for label, span in layout.offsets().items():
        values = weights.get(label)
        if values is None:
            if missing is None:
                absent.append(label)
                continue
            values = [missing] * (span.stop - span.start)
        if len(values) != span.stop - span.start:
            raise RerankError(f"{source}: {label} has {counted(span.stop - span.start, 'value')} in {owner} "
                              f"but {counted(len(values), 'weight')}")
        vector[span] = values
    if absent:
        raise RerankError(f"{source}: no weight for the n-best features {', '.join(absent)}; "
                          "add them to a weights file or give --missing-weight")
    return vector


def as_weights(vector: np.ndarray, layout: FeatureLayout) -> Weights:
    """The inverse of :func:`weight_vector`."""
    return {label: tuple(float(v) for v in vector[span]) for label, span in layout.offsets().items()}



def known_weights(weights: Mapping[str, Sequence[float]], origins: Mapping[str, Origin], labels: Sequence[str],
                  nbest_name: str) -> dict[str, Sequence[float]]:
    """The weights of the n-best list's features (``labels``): the one rule for a weight whose feature the list
    lacks, in ``rerank apply``, ``rerank tune`` and the experiment. One from a moses.ini (whose features the list
    need not print) is skipped, with a note; one from a YAML weights file or ``--weight`` (``origins`` says where
    each label's came from: the file as read, ``--weight``, or a file's path) is an error naming the file and the
    line."""
    unknown = [label for label in weights if label not in labels]
    read: dict[str, WeightsFile] = {}

    def source(label: str) -> WeightsFile | None:
        """The file ``label``'s weight came from, read once where a caller gave only its path; None: --weight."""
        origin = origins[label]
        if isinstance(origin, WeightsFile) or origin == FROM_COMMAND_LINE:
            return origin if isinstance(origin, WeightsFile) else None
        if str(origin) not in read:
            read[str(origin)] = read_weights(origin)
        return read[str(origin)]

    strict = [label for label in unknown if (found := source(label)) is None or found.ini is None]
    if strict:
        found = source(strict[0])
        name, line = (found.name, found.line_of(strict[0])) if found is not None else (FROM_COMMAND_LINE, None)
        raise FormatError(name, line, f"weights for features of {nbest_name} ({', '.join(labels)})",
                          got=", ".join(strict))
    if unknown:
        found = source(unknown[0])
        log_once(logger, logging.INFO, "%s: skipping weights of features %s does not print: %s",
                 found.name if found is not None else FROM_COMMAND_LINE, nbest_name, ", ".join(unknown))
    return {label: value for label, value in weights.items() if label in labels}
