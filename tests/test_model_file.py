import io

import numpy as np
import pytest

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import ModelFileError
from prefshap_core.models.model_file import load_model, model_arrays, save_model
from prefshap_core.models.preference_function import PreferenceFunction


def _random_function(kind: str, seed: int = 0) -> PreferenceFunction:
    rng = np.random.default_rng(seed)
    n, m = 30, 12
    space = FeatureSpace(
        ("h", "w", "hand=L", "hand=R"),
        ("h", "w", "hand"),
        np.array([0, 1, 2, 2]),
        rng.normal(size=4),
        rng.uniform(0.5, 2.0, 4),
    )
    items = rng.normal(size=(n, 4))
    cl, cr = rng.integers(0, n, m), rng.integers(0, n, m)
    extra = {}
    if kind == "cgpm":
        ctx = FeatureSpace(
            ("surface=clay", "surface=hard"),
            ("surface",),
            np.array([0, 0]),
            np.zeros(2),
            np.ones(2),
        )
        contexts = np.array([[1.0, 0.0], [0.0, 1.0]])
        extra = dict(
            context_space=ctx,
            contexts=contexts,
            context_weights=np.array([3.0, 5.0]),
            context_lengthscales=np.array([0.7, 1.3]),
            centres_context=contexts[rng.integers(0, 2, m)],
            context_cme_lambda=0.01,
        )
    return PreferenceFunction(
        kind=kind,
        item_space=space,
        item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items,
        lengthscales=rng.uniform(0.5, 2.0, 4),
        centres_left=items[cl],
        centres_right=items[cr],
        alpha=rng.normal(size=m),
        cme_lambda=0.001,
        metadata={"dataset": "unit", "auc": 0.9},
        **extra,
    )


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_round_trip_gives_identical_g(tmp_path, kind):
    fn = _random_function(kind)
    path = save_model(fn, tmp_path / "m.npz")
    back = load_model(path)
    rng = np.random.default_rng(3)
    left, right = rng.integers(0, 30, 40), rng.integers(0, 30, 40)
    u = fn.contexts[rng.integers(0, 2, 40)] if kind == "cgpm" else None
    before = fn.decision(fn.items[left], fn.items[right], u)
    after = back.decision(back.items[left], back.items[right], u)
    assert np.array_equal(before, after)
    assert back.metadata == fn.metadata
    assert back.item_space.group_names == fn.item_space.group_names


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_documented_reader_snippet_matches_engine(tmp_path, kind):
    """The plain-NumPy reader of docs/model-format.md computes the same g."""
    fn = _random_function(kind, seed=5)
    save_model(fn, tmp_path / "m.npz")
    f = np.load(tmp_path / "m.npz", allow_pickle=False)

    def k(a, b, ls):
        diff = (a[:, None, :] - b[None, :, :]) / ls
        return np.exp(-0.5 * (diff**2).sum(-1))

    x_l, x_r = fn.items[:7], fn.items[7:14]
    ls, a = f["lengthscales"], f["alpha"]
    ll, lr = k(f["centres_left"], x_l, ls), k(f["centres_left"], x_r, ls)
    rl, rr = k(f["centres_right"], x_l, ls), k(f["centres_right"], x_r, ls)
    if kind == "upm":
        doc = a @ (ll - rl) - a @ (lr - rr)
    else:
        if kind == "cgpm":
            w = f["context_weights"]
            ku = k(f["centres_context"], f["contexts"], f["context_lengthscales"])
            a = a * (ku @ w) / w.sum()
        doc = a @ (ll * rr - lr * rl)
    np.testing.assert_allclose(fn.decision(x_l, x_r), doc, rtol=1e-10, atol=1e-12)


def test_foreign_file_without_optional_arrays_loads(tmp_path):
    arrays = model_arrays(_random_function("cgpm"))
    for optional in ("metadata", "context_group_names", "context_feature_group"):
        arrays.pop(optional)
    np.savez(tmp_path / "foreign.npz", **arrays)
    fn = load_model(tmp_path / "foreign.npz")
    assert fn.context_space.group_names == ("surface=clay", "surface=hard")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda a: a.pop("alpha"), "missing required array 'alpha'"),
        (lambda a: a.update(kind=np.array("svm")), "kind must be one of"),
        (lambda a: a.update(centres_left=a["centres_left"][:, :2]), "'centres_left' has shape"),
        (lambda a: a.update(lengthscales=-a["lengthscales"]), "'lengthscales' must be positive"),
        (lambda a: a.update(items=a["items"] * np.nan), "NaN"),
        (lambda a: a.update(format_version=np.array(7)), "format_version 7"),
        (lambda a: a.update(feature_group=np.array([0, 1, 5, 5])), "points outside"),
    ],
)
def test_bad_files_get_precise_errors(tmp_path, mutate, message):
    arrays = model_arrays(_random_function("gpm"))
    mutate(arrays)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match=message):
        load_model(tmp_path / "bad.npz")


def test_pickled_arrays_and_garbage_are_refused(tmp_path):
    arrays = model_arrays(_random_function("gpm"))
    arrays["item_ids"] = np.array(list(arrays["item_ids"]), dtype=object)
    np.savez(tmp_path / "pickled.npz", **arrays)
    with pytest.raises(ModelFileError):
        load_model(tmp_path / "pickled.npz")
    with pytest.raises(ModelFileError, match="not a readable"):
        load_model(b"this is not a zip file")
    with pytest.raises(ModelFileError, match="no such file"):
        load_model(tmp_path / "missing.npz")


def test_save_is_atomic_and_bytes_load(tmp_path):
    fn = _random_function("upm")
    path = save_model(fn, tmp_path / "sub" / "m.npz")
    assert [p.name for p in path.parent.iterdir()] == ["m.npz"]
    back = load_model(path.read_bytes())
    assert np.array_equal(back.alpha, fn.alpha)
    assert io.BytesIO(path.read_bytes()).read(2) == b"PK"
