"""``Explanation.what`` (what was explained: items, context or sides), set from the
options, and read back from disk entries written when the field was called ``kind``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from prefshap_core.cache import DiskCache
from prefshap_core.cache_integrity import MANIFEST
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.reference import random_preference_function


def _explanation(what: str) -> Explanation:
    q, p = 3, 4 if what == "sides" else 2
    return Explanation(
        values=np.arange(q * p, dtype=np.float64).reshape(q, p), base_values=np.zeros(q),
        outputs=np.arange(q * p, dtype=np.float64).reshape(q, p).sum(1), data=np.zeros((q, p)),
        player_names=tuple(f"g{j}" for j in range(p)), duel_ids=np.array(["0", "1", "2"]),
        left_ids=np.array(["a", "b", "c"]), right_ids=np.array(["b", "c", "a"]),
        winners=np.array([1, -1, 0], dtype=np.int8), what=what,
    )  # fmt: skip


def test_the_field_is_what_and_kind_is_gone() -> None:
    names = {f.name for f in dataclasses.fields(Explanation)}
    assert "what" in names and "kind" not in names
    with pytest.raises(TypeError):
        Explanation(**{**_explanation("items").__dict__, "kind": "items"})


@pytest.mark.parametrize("what", ["items", "context", "sides"])
def test_the_explainer_sets_what_from_its_options(what: str) -> None:
    fn = random_preference_function("cgpm", n_items=8, n_centres=6, seed=2)
    contexts = fn.contexts[[0, 1]] if what == "context" else None
    expl = Explainer(fn, ExplainOptions(what=what))([0, 1], [2, 3], contexts=contexts)  # type: ignore[arg-type]
    assert expl.what == what
    # a view keeps it
    assert expl.oriented_to_winner().what == what and expl.subset([1]).what == what


@pytest.mark.parametrize("what", ["items", "context", "sides"])
def test_disk_entries_round_trip_what_and_keep_the_former_name(tmp_path: Path, what) -> None:
    cache = DiskCache(tmp_path)
    entry = cache.save_explanation("k", _explanation(what))
    assert entry is not None
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["what"] == what and meta["kind"] == what  # earlier versions read "kind"
    back = cache.load_explanation("k")
    assert back is not None and back.what == what


@pytest.mark.parametrize("what", ["items", "context", "sides"])
def test_entries_written_before_the_rename_still_load(tmp_path: Path, what: str) -> None:
    cache = DiskCache(tmp_path)
    entry = cache.save_explanation("old", _explanation(what))
    assert entry is not None
    meta_file = entry / "meta.json"
    meta = json.loads(meta_file.read_text())
    del meta["what"]  # exactly what the earlier version wrote: "kind" only,
    meta_file.write_text(json.dumps(meta))
    (entry / MANIFEST).unlink()  # and no integrity manifest
    back = cache.load_explanation("old")
    assert back is not None and back.what == what
    np.testing.assert_array_equal(back.values, _explanation(what).values)
