"""``ExplainOptions.key()`` and the disk keys built from it are pinned: cached
explanations (dashboard, disk) made before must still resolve after any change of how
options are spelled. The values were computed on the code before the ``shapley``
field existed."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from prefshap_core.cache import explanation_key
from prefshap_core.explain import ExplainOptions
from prefshap_core.explain.options import CGOptions, CholeskyOptions, NystromOptions, Shapley

DEFAULT_KEY = (
    '{"cme": {"cg": {"landmarks": "rpcholesky", "max_gram_bytes": null, "max_iter": 100, '
    '"preconditioner_rank": 256, "seed": 0, "tol": null}, "cholesky": {"batch_equal_sizes": '
    'null}, "exact_seconds_budget": 120.0, "method": "auto", "nystrom": {"correction": '
    '"diagonal", "landmarks": "rpcholesky", "n_landmarks": 512, "seed": 0}, '
    '"nystrom_min_saving": 4.0}, "cme_lambda": null, "coalition_batch": null, '
    '"max_exact_players": null, "n_samples": null, "seed": 0, "task_coalitions": null, '
    '"what": "items"}'
)

# name -> (options, (max_exact_players, n_samples) as the key spells them, sha256[:16] of key)
PINNED = {
    "auto items": (lambda: ExplainOptions(), (None, None), "0a8a98f3d3b446bc"),
    "auto context": (lambda: ExplainOptions(what="context"), (None, None), "1406174944777301"),
    "auto sides": (lambda: ExplainOptions(what="sides"), (None, None), "0eda57a549619c0b"),
    "exact items": (
        lambda: ExplainOptions(what="items", shapley="exact"),
        (10**9, None),
        "931a86f831248127",
    ),
    "sampled 512 sides": (
        lambda: ExplainOptions(what="sides", shapley=Shapley("sampled", 512)),
        (0, 512),
        "813efa41ffe23a23",
    ),
    "sampled default n": (
        lambda: ExplainOptions(shapley="sampled"),
        (0, None),
        "9fb56b929faf7cf2",
    ),
    "auto 4000 cg": (
        lambda: ExplainOptions(shapley="auto:4000", cme=CGOptions(tol=1e-8)),
        (None, 4000),
        "9cfc86f3e20ca399",
    ),
    "exact context nystrom seed 3": (
        lambda: ExplainOptions(
            what="context", shapley=Shapley("exact"), seed=3, cme=NystromOptions(n_landmarks=64)
        ),
        (10**9, None),
        "9aba85d4a6b0283f",
    ),
    "auto cholesky lambda batches": (
        lambda: ExplainOptions(
            cme=CholeskyOptions(), cme_lambda=0.01, coalition_batch=4, task_coalitions=10
        ),
        (None, None),
        "ade56b0f57d426a5",
    ),
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_the_default_key_is_the_pinned_string() -> None:
    assert ExplainOptions().key() == DEFAULT_KEY


@pytest.mark.parametrize("name", list(PINNED))
def test_keys_are_pinned(name: str) -> None:
    make, (max_exact, n_samples), digest = PINNED[name]
    key = make().key()
    decoded = json.loads(key)
    assert (decoded["max_exact_players"], decoded["n_samples"]) == (max_exact, n_samples)
    assert "shapley" not in decoded and "executor" not in decoded
    assert _digest(key) == digest, key


def test_explanation_disk_keys_are_pinned() -> None:
    sampled = ExplainOptions(what="sides", shapley=Shapley("sampled", 512))
    assert (
        explanation_key("datafp", "settingsfp", np.array([3, 1, 2]), sampled, cap_seed=0)
        == "9783761bedb2b4be963b6f99350bda90"
    )
    assert (
        explanation_key("datafp", "settingsfp", np.array([0, 5]), ExplainOptions(), "float32",
                        cap_seed=1)
        == "d29a35cc7046fefc1729bc8436e5ac61"
    )  # fmt: skip
