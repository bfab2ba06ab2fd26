"""OpenMP wait defaults: set by the package, before torch loads, and the user's win.

libgomp reads ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` once, when torch loads it; so
every entry point (CLI, dashboard, tests, benchmarks) must import ``prefshap_core``
before anything that loads torch (``prefshap_core/__init__.py`` says why these values).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prefshap_core import OPENMP_DEFAULTS
from prefshap_core.paths import repo_root

ROOT = repo_root()
_PROBE = (
    "import json, os, sys; import prefshap_core; "
    "print(json.dumps({'env': {k: os.environ.get(k) for k in %r}, "
    "'torch': 'torch' in sys.modules}))"
)
# Module-level imports that load torch (or another OpenMP user) when they run; the
# benchmarks' own helper modules count as what they import first.
_LOADS_OPENMP = ("torch", "lightgbm", "streamlit", "dashboard")
_LOCAL = ROOT / "benchmarks"


def _probe(extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_DEFAULTS}
    env.update(extra)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE % (list(OPENMP_DEFAULTS),)],
        env=env, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_importing_the_package_sets_the_defaults_without_loading_torch() -> None:
    seen = _probe({})
    assert seen["env"] == OPENMP_DEFAULTS
    assert OPENMP_DEFAULTS["OMP_WAIT_POLICY"] == "PASSIVE"
    assert int(OPENMP_DEFAULTS["GOMP_SPINCOUNT"]) > 0  # a short spin, not none
    assert seen["torch"] is False  # else the values would come too late


def test_values_the_user_set_are_kept() -> None:
    given = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "123"}
    assert _probe(given)["env"] == given


def _package_first(path: Path) -> bool | None:
    """Whether ``path`` imports prefshap_core before anything that loads OpenMP.

    None: it imports neither at module level (it loads nothing itself).
    """
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "prefshap_core":
                return True
            if name.startswith(_LOADS_OPENMP):
                return False
            helper = _LOCAL / f"{name}.py"
            if helper.is_file() and helper != path:
                first = _package_first(helper)
                if first is not None:
                    return first
    return None


ENTRY_POINTS = [
    ROOT / "dashboard" / "app.py",
    ROOT / "tests" / "conftest.py",
    *sorted((ROOT / "benchmarks").glob("*.py")),
]


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_entry_points_import_the_package_before_torch(path: Path) -> None:
    assert _package_first(path) is not False, (
        f"{path.relative_to(ROOT)} may load OpenMP before it imports prefshap_core "
        "(the package's wait defaults would come too late)"
    )


def test_the_check_sees_a_late_import(tmp_path: Path) -> None:
    late = tmp_path / "late.py"
    late.write_text("import os\nimport torch\nimport prefshap_core\n")
    early = tmp_path / "early.py"
    early.write_text("import prefshap_core\nimport torch\n")
    assert _package_first(late) is False
    assert _package_first(early) is True
    assert _package_first(_LOCAL / "bench_training_scale.py") is True  # via its helper
