"""Module boundaries: no private name crosses a file, no module re-exports what it imports.

A name with a leading underscore is its module's own business: a file that needs another
file's ``_name`` means the split between them is not a boundary (make the name public,
or merge the files). A module that imports names only to hand them on (a re-export
shim) hides where a name lives; importers use the real module instead, except for the
public entry points that README's Python section documents.
"""

from __future__ import annotations

import ast
from pathlib import Path

from prefshap_core.paths import repo_root

ROOT = repo_root()
PACKAGES = ("prefshap_core", "dashboard")


# The public entry points README's Python section imports from: they re-export on purpose.
PUBLIC_ENTRIES = {
    "prefshap_core/explain/__init__.py": "from prefshap_core.explain import",
    "prefshap_core/plots/__init__.py": "from prefshap_core.plots import",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module an ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    return {
        _module_name(root, path): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def _imports(root: Path, packages: tuple[str, ...]):
    """Per project file: its tree and its imports from project modules (node, source)."""
    modules = _modules(root, packages)
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _source(module, node, path.name == "__init__.py")
                if source.split(".")[0] in packages:
                    found.append((node, source))
            elif isinstance(node, ast.Import):
                found += [(node, a.name) for a in node.names if a.name.split(".")[0] in packages]
        yield path.relative_to(root).as_posix(), tree, found, modules


def private_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``file:line module._name`` for every private name one project file takes from another:
    ``from m import _name``, or ``m._name`` on a module bound by an import."""
    hits = []
    for file, tree, found, modules in _imports(root, packages):
        bound: dict[str, str] = {}  # local name -> project module it is bound to
        for node, source in found:
            for alias in node.names:
                if isinstance(node, ast.ImportFrom):
                    if _private(alias.name):
                        hits.append(f"{file}:{node.lineno} {source}.{alias.name}")
                    if f"{source}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif alias.asname:
                    bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
            ):
                hits.append(f"{file}:{node.lineno} {bound[node.value.id]}.{node.attr}")
    return hits


def re_exports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``file name`` for every name a project file imports from a project module and never
    uses itself (it is there to be imported from this file: a re-export)."""
    hits = []
    for file, tree, found, _ in _imports(root, packages):
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        for node, _source_module in found:
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                if isinstance(node, ast.Import) and alias.name in packages:
                    continue  # ``import prefshap_core``: run for its OpenMP defaults
                if name not in used:
                    hits.append(f"{file} {name}")
    return hits


def test_no_private_name_is_imported_across_files() -> None:
    assert private_imports(ROOT) == []


def test_no_module_re_exports_names_it_only_imports() -> None:
    hits = [h for h in re_exports(ROOT) if h.split()[0] not in PUBLIC_ENTRIES]
    assert hits == []


def test_the_re_exporting_entries_are_the_ones_readme_documents() -> None:
    readme = (ROOT / "README.md").read_text()
    for file, import_line in PUBLIC_ENTRIES.items():
        assert import_line in readme, file
        assert [h for h in re_exports(ROOT) if h.startswith(f"{file} ")], file


def test_the_checks_find_private_imports_and_re_exports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.a import public\n")
    (package / "a.py").write_text("def public(): ...\ndef _hidden(): ...\n_LIMIT = 3\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text(
        "from ..a import _hidden, public\n"
        "import pkg.a as a_module\n"
        "from pkg import a\n"
        "print(_hidden, public, a_module._LIMIT, a._LIMIT, a.public)\n"
    )
    assert private_imports(tmp_path, ("pkg",)) == [
        "pkg/sub/b.py:1 pkg.a._hidden",
        "pkg/sub/b.py:4 pkg.a._LIMIT",
        "pkg/sub/b.py:4 pkg.a._LIMIT",
    ]
    assert re_exports(tmp_path, ("pkg",)) == ["pkg/__init__.py public"]
