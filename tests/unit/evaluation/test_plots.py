"""Figures: an attention heatmap sized by its words, in the format its suffix names, and BLEU by source length of
real systems scored by sacrebleu; an unknown format or a plot without the source is one clear error."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import leftovers

from rerank.errors import RerankError
from rerank.evaluation.metrics import evaluate
from rerank.evaluation.plots import INCHES_PER_WORD, draw_attention, image_format, plot_bucket_bleu

PNG = b"\x89PNG\r\n\x1a\n"
SOURCE = "a man sleeps .".split()
TARGET = "un homme dort . </s>".split()


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def weights() -> np.ndarray:
    rows = np.random.default_rng(0).random((len(TARGET), len(SOURCE)))
    return rows / rows.sum(axis=1, keepdims=True)


def test_a_heatmap_is_a_png_sized_by_its_words(tmp_path: Path) -> None:
    path = tmp_path / "attention.png"
    draw_attention(weights(), SOURCE, TARGET, path, title="sentence 1")
    inches = (INCHES_PER_WORD * len(SOURCE) + 1.5, INCHES_PER_WORD * len(TARGET) + 1.5)
    assert png_size(path) == (round(inches[0] * 150), round(inches[1] * 150))  # at 150 dpi
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("name,magic", [("a.pdf", b"%PDF"), ("a.SVG", b"<?xml"), ("a.jpg", b"\xff\xd8\xff")])
def test_the_suffix_chooses_the_format(tmp_path: Path, name: str, magic: bytes) -> None:
    draw_attention(weights(), SOURCE, TARGET, tmp_path / name)
    assert (tmp_path / name).read_bytes().startswith(magic)


def test_image_format_reads_the_suffix() -> None:
    assert image_format("out/attention.PNG") == "png"
    assert image_format(Path("a.b/c.svg")) == "svg"
    with pytest.raises(RerankError) as error:
        image_format("figure.docx")
    message = str(error.value)
    assert message.startswith("figure.docx: unknown image format 'docx': use one of ") and "pdf, " in message
    with pytest.raises(RerankError, match=r"^figure: unknown image format '': use one of "):
        image_format("figure")


def test_an_unknown_format_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match="unknown image format 'txt'"):
        draw_attention(weights(), SOURCE, TARGET, tmp_path / "attention.txt")
    assert list(tmp_path.iterdir()) == []


def test_bleu_by_length_of_real_systems(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    slice_ = multi30k_slice
    evaluation = evaluate([("Moses", str(slice_["onebest"])), ("Reference", str(slice_["reference"]))],
                          [str(slice_["reference"])], source=str(slice_["source"]), buckets="5", tokenize="none")
    assert [b.label for b in evaluation.buckets] and evaluation.systems[1].bucket_bleu[0] == pytest.approx(100)
    path = tmp_path / "buckets.png"
    plot_bucket_bleu(evaluation, path)
    assert png_size(path) == (round(6.4 * 120), round(4.0 * 120))
    assert leftovers(tmp_path) == []


def test_bleu_by_length_needs_the_source(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    evaluation = evaluate([("Moses", str(multi30k_slice["onebest"]))], [str(multi30k_slice["reference"])],
                          tokenize="none")
    with pytest.raises(RerankError) as error:
        plot_bucket_bleu(evaluation, tmp_path / "buckets.png")
    assert str(error.value) == "a plot of BLEU by sentence length needs the source text (--source)"
    assert list(tmp_path.iterdir()) == []
