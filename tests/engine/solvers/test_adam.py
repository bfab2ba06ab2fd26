"""The hand-written Adam is torch.optim.Adam's update, bit for bit."""

import torch

from prefshap_core.solvers.adam import Adam


def _trajectory(make, steps: int = 60) -> list[torch.Tensor]:
    theta = torch.tensor([0.3, -1.2, 2.0, 0.01], dtype=torch.float64, requires_grad=True)
    optimiser = make(theta)
    target = torch.tensor([1.0, 0.5, -0.25, 3.0], dtype=torch.float64)
    seen = []
    for _ in range(steps):
        optimiser.zero_grad()
        # A non-quadratic loss, so the gradients vary in size and sign along the way.
        loss = (torch.cosh(theta - target) + 0.1 * theta**4).sum()
        loss.backward()
        optimiser.step()
        seen.append(theta.detach().clone())
    return seen


def test_the_same_steps_as_torch_optim_adam_bitwise():
    ours = _trajectory(lambda t: Adam(t, lr=0.08))
    reference = _trajectory(lambda t: torch.optim.Adam([t], lr=0.08))
    for mine, theirs in zip(ours, reference, strict=True):
        assert torch.equal(mine, theirs)
    assert not torch.equal(ours[0], ours[-1])  # it moved


def test_no_gradient_no_step():
    theta = torch.ones(3, dtype=torch.float64, requires_grad=True)
    optimiser = Adam(theta, lr=0.5)
    optimiser.step()
    assert torch.equal(theta.detach(), torch.ones(3, dtype=torch.float64))
    assert optimiser.steps == 0
