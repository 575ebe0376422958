"""No import cycle inside any package, no import of the bring-up from src/ (read from the source).

Every ``import`` and ``from ... import`` statement counts, wherever it stands: at module level,
inside a function, or under ``if TYPE_CHECKING:``, since an import moved into a function (or
behind TYPE_CHECKING) hides a loop from Python without removing it from the design. An edge
goes from a module to the module it names inside the same package; ``from pkg.mod import name``
is an edge to ``pkg.mod.name`` when that is a module, else to ``pkg.mod``.
"""

from __future__ import annotations

import ast
import functools
import gc
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

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


@pytest.fixture(scope="module", autouse=True)
def _syntax_trees_without_the_cyclic_collector() -> Iterator[None]:
    """Parse with the cyclic garbage collector off, and drop the trees after the module.

    Syntax trees hold no reference cycles; a few hundred of them are millions of objects, which
    set off full collections of the whole test process while they are built (more time than the
    parsing) and, kept in ``parsed``'s cache, make every later full collection longer.
    """
    gc.disable()
    yield
    parsed.cache_clear()
    gc.enable()


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once while this module runs (several checks read it)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported_names(module: str, path: Path, is_package: bool) -> Iterator[str]:
    """Absolute dotted names each import statement of the module refers to."""
    tree = parsed(path)
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


# -- between packages: declared dependencies and the world contract's one home ---------------

UPWARD_IMPORTS: set[str] = set()
"""Packages that may be imported without a package.xml line: none. The bring-up ``r2s2r``
depends on every package and nothing under src/ imports it (checked below)."""

WORLD_CONTRACT: dict[str, str] = {
    "WorldParams": "r2s2r_world.world",
    "load_world": "r2s2r_world.world",
    "apply_shift": "r2s2r_world.world",
    "apply_grounding": "r2s2r_world.world",
    "deep_override": "r2s2r_world.world",
    "ARTIFACT_SCHEMA_VERSION": "r2s2r_world.grounding",
    "check_artifact": "r2s2r_world.grounding",
    "read_artifact": "r2s2r_world.grounding",
    "load_world_overrides": "r2s2r_world.grounding",
    "PalmIk": "r2s2r_world.kinematics",
    "IkError": "r2s2r_world.kinematics",
}
"""Names of the world contract and the one module that defines each."""

OLD_HOMES = ("r2s2r_sim.world", "r2s2r_sim.kinematics", "r2s2r_common.grounding")
"""Where the world contract lived before r2s2r_world (no module re-exports it there)."""

WORLD_USERS = ("r2s2r_belt", "r2s2r_planner", "r2s2r_calibration", "r2s2r_datagen")
"""Sensing, planning, calibration and generation: they take the world from r2s2r_world."""


def imported_packages(name: str, folder: Path) -> set[str]:
    """Other workspace packages that the package's modules import (any import statement)."""
    workspace = set(packages())
    found = set()
    for module, path in modules(name, folder).items():
        for target in imported_names(module, path, path.name == "__init__.py"):
            top = target.split(".")[0]
            if top in workspace and top != name:
                found.add(top)
    return found


def declared_dependencies(folder: Path) -> set[str]:
    """``exec_depend`` lines of the package.xml next to the package's folder."""
    root = ElementTree.parse(folder.parent / "package.xml").getroot()
    return {element.text or "" for element in root.iter("exec_depend")}


def workspace_sources() -> Iterator[tuple[str, Path]]:
    """(dotted module, file) of every Python file of the packages, their tests, tests/, bench/."""
    for name, folder in packages().items():
        yield from modules(name, folder).items()
    for path in sorted(REPO.glob("src/*/test/*.py")) + sorted(REPO.glob("tests/*.py")):
        yield path.stem, path
    for path in sorted(REPO.glob("bench/*.py")):
        yield path.stem, path


@pytest.mark.parametrize("name", sorted(set(packages()) - {"r2s2r"}))
def test_every_imported_workspace_package_is_a_declared_dependency(name: str) -> None:
    folder = packages()[name]
    undeclared = imported_packages(name, folder) - declared_dependencies(folder) - UPWARD_IMPORTS
    assert not undeclared, f"{name} imports {sorted(undeclared)}: add exec_depend lines"


def test_the_world_package_does_not_import_the_simulator() -> None:
    assert imported_packages("r2s2r_world", packages()["r2s2r_world"]) <= {
        "r2s2r_common",
        "r2s2r_description",
    }


@pytest.mark.parametrize("name", WORLD_USERS)
def test_sensing_planning_calibration_and_datagen_take_the_world_from_r2s2r_world(
    name: str,
) -> None:
    folder = packages()[name]
    assert "r2s2r_world" in imported_packages(name, folder)
    assert "r2s2r_world" in declared_dependencies(folder)


def test_the_world_contract_has_one_home() -> None:
    """Each name is defined once (in r2s2r_world) and imported from there, everywhere."""
    wrong: list[str] = []
    for module, path in workspace_sources():
        where = path.relative_to(REPO)
        tree = parsed(path)
        for node in tree.body:
            defined: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                defined = [node.name]
            elif isinstance(node, ast.Assign):
                defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
            wrong += [
                f"{where} defines {item}"
                for item in defined
                if item in WORLD_CONTRACT and module != WORLD_CONTRACT[item]
            ]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level:
                sources = [node.module or ""]
                wrong += [
                    f"{where} imports {alias.name} from {node.module}"
                    for alias in node.names
                    if WORLD_CONTRACT.get(alias.name, node.module) != node.module
                ]
            elif isinstance(node, ast.Import):
                sources = [alias.name for alias in node.names]
            else:
                continue
            wrong += [f"{where} imports {source}" for source in sources if source in OLD_HOMES]
    assert not wrong, "\n".join(wrong)


def bring_up_imports(path: Path) -> list[str]:
    """Names of the bring-up package (``r2s2r``, ``r2s2r.*``) a file imports, anywhere in it."""
    tree = parsed(path)
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


def test_only_tests_and_benchmarks_import_the_test_infrastructure() -> None:
    """``r2s2r_testing`` (fixtures, synthetic data, stand-in programs) is never shipped code's."""
    offenders = sorted(
        module
        for name, folder in packages().items()
        if name != "r2s2r_testing"
        for module, path in modules(name, folder).items()
        if "r2s2r_testing" in imported_packages_of_file(module, path)
    )
    assert not offenders, f"shipped modules importing r2s2r_testing: {offenders}"


def imported_packages_of_file(module: str, path: Path) -> set[str]:
    """Top-level packages a module imports (any import statement, anywhere in it)."""
    return {
        target.split(".")[0] for target in imported_names(module, path, path.name == "__init__.py")
    }
