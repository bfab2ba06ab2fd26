"""The "Share link" popover: this session's link, and what anyone who opens it sees.

A session's token is a bearer secret: whoever has the URL opens the session's record
(its data, uploaded files included, and its models). The address bar holds the same
link; this popover says so in words before anyone sends it.
"""

from __future__ import annotations

import streamlit as st

from dashboard import sessions, sources, state
from dashboard.components.text import md


def share_link(loaded: state.LoadedData) -> None:
    """A "Share link" popover for the session showing ``loaded`` (none for the bare demo)."""
    sources.remember_session()  # the record the link opens exists before it is shown
    token = state.restore_record()["token"]
    if token is None:
        return
    if loaded.source == "upload":
        what = "the uploaded files " + ", ".join(f"**{md(name)}**" for name in loaded.files)
    else:
        what = f"the dataset **{md(loaded.title)}**"
    days = sessions.ttl_seconds() / 86400
    with st.popover("Share link", icon=":material/share:"):
        st.markdown(
            f"Anyone who opens this link sees this session's data ({what}) and the models "
            f"trained on it, until {days:g} days after the session was last used. Send it "
            "only to people who may see that data. What they do afterwards with other data "
            "is not shared back."
        )
        st.code(f"{st.context.url or ''}?{sources.URL_PARAM}={token}", language=None)
