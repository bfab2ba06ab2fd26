"""The test suite's own layout: packages by unit, no test module importing another, the
fast lane documented and its markers registered."""

from __future__ import annotations

import ast
import tomllib

from prefshap_core.paths import repo_root

ROOT = repo_root()
TESTS = ROOT / "tests"
PACKAGES = ("cli", "dashboard", "engine", "repo")


def _test_modules() -> list:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_module_lives_in_a_package_by_unit() -> None:
    modules = _test_modules()
    assert modules
    for path in modules:
        parts = path.relative_to(TESTS).parts
        assert len(parts) > 1 and parts[0] in PACKAGES, f"{path}: move it into tests/<unit>/"
        folder = path.parent
        while folder != ROOT:  # same basenames in two folders need packages
            assert (folder / "__init__.py").is_file(), f"{folder} has no __init__.py"
            folder = folder.parent


def test_no_test_module_imports_another() -> None:
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert not name.split(".")[-1].startswith("test_"), (
                    f"{path.relative_to(ROOT)} imports {name}: put shared helpers in a "
                    "non-test module or a conftest.py fixture"
                )


def test_the_fast_lane_is_documented_and_its_markers_registered() -> None:
    assert 'python -m pytest -m "not slow"' in (ROOT / "README.md").read_text()
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    options = pytest_options["ini_options"]
    assert "--strict-markers" in options["addopts"]
    assert {m.split(":")[0] for m in options["markers"]} >= {"slow", "realdata", "browser"}
