"""Errors on a page: the engine's messages as they are, anything else without a traceback.

The engine raises :class:`PrefShapError` subclasses for everything a user can cause
(bad upload, impossible option, missing dataset); their messages already name the
file, row and column, so they are shown verbatim. Anything else is a bug: the user
gets a friendly sentence and the details folded away, never a raw traceback.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable

import streamlit as st
from streamlit.errors import FragmentHandledException

from dashboard.components.text import md
from prefshap_core.errors import PrefShapError

_LOG = logging.getLogger("prefshap.dashboard")
# Absolute paths (server folders, site-packages, the user's home) in a message.
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\\/'\":,()]+){2,}[\\/]?")

FRIENDLY = (
    "Something went wrong here. Your data and models are kept: try again, or switch "
    "page and come back. If it happens again, please report it with the details below."
)


def without_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last part (no server folders)."""
    return _PATH.sub(lambda m: "…/" + re.split(r"[\\/]", m.group(0).rstrip("/\\"))[-1], text)


def public_details(exc: BaseException) -> str:
    """What a visitor may see of an unexpected error: type and message, no paths and
    no traceback (the server log has those)."""
    message = without_paths(str(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def show_error(exc: BaseException, details: str | None = None) -> None:
    """One error, the way every page shows errors.

    The engine's own messages are shown as they are (escaped: they quote file,
    column and item names). Anything else is logged in full on the server and shown
    as type and message only: tracebacks name server paths.
    """
    if isinstance(exc, PrefShapError):
        st.error(md(without_paths(str(exc))), icon=":material/error:")
        return
    _LOG.error(
        "unexpected error on a page\n%s", details or "".join(traceback.format_exception(exc))
    )
    st.error(FRIENDLY, icon=":material/error:")
    with st.expander("Details"):
        st.code(public_details(exc), language=None)


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
