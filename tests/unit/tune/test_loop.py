"""The decoder command of the tuning loop: weights passed as Moses reads them, labels and values that cannot
go on a command line refused, and what the template's placeholders say of how the decoder reads and writes."""

from __future__ import annotations

import math
import shlex

import pytest

from rerank.errors import RerankError
from rerank.tune.loop import DecoderCommand, check_decoder_weights, weights_overwrite


def test_the_weights_as_moses_weight_overwrite_reads_them() -> None:
    assert weights_overwrite({"LM0": (0.5,), "TranslationModel0": (0.1, -0.2)}) == \
        "LM0= 0.5 TranslationModel0= 0.1 -0.2"


@pytest.mark.parametrize(("weights", "message"), [
    ({"LM0; rm": (1.0,)}, r"feature label 'LM0; rm' cannot go to the decoder"),
    ({"0LM": (1.0,)}, r"feature label '0LM' cannot go to the decoder"),
    ({"LM0": (1.0, math.nan)}, r"LM0: expected finite weights, got 1.0 nan"),
])
def test_labels_and_weights_a_decoder_cannot_read_are_refused(weights: dict[str, tuple[float, ...]],
                                                              message: str) -> None:
    with pytest.raises(RerankError, match=rf"^init.yaml: {message}"):
        check_decoder_weights(weights, "init.yaml")
    check_decoder_weights({"LM0": (1.0,), "Sparse_feat.x-1": (0.0,)}, "init.yaml")


def test_the_placeholders_say_how_the_decoder_reads_and_writes() -> None:
    files = DecoderCommand("moses -i {source} -n-best-list {nbest} {nbest_size} -weight-overwrite "
                           "'{weights_overwrite}'")
    assert not files.reads_stdin and files.writes_nbest_file
    line = files.render({"source": "dev src", "nbest": "n.gz", "nbest_size": "100",
                         "weights_overwrite": "LM0= 0.5"})
    assert shlex.split(line) == ["moses", "-i", "dev src", "-n-best-list", "n.gz", "100", "-weight-overwrite",
                                 "LM0= 0.5"]
    streams = DecoderCommand("decode --weights {weights_file}")
    assert streams.reads_stdin and not streams.writes_nbest_file
    with pytest.raises(RerankError, match=r"--decoder: the command must pass the weights with \{weights_overwrite\}"):
        DecoderCommand("moses -i {source}")
