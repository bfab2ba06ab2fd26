"""The exact / number-of-samples control: how every explanation of this session is made.

One choice per session (shown on each page that explains), part of every cache key:
changing it makes new explanations and never mixes them with the others. The page
passes the returned choice to its explanation requests.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from prefshap_core.explain.options import WHATS, auto_exact_players

# The players of each game, in the words of the automatic mode's label.
PLAYER_WORDS = {
    "items": ("item", "features"),
    "context": ("context", "features"),
    "sides": ("side-split", "players"),
}


def auto_label() -> str:
    """E.g. 'Automatic (exact up to 12 item/context features, 16 side-split players;
    sampled beyond)': the engine's thresholds (:func:`auto_exact_players`), not a copy."""
    groups: dict[tuple[int, str], list[str]] = {}
    for what in WHATS:
        adjective, noun = PLAYER_WORDS[what]
        groups.setdefault((auto_exact_players(what), noun), []).append(adjective)
    parts = [f"{limit} {'/'.join(words)} {noun}" for (limit, noun), words in groups.items()]
    return f"Automatic (exact up to {', '.join(parts)}; sampled beyond)"


def mode_labels() -> dict[str, str]:
    return {
        "auto": auto_label(),
        "exact": "Exact (every coalition)",
        "sampled": "Sampled coalitions",
    }


def precision_control(key: str) -> state.Precision:
    """A small popover with the session's choice; ``key`` tells pages' widgets apart.

    Returns the choice after this run's widgets (what the page's requests use)."""
    chosen = state.precision()
    modes = mode_labels()
    label = "Exact values" if chosen.mode == "exact" else (
        f"Sampled ({chosen.n_samples:,} coalitions)" if chosen.mode == "sampled"
        else "Automatic precision"
    )  # fmt: skip
    with st.popover(label, icon=":material/tune:"):
        mode = st.radio(
            "Shapley values", list(modes), index=list(modes).index(chosen.mode),
            format_func=modes.get, key=f"precision:mode:{key}",
            help="Sampled values carry standard errors (shown as error bars). Exact costs "
            "2^features coalitions per duel.",
        )  # fmt: skip
        n_samples = st.number_input(
            "Sampled coalitions", min_value=16, max_value=1_000_000, value=chosen.n_samples,
            step=64, key=f"precision:n:{key}", disabled=mode != "sampled",
            help="Paired Shapley-kernel sampling; at least all coalitions means exact.",
        )  # fmt: skip
    chosen = state.Precision(str(mode), int(n_samples))
    state.set_precision(chosen)
    return chosen
