"""Exact or sampled Shapley values: ``Shapley`` (auto | exact | sampled(n)), the one
default number of samples and the one auto threshold per game, and the CLI flags that
choose among them (``--exact``, ``--samples N``, neither)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import explain_command, main
from prefshap_core.explain import (
    Explainer,
    ExplainOptions,
    Shapley,
    auto_exact_players,
    default_samples,
)
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.explain.shapley.coalitions import (
    CoalitionSet,
    choose_coalitions,
    coalition_count,
)
from prefshap_core.explain.shapley.stratified import SampledCoalitions
from prefshap_core.models.model_file import save_model


def test_default_samples_is_two_per_player_plus_2048() -> None:
    for p in (1, 13, 40, 500):
        assert default_samples(p) == 2 * p + 2048


def test_the_auto_threshold_per_game() -> None:
    assert {w: auto_exact_players(w) for w in ("items", "context", "sides")} == {
        "items": 12,
        "context": 12,
        "sides": 16,
    }
    with pytest.raises(ValueError, match="what must be one of"):
        auto_exact_players("pairs")


@pytest.mark.parametrize("what", ["items", "context", "sides"])
def test_auto_is_exact_up_to_the_threshold_then_samples_the_default(what: str) -> None:
    options = ExplainOptions(what=what)  # type: ignore[arg-type]
    limit = auto_exact_players(what)
    assert options.exact_limit() == limit
    assert coalition_count(limit, options.exact_limit(), None) == 2**limit
    beyond = limit + 1
    wanted = default_samples(beyond)  # even: 2p + 2048
    assert coalition_count(beyond, options.exact_limit(), None) == wanted
    chosen = choose_coalitions(beyond, options.exact_limit(), None, seed=0)
    assert isinstance(chosen, SampledCoalitions) and chosen.n_coalitions == wanted
    # auto with a number: that many beyond the threshold, exact below it
    sized = ExplainOptions(what=what, shapley=Shapley("auto", 100))  # type: ignore[arg-type]
    assert coalition_count(beyond, sized.exact_limit(), 100) == 100
    assert coalition_count(limit, sized.exact_limit(), 100) == 2**limit


def test_exact_always_enumerates_and_sampled_always_samples() -> None:
    exact = ExplainOptions(shapley="exact")
    assert exact.exact_limit() == math.inf
    assert coalition_count(30, exact.exact_limit(), None) == 2**30
    assert isinstance(choose_coalitions(5, exact.exact_limit(), None, 0), CoalitionSet)
    sampled = ExplainOptions(shapley="sampled")
    assert sampled.exact_limit() == 0
    assert coalition_count(13, 0, None) == default_samples(13)
    assert coalition_count(13, 0, 100) == 100
    # a sample that would hold every proper coalition is the exact enumeration
    assert coalition_count(4, 0, 14) == 2**4 and coalition_count(4, 0, None) == 2**4


def test_shapley_parses_strings_and_refuses_nonsense() -> None:
    assert Shapley.parse("auto") == Shapley()
    assert Shapley.parse("exact") == Shapley("exact")
    assert Shapley.parse("sampled") == Shapley("sampled", None)
    assert Shapley.parse("sampled:4000") == Shapley("sampled", 4000)
    assert Shapley.parse("auto:300") == Shapley("auto", 300)
    assert str(Shapley("sampled", 4000)) == "sampled:4000" and str(Shapley()) == "auto"
    assert ExplainOptions(shapley="sampled:64").shapley == Shapley("sampled", 64)
    assert ExplainOptions(shapley="sampled:64").key() == (
        ExplainOptions(shapley=Shapley("sampled", 64)).key()
    )
    for bad in ("some", "sampled:1", "exact:10", "sampled:x"):
        with pytest.raises(ValueError):
            ExplainOptions(shapley=bad)


# -- the CLI flags keep their meaning -------------------------------------------------------
@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    fn = random_preference_function("gpm", n_items=8, n_centres=6, seed=4)  # 4 players
    folder = tmp_path_factory.mktemp("shapley_cli")
    path = save_model(fn, folder / "m.npz")
    ids = np.asarray(fn.item_ids)
    duels = folder / "duels.csv"
    pd.DataFrame({"left": ids[[0, 1, 2]], "right": ids[[3, 4, 5]]}).to_csv(duels, index=False)
    return fn, path, duels, ids


@pytest.mark.parametrize(
    "flags, shapley, expect",
    [
        ((), Shapley(), "exact"),  # 4 players: auto enumerates
        (("--exact",), Shapley("exact"), "exact"),
        (("--samples", "6", "--seed", "2"), Shapley("sampled", 6), "sampled"),
    ],
)
def test_cli_flags_choose_as_before(
    model_file, tmp_path, capsys, monkeypatch, flags, shapley, expect
) -> None:
    fn, path, duels, ids = model_file
    asked: list[ExplainOptions] = []

    class Recording(Explainer):
        def __init__(self, model, options=None, **kwargs) -> None:
            asked.append(options)
            super().__init__(model, options, **kwargs)

    monkeypatch.setattr(explain_command, "Explainer", Recording)
    out = tmp_path / "o.csv"
    assert main(["explain", "--model", str(path), "--duels", str(duels), "--out", str(out),
                 *flags]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["shapley"] == expect
    seed = 2 if "--seed" in flags else 0
    assert [(o.shapley, o.seed) for o in asked] == [(shapley, seed)]
    direct = Explainer(fn, ExplainOptions(shapley=shapley, seed=seed, factor_cache_bytes=0))(
        ids[[0, 1, 2]], ids[[3, 4, 5]]
    )
    names = list(fn.item_space.group_names)
    np.testing.assert_array_equal(pd.read_csv(out)[names].to_numpy(), direct.values)
    assert (
        summary["n_coalitions"] == direct.meta["n_coalitions"] == (6 if shapley.n_samples else 16)
    )
