"""glibc's malloc thresholds (prefshap_core.malloc_tuning), seen in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from prefshap_core import malloc_tuning
from prefshap_core.paths import repo_root

# Four 16 MiB arrays freed and allocated again: with the tuning they come back from the
# heap (no page is faulted in again); with glibc's defaults the heap above its trim
# threshold went back to the kernel and is faulted in again (2,076 of 16,384 pages).
REUSE = """
import json, resource, numpy as np
import prefshap_core
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
blocks = [np.ones(2 * 2**20) for _ in range(4)]
del blocks
start = faults()
blocks = [np.ones(2 * 2**20) for _ in range(4)]
print(json.dumps([faults() - start, prefshap_core.malloc_tuning.STATUS]))
"""


def _run(**env: str) -> tuple[int, str]:
    environment = {k: v for k, v in os.environ.items() if k not in malloc_tuning.USER_SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", REUSE], cwd=repo_root(), env={**environment, **env},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    faults, status = json.loads(done.stdout.strip().splitlines()[-1])
    return faults, status


@pytest.mark.skipif(sys.platform != "linux" or malloc_tuning.STATUS != "on", reason="glibc only")
def test_freed_work_arrays_are_reused_not_faulted_in_again() -> None:
    faults, status = _run()
    assert status == "on"
    assert faults < 200  # the 16,384 pages of the arrays come from the heap as they are
    # and the measurement can tell: with glibc's own thresholds they are faulted again
    off_faults, off_status = _run(**{malloc_tuning.DISABLE_ENV: "0"})
    assert off_status == "off: PREFSHAP_MALLOC_TUNING=0"
    assert off_faults > 1000


def test_the_users_own_malloc_settings_rule() -> None:
    if sys.platform != "linux":
        pytest.skip("glibc only")
    _, status = _run(MALLOC_TRIM_THRESHOLD_="131072")
    assert status == "off: MALLOC_TRIM_THRESHOLD_ set by the user"
