"""What a solve returns, and the error raised when the arithmetic breaks down."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from prefshap_core.errors import PrefShapError


class SolverError(PrefShapError, ArithmeticError):
    """Non-finite numbers in a solve (bad inputs or a breakdown): never silently patched."""


@dataclass(frozen=True)
class NewtonStep:
    """One Newton step of a logistic fit."""

    penalty: float
    cg_iterations: int
    cg_residual: float  # final relative residual of the step's CG solve
    objective: float  # after the step, at this step's penalty
    step_length: float  # 1.0 unless the line search shortened it
    decrement: float  # g^T H^-1 g / 2 before the step (predicted decrease)


@dataclass(frozen=True)
class SolveResult:
    """``alpha`` (M,) in the operator's dtype and device, and how the solve went.

    ``iterations`` counts every CG iteration; ``residuals`` holds the relative residual
    after each of them (all Newton steps in order for a logistic fit), so the last one
    is the final residual. ``converged``: the last CG solve reached ``cg_tolerance``
    (logistic: and the Newton decrement reached ``newton_tolerance`` when refining).
    """

    alpha: torch.Tensor
    iterations: int
    residuals: list[float]
    seconds: float
    converged: bool
    jitter: float  # the absolute diagonal jitter the preconditioner used
    steps: list[NewtonStep] = field(default_factory=list)
    # The preconditioner's lower L, L L^T = K_MM + jitter I (logistic fits): the fit's
    # Laplace posterior is whitened by the same factor (models.posterior.TrainingSystem).
    centre_factor: torch.Tensor | None = None

    @property
    def final_residual(self) -> float:
        return self.residuals[-1] if self.residuals else 0.0


def check_finite(x: torch.Tensor, what: str) -> None:
    if not bool(torch.isfinite(x).all()):
        raise SolverError(f"{what} contains NaN or infinity")
