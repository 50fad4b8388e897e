"""Layers: int8 matrices quantized row by row, and packed again when a weight changes."""

from __future__ import annotations

import torch

from rerank.models.layers import Int8Matrices


def test_rows_are_quantized_each_on_its_own_scale() -> None:
    torch.manual_seed(0)
    weight = torch.randn(6, 32) * torch.tensor([1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0])[:, None]
    bias = torch.randn(6)
    x = torch.randn(5, 32)
    exact = torch.addmm(bias, x, weight.t())
    approx = Int8Matrices().affine("w", x, weight, bias)
    # per-row scales: each output's error is small against its own row's size, even the 1e-3 row
    error = (approx - exact).abs().amax(0)
    size = (x.abs().amax() * weight.abs().sum(1))
    assert (error <= 0.02 * size).all(), (error, size)


def test_a_changed_weight_is_packed_again() -> None:
    weight = torch.eye(4)
    x = torch.ones(1, 4)
    matrices = Int8Matrices()
    first = matrices.affine("w", x, weight)
    with torch.no_grad():
        weight.mul_(2)
    assert torch.allclose(matrices.affine("w", x, weight), 2 * first, rtol=0.02)
