"""ENGINE_VERSION pins the numbers: exact outputs of fixed problems, stored with the version.

Caches key explanations by ``ENGINE_VERSION`` (prefshap_core.explain.options). A change
that alters a number must bump it; this test fails when the numbers move (beyond
rounding, 1e-12 relative) while the version stays. After a deliberate change: bump
ENGINE_VERSION, then ``python tests/engine/explain/test_engine_version.py`` rewrites the fixture.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from prefshap_core.explain import ENGINE_VERSION, Explainer, ExplainOptions
from prefshap_core.explain.reference import random_preference_function

FIXTURE = Path(__file__).parent / "fixtures" / "engine_outputs.json"
GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2)]
CONTEXT = [("surface", 3), ("temp", 1)]


def outputs() -> dict[str, list]:
    out: dict[str, list] = {}
    for kind in ("gpm", "upm", "cgpm"):
        fn = random_preference_function(
            kind,
            n_items=14,
            n_centres=12,
            groups=GROUPS,
            seed=11,
            levels=2,
            **({"context_groups": CONTEXT} if kind == "cgpm" else {}),
        )
        rng = np.random.default_rng(11)
        left, right = rng.integers(0, 14, 8), rng.integers(0, 14, 8)
        runs = {"exact": ExplainOptions(), "sampled": ExplainOptions(shapley="sampled")}
        for name, options in runs.items():
            e = Explainer(fn, options)(left, right)
            out[f"{kind}-items-{name}"] = [e.values.tolist(), e.outputs.tolist()]
        if kind == "cgpm":
            assert fn.contexts is not None
            ctx = fn.contexts[rng.integers(0, len(fn.contexts), 8)]
            e = Explainer(fn, ExplainOptions(what="context"))(left, right, contexts=ctx)
            out["cgpm-context-exact"] = [
                e.values.tolist(),
                e.outputs.tolist(),
                e.base_values.tolist(),
            ]
    return out


def test_numbers_move_only_with_the_engine_version() -> None:
    stored = json.loads(FIXTURE.read_text())
    assert stored["engine_version"] == ENGINE_VERSION, (
        "ENGINE_VERSION changed: regenerate the fixture "
        "(python tests/engine/explain/test_engine_version.py)"
    )
    now = outputs()
    assert set(now) == set(stored["outputs"])
    for case, arrays in stored["outputs"].items():
        for want, got in zip(arrays, now[case], strict=True):
            want, got = np.asarray(want), np.asarray(got)
            scale = max(1e-300, float(np.abs(want).max()))
            assert np.abs(got - want).max() <= 1e-12 * scale, (
                f"{case}: the engine's numbers changed; bump ENGINE_VERSION "
                "(prefshap_core/explain/options.py) and regenerate the fixture"
            )


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps({"engine_version": ENGINE_VERSION, "outputs": outputs()}))
    print(f"wrote {FIXTURE}", file=sys.stderr)
