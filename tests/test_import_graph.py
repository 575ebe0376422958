"""No import cycle inside any package, no import of the bring-up from src/ (read from the source).

Every ``import`` and ``from ... import`` statement counts, wherever it stands: at module level,
inside a function, or under ``if TYPE_CHECKING:``, since an import moved into a function (or
behind TYPE_CHECKING) hides a loop from Python without removing it from the design. An edge
goes from a module to the module it names inside the same package; ``from pkg.mod import name``
is an edge to ``pkg.mod.name`` when that is a module, else to ``pkg.mod``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def packages() -> dict[str, Path]:
    """Top-level Python packages of the workspace: name -> folder."""
    found = {"r2s2r": REPO / "r2s2r"}
    for setup in sorted(REPO.glob("src/*/setup.py")):
        for folder in sorted(setup.parent.iterdir()):
            if (folder / "__init__.py").is_file() and folder.name != "test":
                found[folder.name] = folder
    return found


def modules(name: str, folder: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    result = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        result[".".join([name, *parts])] = path
    return result


def imported_names(module: str, path: Path, is_package: bool) -> Iterator[str]:
    """Absolute dotted names each import statement of the module refers to."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                yield f"{source}.{alias.name}"
                yield source


def import_graph(name: str, folder: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    known = modules(name, folder)
    graph: dict[str, set[str]] = {module: set() for module in known}
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for target in imported_names(module, path, is_package):
            # `from pkg.mod import name`: the module pkg.mod.name if there is one, else pkg.mod.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def thing():\n    from . import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n"
    )
    (package / "d.py").write_text("from pkg.c import x\nfrom pkg import a\n")
    assert cycles(import_graph("pkg", package)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


@pytest.mark.parametrize("name", sorted(packages()))
def test_no_import_cycle_inside_the_package(name: str) -> None:
    graph = import_graph(name, packages()[name])
    assert len(graph) > 1
    found = cycles(graph)
    assert not found, f"{name}: import cycles " + "; ".join(" <-> ".join(c) for c in found)


def bring_up_imports(path: Path) -> list[str]:
    """Names of the bring-up package (``r2s2r``, ``r2s2r.*``) a file imports, anywhere in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [name for name in names if name == "r2s2r" or name.startswith("r2s2r.")]
    return found


def test_the_check_finds_a_bring_up_import_hidden_in_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import r2s2r_common.config\nfrom r2s2r_sim import world\n"
        "def f():\n    from r2s2r.supervisor import GraphSupervisor\n    import r2s2r\n"
    )
    assert bring_up_imports(module) == ["r2s2r.supervisor", "r2s2r"]


def test_no_module_under_src_imports_the_bring_up() -> None:
    """The packages under src/ (their tests included) never import the bring-up ``r2s2r``.

    The pipeline's home and the supervisor live there and compose the packages; a package
    that needs a graph started or a stage run is handed a callable or a command instead.
    """
    offenders = {
        str(path.relative_to(REPO)): names
        for path in sorted((REPO / "src").rglob("*.py"))
        if (names := bring_up_imports(path))
    }
    assert not offenders, f"imports of the bring-up under src/: {offenders}"
