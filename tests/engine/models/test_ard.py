"""Column lengthscales learned by gradient (models.ard): kernel, gradient, what they learn."""

import numpy as np
import pytest
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import gpm_generated
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.models import ard
from prefshap_core.models.hyperparameters import median_lengthscales
from prefshap_core.models.refine import refine_group_lengthscales, with_factors
from prefshap_core.models.search import PathFitter
from prefshap_core.progress import ensure_progress
from prefshap_core.solvers.options import SolverOptions


def _fitter(data, kind="gpm"):
    return PathFitter(
        kind=kind, loss="logistic", data=data,
        base_lengthscales=median_lengthscales(data.items), context_lengthscales=None,
        compute=Compute(), solver=SolverOptions(), seed=0, n_centres=100,
        iterations={1e-3: 10},
    )  # fmt: skip


@pytest.fixture
def small_ard(monkeypatch):
    """ARD problems small enough for finite differences and scripted objectives."""
    monkeypatch.setattr(ard, "ARD_FIT_DUELS", 600)
    monkeypatch.setattr(ard, "ARD_HELD_OUT_DUELS", 400)
    monkeypatch.setattr(ard, "ARD_CENTRES", 60)


@pytest.fixture(scope="module")
def noisy_game():
    """A random GPM on x1, x2; x3 is noise (3,000 duels)."""
    return gpm_generated(n_items=200, n_duels=3000, d=3, n_relevant=2, seed=1)


@pytest.mark.parametrize("kind,weight", [("gpm", 0.0), ("gpm", 3.0), ("upm", 0.0)])
def test_pair_matrix_is_the_product_pair_kernel(noisy_game, kind, weight):
    data = noisy_game
    ls = median_lengthscales(data.items) * 1.7
    rows, cols = np.arange(0, 60), np.arange(100, 140)
    kernel = PairKernel(kind, data.items, ls, utility_weight=weight)
    expected = kernel.matrix(
        DuelIndex.from_arrays(data.left[rows], data.right[rows]),
        DuelIndex.from_arrays(data.left[cols], data.right[cols]),
    )
    x = torch.as_tensor(data.items / ls)
    got = ard.pair_matrix(
        kind,
        ard.rbf_gram_scaled(x, x[data.left[cols]]),
        ard.rbf_gram_scaled(x, x[data.right[cols]]),
        ard.DuelRows(torch.as_tensor(data.left[rows]), torch.as_tensor(data.right[rows]), None),
        weight,
    )
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-11)


def test_objective_gradient_matches_finite_differences(noisy_game, small_ard):
    data = noisy_game
    problem, _, _ = ard.ard_problem(_fitter(data), np.arange(data.n_duels), utility_weight=1.0)
    start = np.concatenate([np.log(median_lengthscales(data.items)), [np.log(1e-3)]])
    theta = torch.tensor(start, requires_grad=True)
    alpha0 = torch.zeros(60, dtype=torch.float64)
    value, _ = problem.objective(theta, alpha0)
    value.backward()
    grad = theta.grad.numpy()
    eps = 1e-5
    for j in range(len(start)):
        plus, minus = start.copy(), start.copy()
        plus[j] += eps
        minus[j] -= eps
        with torch.no_grad():
            f_plus = float(problem.objective(torch.tensor(plus), alpha0)[0])
            f_minus = float(problem.objective(torch.tensor(minus), alpha0)[0])
        numeric = (f_plus - f_minus) / (2 * eps)
        assert grad[j] == pytest.approx(numeric, rel=1e-4, abs=1e-8)


@pytest.mark.slow
def test_learning_lowers_the_held_out_loss_and_lengthens_the_noise_column(noisy_game, monkeypatch):
    monkeypatch.setattr(ard, "ARD_CENTRES", 150)
    data = noisy_game
    split = split_duels(data.n_duels, 0)
    fitter = _fitter(data)
    learned = ard.learn_lengthscales(fitter, split.train, 1.0, 0.0, 1e-3, steps=30)
    assert min(learned.objectives) < learned.objectives[0] - 0.01
    relevant, noise = learned.items[:2], learned.items[2]
    assert noise > 1.5 * max(relevant)
    assert np.all(learned.items <= ard.ARD_LIMIT) and np.all(learned.items >= 1 / ard.ARD_LIMIT)


def test_skipped_below_the_minimum_and_when_switched_off(noisy_game, monkeypatch):
    data = noisy_game
    fitter = _fitter(data)
    few = np.arange(ard.ARD_MIN_TRAIN_DUELS - 1)
    validation = np.arange(2500, 3000)
    args = (1.0, 0.0, [1e-3], 1e-3, ensure_progress(None))
    assert ard.refine_column_lengthscales(fitter, few, validation, *args) is None
    monkeypatch.setattr(ard, "GRADIENT_STEPS", 0)
    assert ard.refine_column_lengthscales(fitter, np.arange(2500), validation, *args) is None


def test_a_singular_step_ends_the_search_at_the_best_point_seen(noisy_game, monkeypatch, small_ard):
    """Seen on an App. B game: Adam reached lengthscales whose Newton system was
    singular, and training crashed. The search now stops there and keeps its best."""
    real = ard.ArdProblem.objective
    calls = []

    def fails_on_the_fourth(self, theta, alpha, guess=None):
        calls.append(1)
        if len(calls) == 4:
            raise torch.linalg.LinAlgError("singular")
        return real(self, theta, alpha, guess)

    monkeypatch.setattr(ard.ArdProblem, "objective", fails_on_the_fourth)
    data = noisy_game
    learned = ard.learn_lengthscales(_fitter(data), np.arange(2500), 1.0, 0.0, 1e-3, steps=10)
    assert len(learned.objectives) == 3 and len(calls) == 4
    best = int(np.argmin(learned.objectives))
    monkeypatch.setattr(ard.ArdProblem, "objective", real)
    again = ard.learn_lengthscales(_fitter(data), np.arange(2500), 1.0, 0.0, 1e-3, steps=best)
    np.testing.assert_allclose(learned.items, again.items if best else np.ones(3))


def _scripted_objective(monkeypatch, per_step_gain: float) -> list[int]:
    """ArdProblem.objective replaced by a loss that falls ``per_step_gain`` (relative)
    per call, differentiable in theta so that Adam can step."""
    calls: list[int] = []

    def objective(self, theta, alpha, guess=None):
        value = 0.5 * (1 - per_step_gain) ** len(calls) + 0.0 * theta.sum()
        calls.append(1)
        return value, alpha

    monkeypatch.setattr(ard.ArdProblem, "objective", objective)
    return calls


@pytest.mark.parametrize("gain,stalls", [(0.0003, True), (0.002, False)])
def test_a_search_that_gains_too_little_by_the_check_step_stops_there(
    noisy_game, monkeypatch, small_ard, gain, stalls
):
    # 0.03 % a step is 0.15 % by step 5 (< STALL_GAIN); 0.2 % a step is 1 %.
    calls = _scripted_objective(monkeypatch, gain)
    learned = ard.learn_lengthscales(_fitter(noisy_game), np.arange(2500), 1.0, 0.0, 1e-3)
    assert learned.stalled is stalls
    expected = ard.STALL_CHECK_STEP + 1 if stalls else ard.GRADIENT_STEPS + 1
    assert len(learned.objectives) == len(calls) == expected


def test_a_stalled_search_is_not_judged_and_keeps_the_start(noisy_game, monkeypatch, small_ard):
    _scripted_objective(monkeypatch, 0.0)

    def judged(*args):
        raise AssertionError("a stalled search must not be compared on validation")

    monkeypatch.setattr(ard, "clearly_better", judged)
    args = (1.0, 0.0, [1e-3], 1e-3, ensure_progress(None))
    train, validation = np.arange(2500), np.arange(2500, 3000)
    assert ard.refine_column_lengthscales(_fitter(noisy_game), train, validation, *args) is None


@pytest.mark.parametrize("ties", [False, True])
def test_newton_step_backward_is_autograds_through_the_hessian(ties):
    """The hand-written O(nM) backward of the Newton step equals autograd's through
    ``H = K^T diag(d2) K / n`` and the solve (the rank-one H_bar term included), away
    from the minimiser too (where that term matters)."""
    gen = torch.Generator().manual_seed(3)
    n, m = 50, 7
    k_nm = torch.randn(n, m, generator=gen, dtype=torch.float64)
    k_mm = k_nm[:m] @ k_nm[:m].T + 0.1 * torch.eye(m, dtype=torch.float64)
    y = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0).double()
    if ties:
        y[::5] = 0.0
    alpha = 0.3 * torch.randn(m, generator=gen, dtype=torch.float64)
    weights = torch.randn(m, generator=gen, dtype=torch.float64)

    def gradients(step_fn):
        k, kmm = k_nm.clone().requires_grad_(True), k_mm.clone().requires_grad_(True)
        penalty = torch.tensor(0.05, dtype=torch.float64, requires_grad=True)
        (weights @ step_fn(k, kmm, y, alpha, penalty)).backward()
        return k.grad, kmm.grad, penalty.grad

    def autograd_step(k, kmm, y, alpha, penalty):
        grad, hessian, _ = ard._newton_system(k, kmm, y, alpha, penalty)
        return torch.linalg.solve(hessian, grad)

    for got, expected in zip(gradients(ard.newton_step), gradients(autograd_step), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-13)
    with torch.no_grad():
        torch.testing.assert_close(
            ard.newton_step(k_nm, k_mm, y, alpha, 0.05),
            autograd_step(k_nm, k_mm, y, alpha, torch.tensor(0.05, dtype=torch.float64)),
            rtol=0,
            atol=0,
        )


def test_the_data_hessian_is_the_full_products_and_exactly_symmetric():
    """The panel-built K^T diag(d2) K against the plain GEMM (sizes that leave partial
    panels), with some curvatures 0; symmetric to the bit (the LU and its backward see a
    full matrix)."""
    gen = torch.Generator().manual_seed(5)
    for n, m in ((300, 97), (1000, 250)):
        k_nm = torch.rand(n, m, generator=gen, dtype=torch.float64)
        d2 = 0.25 * torch.rand(n, generator=gen, dtype=torch.float64)
        d2[::7] = 0.0
        hessian = ard._data_hessian(k_nm, d2)
        expected = (k_nm.T * d2) @ k_nm
        assert torch.equal(hessian, hessian.T)
        assert float((hessian - expected).abs().max()) <= 1e-13 * float(expected.abs().max())


def test_reusing_the_inner_fits_last_newton_system_changes_nothing(
    noisy_game, small_ard, monkeypatch
):
    """The objective's Newton step reuses the system the inner fit solved last (at the
    alpha it returns): the value and gradient are bitwise those of solving it again."""
    data = noisy_game
    problem, _, _ = ard.ard_problem(_fitter(data), np.arange(data.n_duels), utility_weight=1.0)
    start = np.concatenate([np.log(median_lengthscales(data.items)), [np.log(1e-3)]])

    def value_and_gradient():
        theta = torch.tensor(start, requires_grad=True)
        value, _ = problem.objective(theta, torch.zeros(60, dtype=torch.float64))
        value.backward()
        return float(value.detach()), theta.grad

    reused = value_and_gradient()
    real = ard.fit_alpha
    monkeypatch.setattr(ard, "fit_alpha", lambda *args: (real(*args)[0], None))
    solved_again = value_and_gradient()
    assert reused[0] == solved_again[0]
    assert torch.equal(reused[1], solved_again[1])


def _logistic_fit_problem(n: int = 400, m: int = 30, seed: int = 5):
    """An RBF logistic fit (K_nM, K_MM, y) with a smooth truth and label noise."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    k_nm = ard.rbf_gram_scaled(x, x[:m])
    truth = 3.0 * torch.sin(x[:, 0]) - x[:, 1]
    y = torch.where(
        torch.rand(n, generator=gen, dtype=torch.float64) < torch.sigmoid(truth), 1.0, -1.0
    )
    return k_nm, k_nm[:m].contiguous(), y


def _counting_hessians(monkeypatch) -> list[int]:
    built: list[int] = []
    real = ard._newton_system

    def counted(*args):
        built.append(1)
        return real(*args)

    monkeypatch.setattr(ard, "_newton_system", counted)
    return built


@pytest.mark.parametrize("penalty", [1e-2, 1e-5])
def test_chord_steps_reach_newtons_minimiser_with_fewer_hessians(monkeypatch, penalty):
    k_nm, k_mm, y = _logistic_fit_problem()
    start = torch.zeros(k_nm.shape[1], dtype=torch.float64)
    built = _counting_hessians(monkeypatch)
    chord, _ = ard.fit_alpha(k_nm, k_mm, y, penalty, start)
    with_chord = len(built)
    monkeypatch.setattr(ard, "CHORD_GRADIENT", 0.0)  # every step a Newton step
    newton, _ = ard.fit_alpha(k_nm, k_mm, y, penalty, start)
    assert len(built) - with_chord > with_chord  # chord steps replaced Hessians
    for alpha in (chord, newton):
        assert float(ard._gradient(k_nm, k_mm, y, alpha, penalty).abs().max()) <= 1e-8
    objective = [ard.penalised_objective(k_nm, k_mm, y, a, penalty) for a in (chord, newton)]
    assert objective[0] == pytest.approx(objective[1], rel=1e-13)
    # Both stop at a gradient of 1e-8; along the flat directions of a small penalty that
    # leaves f unsettled in its sixth digit, whichever steps got there.
    f_chord, f_newton = k_nm @ chord, k_nm @ newton
    assert float((f_chord - f_newton).abs().max()) <= 1e-5 * float(f_newton.abs().max())


def test_a_guess_is_a_start_only_where_the_objective_is_lower(monkeypatch):
    k_nm, k_mm, y = _logistic_fit_problem()
    start = torch.zeros(k_nm.shape[1], dtype=torch.float64)
    minimiser, _ = ard.fit_alpha(k_nm, k_mm, y, 1e-3, start)
    built = _counting_hessians(monkeypatch)
    again, system = ard.fit_alpha(k_nm, k_mm, y, 1e-3, start, guess=minimiser)
    assert torch.equal(again, minimiser) and system is None and not built  # nothing to do
    far = 100.0 * torch.randn(
        len(start), generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    ignored, _ = ard.fit_alpha(k_nm, k_mm, y, 1e-3, start, guess=far)
    assert torch.equal(ignored, minimiser)  # the same path as without the guess


def test_the_start_is_judged_on_the_group_searchs_own_losses(noisy_game, small_ard, monkeypatch):
    """The column search's start is the group search's result on the same subsample and
    centres: its per-duel losses, handed over, are bitwise those of fitting it again."""
    fitter, args = _fitter(noisy_game), (1.0, 0.0, [1e-3], 1e-3, ensure_progress(None))
    train, validation = np.arange(2500), np.arange(2500, 3000)
    refined = refine_group_lengthscales(fitter, train, validation, *args[:3], args[4])
    fitter = with_factors(fitter, refined.factors)
    starts: list[np.ndarray] = []
    monkeypatch.setattr(ard, "clearly_better", lambda learned, start: starts.append(start))
    for known in (None, refined.validation_losses):
        ard.refine_column_lengthscales(fitter, train, validation, *args, start_losses=known)
    assert len(starts) == 2 and np.array_equal(starts[0], starts[1])


def test_a_singular_newton_system_is_a_linalg_error():
    """learn_lengthscales ends its search on torch.linalg.LinAlgError (as the solve
    before the chord steps raised): an exactly singular Hessian must raise that type."""
    k_nm = torch.full((20, 4), 1e10, dtype=torch.float64)  # every entry equal: rank one
    y = torch.where(torch.arange(20) % 4 == 0, -1.0, 1.0).double()  # a gradient to follow
    with pytest.raises(torch.linalg.LinAlgError):
        ard.fit_alpha(k_nm, k_nm[:4].clone(), y, 1e-3, torch.zeros(4, dtype=torch.float64))
