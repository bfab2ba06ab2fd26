"""Dask scheduler addresses, checked before anything connects.

``distributed`` accepts many schemes and reports a wrong one only after its connect
timeout, with a traceback from the half-built client's clean-up. The product runs on
plain Dask clusters, so an address is one of

    tcp://HOST:PORT    tls://HOST:PORT    inproc://NAME    HOST:PORT (tcp)

with HOST a host name, an IPv4 address or a bracketed IPv6 address and PORT in
1..65535. Anything else (``file:///etc/passwd``, ``http://...``, a bare host name) is
refused at once with :class:`SchedulerAddressError`, naming the accepted forms.
"""

from __future__ import annotations

import re

from prefshap_core.errors import PrefShapError

ACCEPTED_FORMS = "tcp://HOST:PORT, tls://HOST:PORT, inproc://NAME or HOST:PORT"
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]{2,45}\]")
_INPROC_NAME = re.compile(r"[A-Za-z0-9._:/-]{1,200}")


class SchedulerAddressError(PrefShapError, ValueError):
    """A scheduler address that is not one of :data:`ACCEPTED_FORMS`."""


def check_scheduler_address(address: object) -> str:
    """``address`` stripped, if it is a Dask scheduler address the product accepts;
    else :class:`SchedulerAddressError` saying why and what is accepted."""
    if not isinstance(address, str) or not address.strip():
        raise SchedulerAddressError(
            f"a Dask scheduler address is needed ({ACCEPTED_FORMS}), got {address!r}"
        )
    text = address.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    scheme = scheme.lower()
    if scheme == "inproc":
        if not _INPROC_NAME.fullmatch(rest):
            raise _refused(text, "an inproc address needs a name after inproc://")
        return text
    if scheme not in ("tcp", "tls"):
        raise _refused(text, f"the scheme {scheme!r} is not one a Dask cluster is reached by")
    host, colon, port = rest.rpartition(":")
    if not colon or not host:
        raise _refused(text, "it needs a host and a port (e.g. tcp://scheduler:8786)")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise _refused(text, f"the port {port!r} is not a number in 1..65535")
    if not (_HOST_NAME.fullmatch(host) or _IPV6.fullmatch(host)):
        raise _refused(text, f"{host!r} is not a host name or an IP address")
    return text


def _refused(address: str, why: str) -> SchedulerAddressError:
    return SchedulerAddressError(
        f"{address!r} is not a Dask scheduler address: {why}; use {ACCEPTED_FORMS}"
    )
