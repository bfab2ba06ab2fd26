"""glibc's malloc keeps freed work memory for reuse instead of handing it back at once.

torch's CPU tensors come from ``malloc``. glibc serves a block above its mmap threshold
(dynamic, 128 KiB at start) with fresh pages from the kernel, and hands the free
memory at the top of its heap back once it exceeds the trim threshold (twice the mmap
threshold). The solvers allocate and free multi-megabyte temporaries all the time
(the ARD search's 4,000 x 400 kernel products: 12.8 MB each, hundreds per training),
so with the defaults most of them are fresh pages: 1.4-1.7 million page faults in one
Pokémon training. On the 2-core AMD EPYC VM a fault of a fresh page costs
microseconds (the hypervisor backs it), and the training spent 5.3-6.0 s in the
kernel.

With the mmap threshold at glibc's largest (32 MiB) and a trim threshold of 512 MiB,
such blocks are reused from the heap. Measured there, ``prefshap train --data pokemon
--model gpm`` (2026-12-07, environment variables ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_``, which are the same settings): 1.41-1.69 million faults ->
0.43-0.47 million, system time 5.3-6.0 -> 1.7-2.1 s, the ARD search 6.1-6.5 -> 4.2-5.4 s,
peak resident memory 1.41-1.55 -> 1.40 GB; a 256 MiB trim threshold kept 0.56 million
faults, 64 MiB all of them. The cost: a process may keep up to 512 MiB of freed memory
(per malloc arena) for its next job instead of returning it; the memory budgets
(:mod:`budget`) count physical memory, not what a process holds.

Linux with glibc only; elsewhere nothing changes and :data:`STATUS` says why. Set
``PREFSHAP_MALLOC_TUNING=0`` to keep glibc's defaults. Either ``MALLOC_*_`` variable
set by the user (glibc reads them at start) is left to rule.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

from prefshap_core.env_switch import turned_off

DISABLE_ENV = "PREFSHAP_MALLOC_TUNING"
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
# mallopt's parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc refuses more (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD_BYTES = 512 * 2**20

# What :func:`enable` did, for benchmarks and bug reports: "on" or "off: <reason>".
STATUS = "off: not tried"


def enable() -> str:
    """Set the two thresholds where they apply; returns and records :data:`STATUS`."""
    global STATUS
    STATUS = _enable()
    return STATUS


def _enable() -> str:
    switched = turned_off(DISABLE_ENV)
    if switched:
        return switched
    if sys.platform != "linux":
        return f"off: not Linux ({sys.platform})"
    given = [name for name in USER_SETTINGS if name in os.environ]
    if given:
        return f"off: {', '.join(given)} set by the user"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 (absent from musl and other C libraries)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "off: the C library is not glibc"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mmap threshold first: setting it also ends glibc's dynamic adjustment of both
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        return "off: mallopt refused the mmap threshold"
    if mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) != 1:
        return "off: mallopt refused the trim threshold"
    return "on"
