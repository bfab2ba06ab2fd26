"""The import graph: engine packages form layers, each importing only lower ones.

Data flows one way (tables -> DuelData -> model -> explanation -> figures, see
docs/method.md and README's layout): a package that imported a higher one would tie a
low-level piece to the workflow above it, and a cycle between packages would make both
one unit in disguise. The dashboard sits on top of everything and the engine never
imports it (nor Streamlit).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from prefshap_core.paths import repo_root

ROOT = repo_root()

# Lowest first. A package may import its own layer's modules of its own package and
# any package of a lower layer. "__init__" is prefshap_core/__init__.py (the version).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "env_switch"}),
    frozenset({"mkl_dispatch", "malloc_tuning"}),
    frozenset({"__init__", "paths", "compute", "progress", "budget", "csv_safety"}),
    frozenset({"kernels", "data", "metrics"}),
    frozenset({"solvers", "datasets"}),
    frozenset({"models"}),
    frozenset({"explain"}),
    frozenset({"analysis", "cache_integrity"}),
    frozenset({"plots", "workflow"}),
    frozenset({"cache"}),
    frozenset({"cli"}),
)
LAYER_OF = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """The engine package (or top-level module) a dotted module name belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imported_modules(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def engine_edges(root: Path = ROOT) -> dict[str, set[str]]:
    """Package-level import edges inside prefshap_core (self-edges left out)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted((root / "prefshap_core").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        source = _unit(module.removesuffix(".__init__"))
        for target in _imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            if target.split(".")[0] == "prefshap_core" and _unit(target) != source:
                edges[source].add(_unit(target))
    return edges


def test_every_engine_package_has_a_layer() -> None:
    packages = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "prefshap_core").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__pycache__"
    }
    assert packages - set(LAYER_OF) == set()


def test_packages_import_only_lower_layers_so_there_is_no_cycle() -> None:
    upward = [
        f"{source} (layer {LAYER_OF[source]}) imports {target} (layer {LAYER_OF[target]})"
        for source, targets in engine_edges().items()
        for target in targets
        if LAYER_OF[target] >= LAYER_OF[source]
    ]
    assert upward == []


def test_the_engine_never_imports_the_dashboard_or_streamlit() -> None:
    offenders = []
    for path in sorted((ROOT / "prefshap_core").rglob("*.py")):
        for target in _imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            if target.split(".")[0] in {"dashboard", "streamlit"}:
                offenders.append(f"{path.relative_to(ROOT)}: {target}")
    assert offenders == []


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    engine = tmp_path / "prefshap_core"
    (engine / "kernels").mkdir(parents=True)
    (engine / "kernels" / "rbf.py").write_text("from prefshap_core.models import estimators\n")
    edges = engine_edges(tmp_path)
    assert edges == {"kernels": {"models"}}
    assert LAYER_OF["models"] > LAYER_OF["kernels"]
