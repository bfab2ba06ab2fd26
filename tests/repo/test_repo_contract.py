"""The repository's promises: quickstart commands, CI, pins, Procfile, no copied data."""

import ast
import hashlib
import importlib.metadata
import re
import sys
from pathlib import Path

from prefshap_core.paths import data_dir, repo_root

ROOT = repo_root()


def _quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```\n(.*?)```", section, re.S)][:2]


def test_readme_has_two_one_line_quickstart_commands():
    launch, tests = _quickstart_commands()
    for command in (launch, tests):
        assert "\n" not in command
        assert "pip install -q -r requirements.txt" in command  # each does its own set-up
    assert launch.endswith("streamlit run dashboard/app.py")
    assert tests.endswith("python -m pytest")
    # The test-only dependencies (shapiq's cross-check) are installed by the test command.
    assert "-r requirements-test.txt" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    _, tests = _quickstart_commands()
    assert ci[-1] == tests
    assert any("PREFSHAP_DATA_DIR" in line for line in ci)
    assert any("CI=true" in line for line in ci)


def _pinned_lines(name: str) -> list[str]:
    lines = [
        line.strip()
        for line in (ROOT / name).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.]+", line) for line in lines)
    return lines


def test_requirements_are_all_pinned():
    assert "torch==2.13.0" in _pinned_lines("requirements.txt")
    assert "shapiq==1.4.1" in _pinned_lines("requirements-test.txt")


def test_procfile_serves_the_dashboard():
    assert (ROOT / "Procfile").read_text().strip() == (
        "web: streamlit run dashboard/app.py --server.port=$PORT --server.address=0.0.0.0"
    )
    assert "maxUploadSize" in (ROOT / ".streamlit" / "config.toml").read_text()


def test_no_real_dataset_is_copied_into_the_repository():
    shared = data_dir()
    if not shared.is_dir():
        return
    digest = lambda p: hashlib.sha1(p.read_bytes()).hexdigest()  # noqa: E731
    real = {digest(p) for p in shared.rglob("*.csv")}
    ours = [p for p in ROOT.rglob("*.csv") if ".venv" not in p.parts and ".git" not in p.parts]
    assert not [p for p in ours if digest(p) in real]


OPTIONAL_IMPORTS = {"falkon"}  # the optional solver backend, not on PyPI (README "GPU")


def _imported_top_level_modules(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_third_party_import_of_the_product_is_pinned():
    # A module the product imports but requirements.txt does not pin breaks a deploy
    # that installs requirements.txt alone (the Procfile's), even when the test run
    # passes because a test-only pin brought it along (scipy came with shapiq).
    imported = set()
    for folder in ("prefshap_core", "dashboard"):
        imported |= _imported_top_level_modules(ROOT / folder)
    third_party = imported - set(sys.stdlib_module_names) - {"prefshap_core", "dashboard"}
    pinned = {
        re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
        for line in _pinned_lines("requirements.txt")
    }
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(third_party - OPTIONAL_IMPORTS):
        names = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(module, [module])}
        if not names & pinned:
            missing[module] = sorted(names)
    assert not missing, f"imported but not pinned in requirements.txt: {missing}"
