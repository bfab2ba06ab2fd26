"""The dashboard's one explanation cache: keyed by an explicit request (model, duels or
inline rows, what, precision), one computation per request, inline (what-if) duels on
the request's executor, and the request keys of the code before (pinned)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dashboard.components import precision as precision_component
from dashboard.services import explanation_cache as cache_module
from dashboard.services.explain_requests import inline_request, request
from dashboard.services.explanation_cache import ExplanationCache
from dashboard.state import Precision
from prefshap_core.cache import DiskCache
from prefshap_core.explain import Explainer, ExplainOptions, LocalExecutor, Shapley
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.reference import random_preference_function

FN = random_preference_function("gpm", n_items=8, n_centres=6, seed=3)


def _model(settings_fp: str = "settingsfp"):
    """What the cache reads of a trained model: its fingerprints, function and dtype."""
    return SimpleNamespace(
        data_fp="datafp",
        settings_fp=settings_fp,
        function=FN,
        settings=SimpleNamespace(dtype="float64"),
    )


def _loaded(n_duels: int = 60):
    data = SimpleNamespace(duel_ids=np.array([f"d{k}" for k in range(n_duels)]))
    return SimpleNamespace(fingerprint="datafp", title="Test data", data=data)


class CountingExplainDuels:
    """Stands in for workflow.explain_duels: counts calls, returns a known explanation."""

    def __init__(self) -> None:
        self.calls: list[np.ndarray] = []

    def __call__(self, fn, data, duels, *, explainer, progress=None) -> Explanation:
        self.calls.append(np.asarray(duels))
        q = len(duels)
        values = np.outer(np.arange(1, q + 1), [1.0, -2.0])
        return Explanation(
            values=values, base_values=np.zeros(q), outputs=values.sum(1),
            data=np.zeros((q, 2)), player_names=("a", "b"), duel_ids=data.duel_ids[duels],
            left_ids=np.full(q, "x"), right_ids=np.full(q, "y"), winners=np.ones(q, np.int8),
            what=explainer.options.what,
        )  # fmt: skip


@pytest.fixture
def explain_duels(monkeypatch) -> CountingExplainDuels:
    counting = CountingExplainDuels()
    monkeypatch.setattr(cache_module, "explain_duels", counting)
    return counting


def test_request_keys_are_those_of_the_code_before() -> None:
    """Computed with the dashboard before the explicit request (same fingerprints and
    duels): explanations cached on disk then are found now."""
    loaded, model = _loaded(), _model()
    duels = np.array([7, 3, 3, 11, 5])
    pinned = {
        ("auto", "items"): "7059a494da0670d7739b2ad7cbff6f96",
        ("exact", "context"): "c220b116abfa85ac372f31a69af84f7e",
        ("sampled", "sides"): "a52f6393c7a6d7fcedf1df618b12a425",
    }
    for (mode, what), key in pinned.items():
        req = request(loaded, model, duels, what, precision=Precision(mode, 512), executor=None,
                      cap=None)  # fmt: skip
        assert req.key == key
        assert req.duels.tolist() == [3, 5, 7, 11] and req.n_available == 4
    capped = request(loaded, model, np.arange(50), precision=Precision("sampled", 64),
                     executor=None, cap=10)  # fmt: skip
    assert capped.key == "584c7f0075d50d5d55358d822a99e8de" and capped.sampled
    assert capped.duels.tolist() == [0, 1, 3, 8, 11, 13, 21, 26, 34, 40]


def test_precision_is_explicit_and_reaches_the_options() -> None:
    loaded, model = _loaded(), _model()
    with pytest.raises(TypeError):
        request(loaded, model, np.arange(3), executor=None)  # type: ignore[call-arg]
    for chosen, shapley in [
        (Precision(), Shapley()),
        (Precision("exact", 512), Shapley("exact")),
        (Precision("sampled", 300), Shapley("sampled", 300)),
    ]:
        req = request(loaded, model, np.arange(3), "sides", precision=chosen, executor=None)
        assert req.options.shapley == shapley and req.what == "sides"
    auto, exact = (
        request(loaded, model, np.arange(3), precision=Precision(mode), executor=None)
        for mode in ("auto", "exact")
    )
    assert auto.key != exact.key


def test_one_computation_per_request_then_memory_then_disk(tmp_path, explain_duels) -> None:
    loaded, model = _loaded(), _model()
    req = request(loaded, model, np.arange(20), precision=Precision(), executor=None)
    cache = ExplanationCache(DiskCache(tmp_path))
    assert cache.get(req) is None
    first = cache.compute(req)
    assert len(explain_duels.calls) == 1 and first.meta["dataset"] == "Test data"
    # the same request again (a rerun, another view): from memory, not even the disk
    reads: list[str] = []
    original_load = cache.disk.load_explanation
    cache.disk.load_explanation = lambda key: reads.append(key) or original_load(key)  # type: ignore[method-assign]
    assert cache.compute(req) is first and cache.get(req) is first
    assert len(explain_duels.calls) == 1 and reads == []
    # an equal request built again (another session): the same entry
    again = request(loaded, model, np.arange(20), precision=Precision(), executor=None)
    assert cache.compute(again) is first and len(explain_duels.calls) == 1
    # where it runs is not part of the result: the same entry
    elsewhere = request(loaded, model, np.arange(20), precision=Precision(),
                        executor=LocalExecutor())  # fmt: skip
    assert elsewhere.key == req.key and cache.compute(elsewhere) is first
    # a restarted server (a new process-wide cache over the same folder): from disk
    restarted = ExplanationCache(DiskCache(tmp_path))
    back = restarted.compute(req)
    assert len(explain_duels.calls) == 1
    np.testing.assert_array_equal(back.values, first.values)
    # another precision is another explanation
    sampled = request(loaded, model, np.arange(20), precision=Precision("sampled", 64),
                      executor=None)  # fmt: skip
    cache.compute(sampled)
    assert len(explain_duels.calls) == 2
    cache.forget(req)
    assert cache.get(req) is None and DiskCache(tmp_path).load_explanation(req.key) is None


def test_one_duel_is_cut_from_a_covering_explanation_of_the_same_options(
    tmp_path, explain_duels
) -> None:
    loaded, model = _loaded(), _model()
    cache = ExplanationCache(DiskCache(tmp_path))
    losses = request(loaded, model, np.arange(10, 30), precision=Precision(), executor=None)
    whole = cache.compute(losses)
    one = request(loaded, model, np.array([17]), precision=Precision(), executor=None, cap=None)
    cut = cache.find_duel(one)
    assert cut is not None and cut.duel_ids.tolist() == ["d17"]
    np.testing.assert_array_equal(cut.values, whole.values[[7]])
    other = request(loaded, model, np.array([17]), precision=Precision("exact"), executor=None)
    assert cache.find_duel(other) is None  # never cut from other options
    outside = request(loaded, model, np.array([5]), precision=Precision(), executor=None)
    assert cache.find_duel(outside) is None
    assert len(explain_duels.calls) == 1


class RecordingExecutor:
    """In-process, recording every map call (the executor seam)."""

    def __init__(self) -> None:
        self.calls = 0
        self._local = LocalExecutor()

    def map(self, work, slices, on_done=None):
        self.calls += 1
        return self._local.map(work, slices, on_done)


def test_inline_duels_run_on_the_requests_executor_and_stay_in_memory(tmp_path) -> None:
    fn = FN
    loaded, model = _loaded(), _model()
    recorder = RecordingExecutor()
    edited = fn.items[[1]] + 0.5, fn.items[[4]]
    req = inline_request(loaded, model, *edited, precision=Precision(), executor=recorder)
    assert req.inline is not None and req.duels is None and req.owner is None
    cache = ExplanationCache(DiskCache(tmp_path))
    expl = cache.compute(req)
    assert recorder.calls >= 1  # the what-if duel went through the executor
    direct = Explainer(fn, ExplainOptions())(*edited)
    np.testing.assert_array_equal(expl.values, direct.values)
    np.testing.assert_array_equal(expl.outputs, direct.outputs)
    calls = recorder.calls
    assert cache.compute(req) is expl and recorder.calls == calls  # a rerun: from memory
    assert not (tmp_path / "explanations").exists()  # never on disk
    # another edit is another duel; the explainer (and its factorizations) is shared
    other = inline_request(loaded, model, fn.items[[1]] + 0.75, fn.items[[4]],
                           precision=Precision(), executor=recorder)  # fmt: skip
    assert other.key != req.key and cache.explainer(other) is cache.explainer(req)
    # an inline duel is never mistaken for a dataset duel with the same id
    dataset_one = request(loaded, model, np.array([0]), precision=Precision(), executor=None)
    assert cache.find_duel(dataset_one) is None


def test_explainers_are_kept_per_model_options_and_executor(tmp_path) -> None:
    loaded = _loaded()
    cache = ExplanationCache(DiskCache(tmp_path))

    def req(precision=None, executor=None, settings_fp="settingsfp"):
        return request(loaded, _model(settings_fp), np.arange(3),
                       precision=precision or Precision(), executor=executor)  # fmt: skip

    kept = cache.explainer(req())
    assert cache.explainer(req()) is kept
    assert cache.explainer(req(precision=Precision("exact"))) is not kept
    recorder = RecordingExecutor()
    on_recorder = cache.explainer(req(executor=recorder))
    assert on_recorder is not kept and on_recorder.options.executor is recorder
    for k in range(cache_module.MAX_EXPLAINERS):
        cache.explainer(req(settings_fp=f"other{k}"))
    assert cache.explainer(req()) is not kept  # the oldest made room


def test_the_automatic_label_comes_from_the_engine_threshold(monkeypatch) -> None:
    label = precision_component.auto_label()
    assert label == (
        "Automatic (exact up to 12 item/context features, 16 side-split players; sampled beyond)"
    )
    limits = {"items": 10, "context": 8, "sides": 14}
    monkeypatch.setattr(precision_component, "auto_exact_players", limits.__getitem__)
    assert precision_component.auto_label() == (
        "Automatic (exact up to 10 item features, 8 context features, 14 side-split "
        "players; sampled beyond)"
    )
    assert precision_component.mode_labels()["auto"] == precision_component.auto_label()
