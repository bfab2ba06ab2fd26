import io
import re

import numpy as np
import pytest

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import ModelFileError
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.models.model_file import (
    DOCUMENTED_ARRAYS,
    load_model,
    model_arrays,
    save_model,
)
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.paths import repo_root


def _random_function(kind: str, seed: int = 0, utility_weight: float = 0.0) -> PreferenceFunction:
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
        utility_weight=0.0 if kind == "upm" else utility_weight,
        metadata={"dataset": "unit", "auc": 0.9},
        **extra,
    )


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("utility_weight", [0.0, 3.5])
def test_round_trip_gives_identical_g(tmp_path, kind, utility_weight):
    fn = _random_function(kind, utility_weight=utility_weight)
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
    assert back.utility_weight == fn.utility_weight
    assert int(np.load(path)["format_version"]) == 2  # the writer always writes 2


def test_optional_item_names_round_trip_without_a_new_version(tmp_path):
    from dataclasses import replace

    fn = _random_function("gpm")
    assert load_model(save_model(fn, tmp_path / "bare.npz")).item_names is None
    names = np.array([f"name {k}" for k in range(len(fn.item_ids))])
    path = save_model(replace(fn, item_names=names), tmp_path / "named.npz")
    back = load_model(path)
    assert back.item_names.tolist() == names.tolist()
    assert back.item_labels.tolist() == names.tolist()
    assert int(np.load(path)["format_version"]) == 2
    arrays = dict(np.load(path))
    arrays["item_names"] = names[:-1]
    np.savez(tmp_path / "short.npz", **arrays)
    with pytest.raises(ModelFileError, match="item_names"):
        load_model(tmp_path / "short.npz")


def _documented_reader() -> str:
    """The Python block of docs/model-format.md, as written there."""
    text = (repo_root() / "docs" / "model-format.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("utility_weight", [0.0, 2.5])
def test_documented_reader_snippet_matches_engine(tmp_path, monkeypatch, kind, utility_weight):
    """The plain-NumPy reader of docs/model-format.md, run as written, computes the same g."""
    fn = _random_function(kind, seed=5, utility_weight=utility_weight)
    save_model(fn, tmp_path / "model.npz")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(_documented_reader(), namespace)  # reads "model.npz" in the working directory
    x_l, x_r = fn.items[:7], fn.items[7:14]
    np.testing.assert_allclose(
        fn.decision(x_l, x_r), namespace["g"](x_l, x_r), rtol=1e-10, atol=1e-12
    )
    if kind == "cgpm":
        u = fn.contexts[np.arange(7) % len(fn.contexts)]
        np.testing.assert_allclose(
            fn.decision(x_l, x_r, u), namespace["g"](x_l, x_r, u), rtol=1e-10, atol=1e-12
        )


def _as_version_1(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    old = dict(arrays)
    old.pop("utility_weight")
    old["format_version"] = np.array(1, dtype=np.int64)
    return old


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_version_1_files_load_as_utility_weight_0_and_explain_identically(tmp_path, kind):
    fn = _random_function(kind, seed=2)
    np.savez(tmp_path / "v1.npz", **_as_version_1(model_arrays(fn)))
    old = load_model(tmp_path / "v1.npz")
    new = load_model(save_model(fn, tmp_path / "v2.npz"))
    assert old.utility_weight == 0.0
    left, right = np.array([0, 3, 5]), np.array([1, 4, 9])
    assert np.array_equal(
        old.decision(old.items[left], old.items[right]),
        new.decision(new.items[left], new.items[right]),
    )
    a, b = Explainer(old)(left, right), Explainer(new)(left, right)
    assert np.array_equal(a.values, b.values) and np.array_equal(a.base_values, b.base_values)
    if kind == "cgpm":
        u = fn.contexts[[0, 1, 0]]
        context = ExplainOptions(what="context")
        a = Explainer(old, context)(left, right, contexts=u)
        b = Explainer(new, context)(left, right, contexts=u)
        assert np.array_equal(a.values, b.values)


def test_utility_weight_is_required_in_version_2_and_non_negative(tmp_path):
    arrays = model_arrays(_random_function("gpm", utility_weight=1.0))
    missing = dict(arrays)
    missing.pop("utility_weight")
    np.savez(tmp_path / "missing.npz", **missing)
    with pytest.raises(ModelFileError, match="missing required array 'utility_weight'"):
        load_model(tmp_path / "missing.npz")
    np.savez(tmp_path / "negative.npz", **{**arrays, "utility_weight": np.array(-1.0)})
    with pytest.raises(ModelFileError, match="'utility_weight' must be >= 0"):
        load_model(tmp_path / "negative.npz")
    # a UPM's weight is ignored
    upm = model_arrays(_random_function("upm"))
    np.savez(tmp_path / "upm.npz", **{**upm, "utility_weight": np.array(4.0)})
    assert load_model(tmp_path / "upm.npz").utility_weight == 0.0


def test_the_writer_writes_only_documented_arrays():
    documented = set(DOCUMENTED_ARRAYS)
    doc = (repo_root() / "docs" / "model-format.md").read_text(encoding="utf-8")
    for name in documented:
        assert f"| `{name}` |" in doc, name
    for kind in ("gpm", "upm", "cgpm"):
        assert set(model_arrays(_random_function(kind))) <= documented


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
        (lambda a: a.update(utility_weight=np.array(np.inf)), "NaN or infinite"),
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


def test_posterior_factor_is_stored_and_the_rest_deflated(tmp_path):
    """The posterior factor is stored (deflate gains ~3 % on it, slowly), everything
    else deflated; ``np.load`` and ``load_model`` read the file back exactly, and the
    same model gives the same bytes."""
    import zipfile
    from dataclasses import replace

    fn = _random_function("gpm", utility_weight=2.0)
    factor = np.random.default_rng(1).normal(size=(len(fn.alpha), 5))
    fn = replace(fn, posterior_factor=factor)
    path = save_model(fn, tmp_path / "m.npz")
    with zipfile.ZipFile(path) as archive:
        methods = {i.filename[: -len(".npy")]: i.compress_type for i in archive.infolist()}
    assert methods.pop("posterior_factor") == zipfile.ZIP_STORED
    assert set(methods.values()) == {zipfile.ZIP_DEFLATED}
    assert set(methods) | {"posterior_factor"} == set(model_arrays(fn))
    with np.load(path, allow_pickle=False) as plain:
        for key, value in model_arrays(fn).items():
            assert np.array_equal(plain[key], value), key
    back = load_model(path)
    assert np.array_equal(back.posterior_factor, factor)
    assert save_model(fn, tmp_path / "again.npz").read_bytes() == path.read_bytes()
