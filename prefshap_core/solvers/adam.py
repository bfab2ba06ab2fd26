"""Adam (Kingma & Ba 2015) on one small parameter tensor, without ``torch.optim``.

``torch.optim.Adam`` imports ``torch._dynamo`` when the first optimiser is built:
0.7 s of every training that learns column lengthscales (``models.ard``), which
moves a handful of numbers. This is the same update, operation for operation, as
``torch.optim.Adam``'s single-tensor path with its defaults (no weight decay, no
amsgrad), so the trajectories are bitwise the same (``tests/engine/solvers/test_adam.py``).
"""

from __future__ import annotations

import math

import torch


class Adam:
    """``step()`` moves ``param`` along its ``.grad``; ``zero_grad()`` clears it."""

    def __init__(
        self,
        param: torch.Tensor,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.param, self.lr, self.betas, self.eps = param, lr, betas, eps
        self.steps = 0
        self._first = torch.zeros_like(param, memory_format=torch.preserve_format)
        self._second = torch.zeros_like(param, memory_format=torch.preserve_format)

    def zero_grad(self) -> None:
        self.param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        grad = self.param.grad
        if grad is None:
            return
        beta1, beta2 = self.betas
        self.steps += 1
        self._first.lerp_(grad, 1 - beta1)
        self._second.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = self.lr / (1 - beta1**self.steps)
        denominator = (self._second.sqrt() / math.sqrt(1 - beta2**self.steps)).add_(self.eps)
        self.param.addcdiv_(self._first, denominator, value=-step_size)
