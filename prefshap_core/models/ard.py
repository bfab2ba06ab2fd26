"""Per-column (ARD) lengthscales learned by gradient, after the group search.

The group search (``models.refine``) doubles or halves a whole feature group at a
time; this step then moves every column's lengthscale (items, and the contexts of a
C-GPM) and the penalty continuously, by Adam on a held-out objective through a small
Nyström fit, as falkon's hyperparameter optimisation does:

    theta = (log l_1..l_d, log l'_1..l'_d', log lam)
    alpha(theta) = argmin (1/n) sum_i logloss(y_i, (K_nM a)_i) + lam/2 a^T K_MM a   (over a)
    objective(theta) = mean log loss of g = K_hM(theta) alpha(theta) on held-out duels h

``alpha(theta)`` is found by Newton's method without gradients; its derivative comes
from the implicit function theorem, which one differentiable Newton step taken from
the (detached) minimiser gives exactly: at the minimiser the step is zero, so its
derivative is ``-H^-1 d(grad)/d(theta)``. Both the fitted and the held-out duels are
seeded subsamples of the *training* duels (disjoint), so the validation split still
judges the result: the learned lengthscales are kept only when a fit on the group
search's subsample scores clearly better on validation duels than the start did
(``refine.clearly_better``). The kernel stays a product over columns (the same ARD
RBF, other lengthscales), so explanations stay exact and the model file is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from prefshap_core.metrics import log_losses
from prefshap_core.models.refine import (
    REFINE_CENTRES,
    REFINE_TRAIN_DUELS,
    REFINE_VALIDATION_DUELS,
    clearly_better,
)
from prefshap_core.progress import Progress
from prefshap_core.solvers.adam import Adam
from prefshap_core.solvers.gram import add_lower_gram

if TYPE_CHECKING:  # search calls this module: a runtime import would be a cycle
    from prefshap_core.models.search import PathFitter

GRADIENT_STEPS = 40  # Adam steps (0: the step is skipped)
# After this many steps, a search that has lowered its objective by less than
# STALL_GAIN (relative) stops and is not tried: its learned lengthscales were worse
# on validation than the start on every data set measured. Traced to 40 steps, by
# step 5 the searches that stall gained at most 0.29 % (10,000-duel set GPM 0.29 %,
# its UPM 0.10 %, clusters game UPM 0.16 %), the 17 others at least 0.45 % (tennis,
# Pokémon, GPM and UPM, seeds 0-4; App. B and the noisy utility game, seeds 0-2):
# the same decisions as the former check (0.5 % by step 10), five steps sooner.
STALL_CHECK_STEP = 5
STALL_GAIN = 0.0036
ARD_FIT_DUELS = 4000  # the inner fit's training duels (a subsample of train)
ARD_HELD_OUT_DUELS = 4000  # the objective's duels (train, disjoint from the fit's)
ARD_CENTRES = 400
ARD_LEARNING_RATE = 0.08
ARD_LIMIT = 64.0  # a column's lengthscale stays within [1/64, 64] of where it started
NEWTON_STEPS = 30  # inner Newton iterations at most (warm-started: usually a few)
NEWTON_TOLERANCE = 1e-14  # squared Newton decrement (twice the objective's gap) to stop at
NEWTON_GRADIENT_TOLERANCE = 1e-8  # ... or the gradient's largest entry (rounding: ~1e-10)
# Chord steps: once Newton converges (the gradient's largest entry below CHORD_GRADIENT
# and shrinking by CHORD_RATE or more per step), the last Hessian's LU is reused for
# the next step instead of a new (n x M x M) Hessian. Chord steps converge linearly,
# fast this close to the minimiser; one that shrinks the gradient less than
# CHORD_RATE brings a new Hessian back. The minimiser, and the system the objective's
# differentiable step solves at it, are Newton's.
CHORD_GRADIENT = 1e-3
CHORD_RATE = 0.25
# Below this many training duels the two subsamples are too small to learn from.
ARD_MIN_TRAIN_DUELS = 2000


@dataclass(frozen=True)
class DuelRows:
    """Duels as rows into a table of unique item rows (and context rows)."""

    left: torch.Tensor
    right: torch.Tensor
    context: torch.Tensor | None


def rbf_gram_scaled(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ARD RBF of rows already divided by their lengthscales, differentiable (no in-place)."""
    sq = (a * a).sum(-1, keepdim=True) + (b * b).sum(-1) - 2.0 * a @ b.T
    return torch.exp(-0.5 * sq.clamp_min(0.0))


def pair_matrix(
    kind: str,
    left_gram: torch.Tensor,
    right_gram: torch.Tensor,
    rows: DuelRows,
    utility_weight: float,
    context_gram: torch.Tensor | None = None,
) -> torch.Tensor:
    """The pair kernel of ``kernels.pair`` between duel ``rows`` and the centres (differentiable).

    ``left_gram[p, j]`` / ``right_gram[p, j]``: k between item row p and centre j's left /
    right item; ``context_gram[q, j]``: k between context row q and centre j's context.
    """
    a, b = left_gram, right_gram
    if kind == "upm":
        d = a - b
        # index_select, not indexing: its backward is index_add_, ~3x faster on the CPU
        # than the accumulating index_put_ that indexing's backward is.
        return d.index_select(0, rows.left) - d.index_select(0, rows.right)
    if utility_weight != 0:
        # The sum kernel's pair kernel is the GPM's over the gram shifted by w:
        # (k_ac + w)(k_bd + w) - (k_ad + w)(k_bc + w)
        #   = k_ac k_bd - k_ad k_bc + w (k_ac + k_bd - k_ad - k_bc),
        # so its utility term costs two additions over the (items x centres) grams
        # instead of a third pair of (duels x centres) gathers and products. (The w^2
        # that cancels costs ~eps w^2 of rounding per entry, 2e-10 at w = 1,000: far
        # below what a hyperparameter search resolves.)
        a, b = a + utility_weight, b + utility_weight
    a_l, a_r = a.index_select(0, rows.left), a.index_select(0, rows.right)
    b_l, b_r = b.index_select(0, rows.left), b.index_select(0, rows.right)
    out = a_l * b_r - b_l * a_r
    if kind == "cgpm":
        assert context_gram is not None and rows.context is not None
        out = out * context_gram.index_select(0, rows.context)
    return out


def logistic_terms(y: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """d loss / d f and d^2 loss / d f^2 per duel (ties: half a win each way)."""
    p = 0.5 * (1.0 + y)
    s = torch.sigmoid(f)
    return s - p, s * (1.0 - s)


def mean_log_loss(y: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros_like(f)
    p = 0.5 * (1.0 + y)
    return (p * torch.logaddexp(zero, -f) + (1.0 - p) * torch.logaddexp(zero, f)).mean()


@dataclass(frozen=True)
class NewtonSystem:
    """The Newton system at one ``alpha``: gradient, Hessian (jitter included), the step."""

    grad: torch.Tensor
    hessian: torch.Tensor
    jitter: torch.Tensor
    step: torch.Tensor


def newton_step(
    k_nm: torch.Tensor,
    k_mm: torch.Tensor,
    y: torch.Tensor,
    alpha: torch.Tensor,
    penalty,
    system: NewtonSystem | None = None,
) -> torch.Tensor:
    """The Newton step of the penalised logistic objective at ``alpha``, differentiable in
    ``k_nm``, ``k_mm`` and ``penalty`` (``y`` and ``alpha`` are constants). ``system``:
    the same step already solved at ``alpha`` (``fit_alpha``'s last), reused as it is."""
    penalty = torch.as_tensor(penalty, dtype=k_nm.dtype)
    return _NewtonStep.apply(k_nm, k_mm, penalty, y, alpha.detach(), system)


class _NewtonStep(torch.autograd.Function):
    """``s = H^-1 grad`` with a backward pass of O(nM) flops, not autograd's O(nM^2).

    Autograd pulls the solve's gradient back through ``H = K^T diag(d2) K / n`` with two
    n x M x M products. That gradient is rank one, ``H_bar = -u s^T`` with ``u = H^-T s_bar``,
    so its pull-back to ``K`` is outer products: ``-(d2 * Ku) s^T - (d2 * Ks) u^T`` over n,
    and ``d2``'s own dependence on ``f = K alpha`` adds ``-d2 (1 - 2 sigma) Ku Ks / n`` to
    ``f_bar``. The same derivative as autograd's (the ``H_bar`` term included), to rounding:
    tested against it. 30 of an ARD step's ~135 ms on tennis's UPM were those products.
    """

    @staticmethod
    def forward(ctx, k_nm, k_mm, penalty, y, alpha, system):
        if system is None:
            system, _ = _solved_system(k_nm, k_mm, y, alpha, penalty)
        ctx.save_for_backward(k_nm, k_mm, penalty, y, alpha, system.step, system.hessian)
        ctx.jitter = system.jitter
        return system.step.clone()

    @staticmethod
    def backward(ctx, step_bar):
        k_nm, k_mm, penalty, y, alpha, step, hessian = ctx.saved_tensors
        n = k_nm.shape[0]
        u = torch.linalg.solve(hessian.T, step_bar)
        sigma = torch.sigmoid(k_nm @ alpha)
        d1, d2 = sigma - 0.5 * (1.0 + y), sigma * (1.0 - sigma)
        ku, ks = k_nm @ u, k_nm @ step
        f_bar = d2 * ku * (1.0 - (1.0 - 2.0 * sigma) * ks) / n
        k_bar = torch.outer(d1 / n, u)
        k_bar.addr_(d2 * ku / n, step, alpha=-1.0).addr_(d2 * ks / n, u, alpha=-1.0)
        k_bar.addr_(f_bar, alpha)
        rest = alpha - step
        k_mm_bar = penalty * torch.outer(u, rest)
        penalty_bar = u @ (k_mm @ rest) - ctx.jitter * (u @ step)
        return k_bar, k_mm_bar, penalty_bar, None, None, None


def _newton_system(
    k_nm: torch.Tensor, k_mm: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor, penalty
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(gradient, Hessian, jitter) of the penalised logistic objective at ``alpha``."""
    n, m = k_nm.shape
    d1, d2 = logistic_terms(y, k_nm @ alpha)
    grad = _gradient_of(k_nm, k_mm, d1, alpha, penalty)
    jitter = 1e-10 * torch.diagonal(k_mm).mean().detach()
    hessian = _data_hessian(k_nm, d2) / n + penalty * k_mm
    hessian = hessian + (penalty * jitter + 1e-12) * torch.eye(m, dtype=k_nm.dtype)
    return grad, hessian, jitter


def _data_hessian(k_nm: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
    """``K^T diag(d2) K``, exactly symmetric: its lower triangle by column panels
    (``solvers.gram``), mirrored. 11.0 ms against the full GEMM's 15.3 ms at 4,000 x 400
    (Pokémon's ARD problem, ~93 Hessians per training); differentiable like the GEMM."""
    m = k_nm.shape[1]
    lower = torch.zeros((m, m), dtype=k_nm.dtype, device=k_nm.device)
    add_lower_gram(lower, k_nm * d2[:, None], k_nm)
    return lower.tril() + lower.tril(-1).mT  # tril: the panels leave their blocks' upper part


def _gradient(
    k_nm: torch.Tensor, k_mm: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor, penalty
) -> torch.Tensor:
    """The gradient of :func:`_newton_system` alone (the same floats): O(nM), no Hessian."""
    d1, _ = logistic_terms(y, k_nm @ alpha)
    return _gradient_of(k_nm, k_mm, d1, alpha, penalty)


def _gradient_of(
    k_nm: torch.Tensor, k_mm: torch.Tensor, d1: torch.Tensor, alpha: torch.Tensor, penalty
) -> torch.Tensor:
    """``K^T d1 / n + penalty K_MM alpha``, ``d1`` the log losses' first derivatives."""
    return k_nm.T @ d1 / k_nm.shape[0] + penalty * (k_mm @ alpha)


def _solved_system(
    k_nm: torch.Tensor, k_mm: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor, penalty
) -> tuple[NewtonSystem, tuple[torch.Tensor, torch.Tensor]]:
    """The Newton system at ``alpha`` and the LU factors of its Hessian (for chord steps)."""
    grad, hessian, jitter = _newton_system(k_nm, k_mm, y, alpha, penalty)
    factors, pivots, info = torch.linalg.lu_factor_ex(hessian)
    if int(info) != 0:  # as torch.linalg.solve does: the search ends on a LinAlgError
        raise torch.linalg.LinAlgError(f"the Newton system is singular (U[{int(info) - 1}] = 0)")
    step = torch.linalg.lu_solve(factors, pivots, grad[:, None])[:, 0]
    return NewtonSystem(grad, hessian, jitter, step), (factors, pivots)


def penalised_objective(
    k_nm: torch.Tensor, k_mm: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor, penalty: float
) -> float:
    """``mean log loss + (penalty / 2) alpha^T K_MM alpha``: what :func:`newton_step` descends."""
    return float(mean_log_loss(y, k_nm @ alpha) + 0.5 * penalty * (alpha @ (k_mm @ alpha)))


def fit_alpha(
    k_nm: torch.Tensor,
    k_mm: torch.Tensor,
    y: torch.Tensor,
    penalty: float,
    alpha: torch.Tensor,
    guess: torch.Tensor | None = None,
) -> tuple[torch.Tensor, NewtonSystem | None]:
    """The minimiser of the penalised objective (no gradients), Newton from ``alpha``
    (or from ``guess`` where the objective is lower there), and the Newton system solved
    at it (None when the last one solved was not). Close to the minimiser the steps are
    chord steps (``CHORD_GRADIENT``).

    Each step is backtracked (Armijo) on the objective. It stops when the gradient is
    at rounding level: at small penalties the Hessian is nearly singular, and the
    Newton step along its flat directions stays long after the gradient has
    vanished. (A cap on the step's length instead of the line search left the fit
    unconverged after 30 of 30 steps on every call of a 10,000-duel training.)
    """
    with torch.no_grad():
        value = penalised_objective(k_nm, k_mm, y, alpha, penalty)
        if guess is not None:
            guessed = penalised_objective(k_nm, k_mm, y, guess, penalty)
            if guessed < value:
                alpha, value = guess, guessed
        chord: tuple[torch.Tensor, torch.Tensor] | None = None  # LU of the last Hessian
        previous = float("inf")  # the gradient's largest entry one step before
        for _ in range(NEWTON_STEPS):
            grad = _gradient(k_nm, k_mm, y, alpha, penalty)
            largest = float(grad.abs().max())
            if largest <= NEWTON_GRADIENT_TOLERANCE:
                return alpha, None
            system = None
            if chord is not None and largest <= min(CHORD_GRADIENT, CHORD_RATE * previous):
                step = torch.linalg.lu_solve(*chord, grad[:, None])[:, 0]
            else:
                system, chord = _solved_system(k_nm, k_mm, y, alpha, penalty)
                step = system.step
            previous = largest
            decrement = float(grad @ step)  # the squared Newton decrement (>= 0)
            if not decrement > NEWTON_TOLERANCE:
                return alpha, system
            t = 1.0
            while True:
                trial = alpha - t * step
                trial_value = penalised_objective(k_nm, k_mm, y, trial, penalty)
                if trial_value <= value - 1e-4 * t * decrement:
                    break
                t *= 0.5
                if t < 1e-10:  # no decrease left to find: the minimiser within rounding
                    return alpha, system
            alpha, value = trial, trial_value
    return alpha, None


@dataclass(frozen=True)
class ArdProblem:
    """The subsampled fit of one learning run: rows, labels and the fixed centres."""

    kind: str
    items: torch.Tensor  # (p, d) unique item rows used by any duel of the problem
    contexts: torch.Tensor | None  # (q, d') unique context rows
    fit: DuelRows
    held_out: DuelRows
    centres: torch.Tensor  # positions of the centres among the fit duels
    y_fit: torch.Tensor
    y_held_out: torch.Tensor
    utility_weight: float

    def matrices(self, log_ls: torch.Tensor, log_ctx: torch.Tensor | None):
        """(K_fit,M, K_MM, K_held,M) at the given log lengthscales."""
        x = self.items / torch.exp(log_ls)
        # One gram per centre side (items x centres), not one over the centres' unique
        # items with a column gather per side: that gather's backward, a scatter into
        # the whole gram, cost more than the gram (tennis: 3,433 items x 467).
        left_gram = rbf_gram_scaled(x, x[self.fit.left[self.centres]])
        right_gram = rbf_gram_scaled(x, x[self.fit.right[self.centres]])
        context_gram = None
        if self.kind == "cgpm":
            assert self.contexts is not None and log_ctx is not None
            assert self.fit.context is not None
            u = self.contexts / torch.exp(log_ctx)
            context_gram = rbf_gram_scaled(u, u[self.fit.context[self.centres]])
        grams = (left_gram, right_gram)
        k_fit = pair_matrix(self.kind, *grams, self.fit, self.utility_weight, context_gram)
        k_held = pair_matrix(self.kind, *grams, self.held_out, self.utility_weight, context_gram)
        return k_fit, k_fit[self.centres], k_held

    def objective(
        self, theta: torch.Tensor, alpha: torch.Tensor, guess: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out mean log loss at ``theta`` (differentiable) and the inner minimiser."""
        log_ls, log_ctx, log_penalty = self.unpack(theta)
        k_fit, k_mm, k_held = self.matrices(log_ls, log_ctx)
        penalty = torch.exp(log_penalty)
        alpha, system = fit_alpha(
            k_fit.detach(), k_mm.detach(), self.y_fit, float(penalty.detach()), alpha, guess
        )
        # One Newton step from the detached minimiser: the value is alpha, the gradient
        # the implicit function theorem's. Its system is the inner fit's last, reused.
        alpha_theta = alpha - newton_step(k_fit, k_mm, self.y_fit, alpha, penalty, system)
        return mean_log_loss(self.y_held_out, k_held @ alpha_theta), alpha

    def unpack(self, theta: torch.Tensor):
        d = self.items.shape[1]
        log_ctx = None
        if self.kind == "cgpm":
            assert self.contexts is not None
            log_ctx = theta[d : d + self.contexts.shape[1]]
        return theta[:d], log_ctx, theta[-1]


def ard_problem(
    fitter: PathFitter, train: np.ndarray, utility_weight: float
) -> tuple[ArdProblem, np.ndarray, np.ndarray]:
    """Two disjoint seeded subsamples of ``train`` and the centres (among the first)."""
    data = fitter.data
    rng = np.random.default_rng([fitter.seed, 4])
    order = rng.permutation(train)
    n_fit = min(ARD_FIT_DUELS, len(train) // 2)
    fit_duels = np.sort(order[:n_fit])
    held_duels = np.sort(order[n_fit : n_fit + min(ARD_HELD_OUT_DUELS, len(train) - n_fit)])
    centres = np.sort(rng.choice(n_fit, min(ARD_CENTRES, n_fit), replace=False))
    # Only the items these duels meet are rows of the grams (tennis: 1,603 of 3,433).
    both = np.concatenate([fit_duels, held_duels])
    used = np.unique(np.concatenate([data.left[both], data.right[both]]))
    position = np.full(data.n_items, -1, dtype=np.int64)
    position[used] = np.arange(len(used))

    def rows(duels: np.ndarray) -> DuelRows:
        ctx = None
        if fitter.kind == "cgpm":
            ctx = torch.as_tensor(data.context_index[duels], dtype=torch.int64)
        return DuelRows(
            torch.as_tensor(position[data.left[duels]]),
            torch.as_tensor(position[data.right[duels]]),
            ctx,
        )

    contexts = None
    if fitter.kind == "cgpm":
        assert data.contexts is not None
        contexts = torch.as_tensor(data.contexts, dtype=torch.float64)
    problem = ArdProblem(
        kind=fitter.kind,
        items=torch.as_tensor(data.items[used], dtype=torch.float64),
        contexts=contexts,
        fit=rows(fit_duels),
        held_out=rows(held_duels),
        centres=torch.as_tensor(centres, dtype=torch.int64),
        y_fit=torch.as_tensor(data.y[fit_duels], dtype=torch.float64),
        y_held_out=torch.as_tensor(data.y[held_duels], dtype=torch.float64),
        utility_weight=utility_weight,
    )
    return problem, fit_duels, held_duels


@dataclass(frozen=True)
class LearnedLengthscales:
    """Per-column multipliers of the start lengthscales, and the objective's trace."""

    items: np.ndarray
    contexts: np.ndarray | None
    penalty: float
    objectives: list[float]  # held-out log loss before each Adam step (first: the start)
    stalled: bool = False  # stopped at STALL_CHECK_STEP with too little gain to try


def learn_lengthscales(
    fitter: PathFitter,
    train: np.ndarray,
    scale: float,
    utility_weight: float,
    penalty: float,
    steps: int | None = None,
) -> LearnedLengthscales:
    """Adam on (log lengthscales, log penalty); returns the best point seen (up to a
    step whose objective cannot be evaluated: a singular Newton system or a non-finite
    loss ends the search there)."""
    steps = GRADIENT_STEPS if steps is None else steps
    problem, _, _ = ard_problem(fitter, train, utility_weight)
    start_items = np.log(fitter.base_lengthscales * scale)
    parts = [start_items]
    if fitter.kind == "cgpm":
        assert fitter.context_lengthscales is not None
        parts.append(np.log(fitter.context_lengthscales))
    start = np.concatenate([*parts, [np.log(penalty)]])
    theta = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    lower = torch.as_tensor(start - np.log(ARD_LIMIT))
    upper = torch.as_tensor(start + np.log(ARD_LIMIT))
    optimiser = Adam(theta, lr=ARD_LEARNING_RATE)
    alpha = torch.zeros(len(problem.centres), dtype=torch.float64)
    best_theta, best, objectives = start.copy(), float("inf"), []
    stalled = False
    previous = None
    for _ in range(steps + 1):
        optimiser.zero_grad()
        # Adam's steps change little from one to the next, and so does the minimiser:
        # extrapolated along its last move it starts the inner fit nearer (with chord steps,
        # Hessians per call 5.0 -> 3.5 on the 10,000-duel set), if the objective agrees.
        guess = None if previous is None else 2.0 * alpha - previous
        try:
            value, found = problem.objective(theta, alpha, guess)
            previous, alpha = alpha, found
        except torch.linalg.LinAlgError:
            # A step reached lengthscales whose Newton system is singular (e.g. every
            # kernel entry 1): that region is degenerate, so the best point seen stands.
            break
        if not torch.isfinite(value):
            break
        objectives.append(float(value.detach()))
        if objectives[-1] < best:
            best, best_theta = objectives[-1], theta.detach().numpy().copy()
        if len(objectives) > steps:
            break
        if len(objectives) == STALL_CHECK_STEP + 1 and best > (1 - STALL_GAIN) * objectives[0]:
            stalled = True
            break
        value.backward()
        optimiser.step()
        with torch.no_grad():
            theta.copy_(torch.maximum(torch.minimum(theta, upper), lower))
    factors = np.exp(best_theta - start)
    d = len(start_items)
    contexts = factors[d:-1] if fitter.kind == "cgpm" else None
    return LearnedLengthscales(
        factors[:d], contexts, float(np.exp(best_theta[-1])), objectives, stalled
    )


def with_column_factors(fitter: PathFitter, learned: LearnedLengthscales) -> PathFitter:
    contexts = fitter.context_lengthscales
    if learned.contexts is not None and contexts is not None:
        contexts = contexts * learned.contexts
    return replace(
        fitter, base_lengthscales=fitter.base_lengthscales * learned.items,
        context_lengthscales=contexts,
    )  # fmt: skip


def refine_column_lengthscales(
    fitter: PathFitter,
    train: np.ndarray,
    validation: np.ndarray,
    scale: float,
    utility_weight: float,
    penalties: list[float],
    penalty: float,
    progress: Progress,
    start_losses: np.ndarray | None = None,
) -> PathFitter | None:
    """The fitter with learned column lengthscales, or None when they do not clearly help.

    Judged like the group search's candidates: the best point of a penalty path on the
    group search's subsample (validation duels), the learned against the start. A
    search that stalls (``STALL_GAIN`` by ``STALL_CHECK_STEP``) is not judged at all.
    ``start_losses``: the start's per-duel losses of that fit when already known (the
    group search's last, ``GroupRefinement.validation_losses``), so not fitted again.
    """
    if GRADIENT_STEPS == 0 or len(train) < ARD_MIN_TRAIN_DUELS or fitter.loss != "logistic":
        return None
    progress.update("Learning column lengthscales by gradient", 0.0)
    learned = learn_lengthscales(fitter, train, scale, utility_weight, penalty)
    if learned.stalled:
        progress.update("Column lengthscales kept (the gradient search stalled)", 1.0)
        return None
    candidate = with_column_factors(fitter, learned)
    sub_train, sub_val = fitter.subsample(
        train, validation, REFINE_TRAIN_DUELS, REFINE_VALIDATION_DUELS, stream=3
    )
    y_val = fitter.data.y[sub_val].astype(np.float64)

    def losses(trial: PathFitter, lo: float, hi: float) -> np.ndarray:
        results = trial.fit(
            sub_train, sub_val, [scale], penalties, progress.span(lo, hi),
            n_centres=REFINE_CENTRES, utility_weights=[utility_weight],
        )  # fmt: skip
        best = min(results, key=lambda r: fitter.loss_of(r.point))
        return log_losses(y_val, best.validation_g)

    learned_losses = losses(candidate, 0.7, 0.85)
    if start_losses is None:
        start_losses = losses(fitter, 0.85, 1.0)
    keep = clearly_better(learned_losses, start_losses)
    progress.update("Column lengthscales learned" if keep else "Column lengthscales kept", 1.0)
    return candidate if keep else None
