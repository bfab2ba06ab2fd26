"""Deep links: every view's state in ``st.query_params``, so a copied URL reopens it.

Parameter names (the contract): ``dataset, model, player, view, duel, a, b,
context, edit_a, edit_b``; the page is the URL path (``View.url_path`` in :mod:`dashboard.pages`,
also a contract). ``dataset`` is a built-in dataset's name
(``demo``, ``pokemon``, ...) or, for an upload, ``upload:<digest>`` (its dataset
key), which opens only with its own session's ``session=`` token in the same URL (the
files are kept in that session's record, never in the link);
``model`` is the model's settings fingerprint (reloaded from the disk cache);
``player``, ``a``, ``b`` are item ids, ``duel`` a duel id, ``view`` a page's view
(e.g. ``losses``), ``context`` a context slice (``tourney_surface = Clay``),
``edit_a`` / ``edit_b`` the Head-to-head what-if edits of item A / B, each
``col=value;col=value`` in raw units (every column name and value URL-encoded
inside, so a ``;`` or ``=`` of a name survives; only the edited columns).

A URL is applied once, when it is new to the session (pasted, opened, reloaded);
after that the pages write their state into it, so widgets and URL never fight.
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlencode

import numpy as np
import streamlit as st

from dashboard import pages, sources, state
from dashboard.components.text import md
from dashboard.services.training import cached_model

PARAMS = ("dataset", "model", "player", "view", "duel", "a", "b", "context", "edit_a", "edit_b")
BUILTIN_PREFIX = "builtin:"
DEMO_NAME = "demo"


def dataset_param(loaded: state.LoadedData) -> str | None:
    """What ``dataset=`` says for this dataset (None: it cannot be linked)."""
    if loaded.key == sources.DEMO_KEY:
        return DEMO_NAME
    if loaded.key.startswith(BUILTIN_PREFIX):
        return loaded.key.removeprefix(BUILTIN_PREFIX)
    if sources.UPLOAD_KEY.fullmatch(loaded.key):  # opens within its own session only
        return loaded.key
    return None


def _find_dataset(name: str) -> state.LoadedData | None:
    if name.startswith("upload:"):
        return sources.restore_upload(name)
    key = sources.DEMO_KEY if name == DEMO_NAME else f"{BUILTIN_PREFIX}{name}"
    known = state.datasets().get(key)
    if known is not None:
        return known
    choice_key, missing_indicators = sources.split_builtin_key(key)
    choice = next(
        (c for c in sources.builtin_choices() if c.key == choice_key and c.available), None
    )
    if choice is not None:
        return sources.load_builtin(choice, missing_indicators=missing_indicators)
    return None


def _unavailable(name: str) -> str:
    if name.startswith("upload:"):
        return (
            "The linked upload belongs to another session, or its session has expired: "
            "upload the files again on the Data page."
        )
    return f"The linked dataset {md(repr(name))} is not available here."


def _browser_link() -> dict[str, str]:
    """The link parameters of the URL this run came with, until :func:`write` changes it."""
    return {k: st.query_params[k] for k in PARAMS if k in st.query_params}


def apply() -> None:
    """Open the view a new URL describes (dataset, model, selections).

    Not new: the URL this session last wrote or applied, and the URL its last write
    replaced while the browser may not have the new one yet. A run the browser asks for
    (a click) carries the browser's URL of that moment, and a click that lands while
    a run is still sending its URL change carries the URL from before it: applying that
    would undo the user's last choice (a player picked, then "Losses" clicked at once,
    showed the previous player's duels).
    """
    params = _browser_link()
    if params == state.link_seen():
        state.set_replaced_link(None)  # the browser has this session's URL
        return
    if not params or params == state.replaced_link():
        return
    state.set_replaced_link(None)
    state.remember_link(params)
    state.set_link_pending(params)
    loaded = state.active()
    if "dataset" in params:
        wanted = _find_dataset(params["dataset"])
        if wanted is None:
            st.toast(_unavailable(params["dataset"]))
            return
        if loaded is None or wanted.key != loaded.key:
            state.add_dataset(wanted)
            state.load_options()["missing_indicators"] = wanted.missing_indicators
        loaded = wanted
    if loaded is None:
        return
    model = state.model_for(loaded)
    if "model" in params and (model is None or model.settings_fp != params["model"]):
        found = cached_model(loaded, params["model"])
        if found is not None:
            state.set_model(found)
        else:
            st.toast("The linked model is not in this server's cache: train it again.")
    data = loaded.data
    ids = set(np.asarray(data.item_ids).astype(str).tolist())
    if params.get("player") in ids:
        state.select_item(loaded, params["player"])
    if params.get("a") in ids and params.get("b") in ids:
        state.select_pair(loaded, params["a"], params["b"])
    if "context" in params:
        state.select_context(loaded, params["context"])
    if "duel" in params:
        hits = np.flatnonzero(data.duel_ids == params["duel"])
        if len(hits):
            seen_from = params.get("player") if params.get("player") in ids else None
            state.select_duel(loaded, int(hits[0]), seen_from)


def _params(view: dict[str, str | None]) -> dict[str, str]:
    """The parameters of the current dataset and model, plus ``view`` (a page's state)."""
    loaded = state.active()
    params: dict[str, str] = {}
    if loaded is not None:
        name = dataset_param(loaded)
        if name:
            params["dataset"] = name
        model = state.model_for(loaded)
        if model is not None:
            params["model"] = model.settings_fp
    for key, value in view.items():
        if key not in PARAMS:
            raise ValueError(f"unknown query parameter {key!r}")
        if value is not None and value != "":
            params[key] = str(value)
    return params


def url(page: pages.View, **view: str | None) -> str:
    """A relative link to ``page`` showing ``view`` (e.g. ``a=``, ``b=``) on the current
    dataset and model, for a Markdown link: the session it opens applies it."""
    return f"{page.url_path}?{urlencode(_params(view))}"


def write(**view: str | None) -> None:
    """Put the current view into the URL: dataset and model, plus the page's own state.

    Once per run (each page writes in one place per branch), so the URL it replaces is
    the one the run came with: what a click racing this change still carries.
    """
    params = _params(view)
    arrived = _browser_link()
    if params != {k: st.query_params[k] for k in st.query_params}:
        st.query_params.from_dict(params)
    if params != arrived:
        state.set_replaced_link(arrived)
    state.remember_link(params)


def take(name: str, choices: list[str] | None = None) -> str | None:
    """A parameter of a URL just opened, once: the page puts it into its widget
    (which otherwise keeps its own value), later runs get None."""
    value = state.pop_link_pending(name)
    if value is None or (choices is not None and value not in choices):
        return None
    return value


def edits_param(edits: dict[str, object]) -> str | None:
    """What-if edits as ``edit_a=`` / ``edit_b=`` say them: ``col=value;col=value``
    (raw units; names and values URL-encoded inside); None when nothing is edited."""
    if not edits:
        return None
    return ";".join(
        f"{quote(str(column), safe=' ')}={quote(_raw_text(value), safe=' ')}"
        for column, value in edits.items()
    )


def parse_edits(text: str | None) -> dict[str, str]:
    """``col=value;col=value`` back to raw texts by column ({} for None or nonsense)."""
    out: dict[str, str] = {}
    for part in (text or "").split(";"):
        column, sep, value = part.partition("=")
        if sep and column:
            out[unquote(column)] = unquote(value)
    return out


def _raw_text(value: object) -> str:
    if value is None:
        return ""  # an optional category left empty
    if isinstance(value, float):  # short when it round-trips, else every digit it needs
        text = f"{value:.15g}"
        return text if float(text) == value else repr(value)
    return str(value)
