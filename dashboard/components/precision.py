"""The exact / number-of-samples control: how every explanation of this session is made.

One choice per session (shown on each page that explains), part of every cache key:
changing it makes new explanations and never mixes them with the others.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state

MODES = {
    "auto": "Automatic (exact up to 12 features, sampled beyond)",
    "exact": "Exact (every coalition)",
    "sampled": "Sampled coalitions",
}


def precision_control(key: str) -> None:
    """A small popover with the session's choice; ``key`` tells pages' widgets apart."""
    mode, n_samples = state.precision()
    label = "Exact values" if mode == "exact" else (
        f"Sampled ({n_samples:,} coalitions)" if mode == "sampled" else "Automatic precision"
    )  # fmt: skip
    with st.popover(label, icon=":material/tune:"):
        mode = st.radio(
            "Shapley values", list(MODES), index=list(MODES).index(mode), format_func=MODES.get,
            key=f"precision:mode:{key}",
            help="Sampled values carry standard errors (shown as error bars). Exact costs "
            "2^features coalitions per duel.",
        )  # fmt: skip
        n_samples = st.number_input(
            "Sampled coalitions", min_value=16, max_value=1_000_000, value=n_samples, step=64,
            key=f"precision:n:{key}", disabled=mode != "sampled",
            help="Paired Shapley-kernel sampling; at least all coalitions means exact.",
        )  # fmt: skip
    state.set_precision(mode, int(n_samples))
