"""Items by activity (workflow.items.duel_counts / most_active_first): pick-list order."""

from __future__ import annotations

import numpy as np

from prefshap_core.analysis.head_to_head import most_active_pair
from prefshap_core.data.build import load_directory
from prefshap_core.paths import repo_root
from prefshap_core.workflow.items import duel_counts, most_active_first


def test_counts_and_order_match_a_direct_count() -> None:
    data = load_directory(repo_root() / "sample_data")
    direct = np.zeros(data.n_items, dtype=np.int64)
    for left, right in zip(data.left, data.right, strict=True):
        direct[left] += 1
        direct[right] += 1
    np.testing.assert_array_equal(duel_counts(data), direct)
    order = most_active_first(data)
    assert sorted(order.tolist()) == list(range(data.n_items))
    # Most duels first, equal counts in pool order.
    assert order.tolist() == sorted(range(data.n_items), key=lambda k: (-direct[k], k))
    assert most_active_pair(data) == tuple(str(data.item_ids[k]) for k in order[:2])
