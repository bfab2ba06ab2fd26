"""compute.transposed: a parallel transposed copy, the same floats as .T.contiguous()."""

from __future__ import annotations

import torch

from prefshap_core.compute import transposed


def test_transposed_is_the_contiguous_transpose_bit_for_bit():
    generator = torch.Generator().manual_seed(3)
    for shape in [(780, 700), (1, 5), (5, 1), (0, 4)]:
        matrix = torch.randn(shape, dtype=torch.float64, generator=generator)
        out = transposed(matrix)
        assert out.shape == (shape[1], shape[0]) and out.is_contiguous()
        assert torch.equal(out, matrix.T.contiguous())
    # A strided input (a column slice) transposes the same way.
    wide = torch.randn((40, 30), dtype=torch.float32, generator=generator)[:, ::3]
    assert torch.equal(transposed(wide), wide.T.contiguous())
    assert transposed(wide).dtype == torch.float32
