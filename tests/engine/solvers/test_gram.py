import numpy as np
import pytest
import torch

from prefshap_core.solvers.gram import add_lower_gram


@pytest.mark.parametrize("panel", [4, 13, 96, 512])
def test_lower_gram_by_panels_adds_the_gram(panel):
    rng = np.random.default_rng(3)
    z = torch.as_tensor(rng.standard_normal((50, 13)))
    out = torch.ones((13, 13), dtype=torch.float64)  # it adds to what is there
    add_lower_gram(out, z, panel=panel)
    expected = 1.0 + z.numpy().T @ z.numpy()
    lower = np.tril_indices(13)
    np.testing.assert_allclose(out.numpy()[lower], expected[lower], rtol=1e-13)
    above = np.triu_indices(13, panel)  # above the panels' diagonal blocks: untouched
    assert np.all(out.numpy()[above] == 1.0)


def test_lower_gram_of_a_symmetric_product():
    """``z^T C z`` with a symmetric ``C`` given as ``other = C z``."""
    rng = np.random.default_rng(4)
    z = rng.standard_normal((30, 9))
    c = rng.standard_normal((30, 30))
    c = c + c.T
    out = torch.zeros((9, 9), dtype=torch.float64)
    add_lower_gram(out, torch.as_tensor(z), torch.as_tensor(c @ z), panel=4)
    lower = np.tril_indices(9)
    np.testing.assert_allclose(out.numpy()[lower], (z.T @ c @ z)[lower], rtol=1e-12)
