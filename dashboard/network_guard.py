"""Serve this machine only, unless the network was asked for: where the app listens.

Streamlit binds its socket before ``app.py`` runs, from ``server.address``. The
repository's ``.streamlit/config.toml`` sets 127.0.0.1, but Streamlit reads that
file only from the working directory: ``streamlit run /path/to/dashboard/app.py``
started anywhere else has no address and listens on every interface. The app cannot
unbind, so it refuses to serve: each session gets one message instead of the app,
unless

- the address is loopback (127.0.0.0/8, ::1, ``localhost``) or a unix socket;
- an address was given on purpose: a flag such as the Procfile's
  ``--server.address=0.0.0.0``, ``STREAMLIT_SERVER_ADDRESS``, or a config file;
- ``PREFSHAP_ALLOW_NETWORK=1`` is set (every interface, on purpose).
"""

from __future__ import annotations

import ipaddress
import os

import streamlit as st
from streamlit import config

ALLOW_ENV = "PREFSHAP_ALLOW_NETWORK"
REFUSAL = (
    "**Pref-SHAP Studio is not serving: this server listens on every network "
    "interface, and nobody asked it to.** No address was given, and "
    "`.streamlit/config.toml` (which keeps the app on this machine) is read only when "
    "`streamlit run` starts in the repository's folder.\n\n"
    "- This machine only: `streamlit run dashboard/app.py` from the repository, or add "
    "`--server.address=127.0.0.1` from anywhere.\n"
    "- Your network, on purpose: add `--server.address=0.0.0.0` (as the Procfile does) "
    f"or set `{ALLOW_ENV}=1`."
)


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, ``localhost`` (and unix sockets, which no other machine reaches)."""
    host = address.strip().strip("[]").lower()
    if host == "localhost" or host.startswith("unix://"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refusal(address: str | None, *, chosen: bool, allow: str | None) -> str | None:
    """The message to serve instead of the app, or None when serving is fine.

    ``address``: ``server.address`` (None or empty: every interface); ``chosen``:
    whether it was set on purpose (flag, environment, config file); ``allow``: the
    value of ``$PREFSHAP_ALLOW_NETWORK``.
    """
    if (allow or "").strip() == "1":
        return None
    if address and (is_loopback(address) or chosen):
        return None
    return REFUSAL


def listening() -> tuple[str | None, bool] | None:
    """(``server.address``, set on purpose) of the server running this script; None
    under AppTest, which runs the script in-process and listens nowhere."""
    # config.get_option, not st.get_option: AppTest patches the former only.
    if config.get_option("global.appTest"):
        return None
    return config.get_option("server.address"), config.is_manually_set("server.address")


def refuse_unless_local() -> None:
    """Show the refusal and stop the script when this server should not serve."""
    where = listening()
    if where is None:
        return
    message = refusal(where[0], chosen=where[1], allow=os.environ.get(ALLOW_ENV))
    if message is not None:
        st.warning(message, icon=":material/lan:")
        st.stop()
