"""Errors on a page: the engine's messages as they are, anything else without a traceback.

The engine raises :class:`PrefShapError` subclasses for everything a user can cause
(bad upload, impossible option, missing dataset); their messages already name the
file, row and column, so they are shown verbatim. Anything else is a bug: the user
gets a friendly sentence and the details folded away, never a raw traceback.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

import streamlit as st
from streamlit.errors import FragmentHandledException

from prefshap_core.errors import PrefShapError

FRIENDLY = (
    "Something went wrong here. Your data and models are kept: try again, or switch "
    "page and come back. If it happens again, please report it with the details below."
)


def show_error(exc: BaseException, details: str | None = None) -> None:
    """One error, the way every page shows errors."""
    if isinstance(exc, PrefShapError):
        st.error(str(exc), icon=":material/error:")
        return
    st.error(FRIENDLY, icon=":material/error:")
    with st.expander("Details"):
        st.code(details or "".join(traceback.format_exception(exc)), language=None)


def run_guarded(render: Callable[[], None]) -> None:
    """Run a page (or fragment) body; show any error instead of raising it.

    Streamlit's own control flow (``st.rerun``, ``st.switch_page``, ``st.stop``) is
    a BaseException and passes through untouched.
    """
    try:
        render()
    except FragmentHandledException:
        raise
    except Exception as exc:
        show_error(exc)
