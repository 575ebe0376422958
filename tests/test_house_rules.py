"""The tree's house rules, read from the source: each fails when a change breaks it again.

- no module of a package over :data:`MAX_MODULE_LINES` lines (split by concern instead);
- no ``sys.path`` edit anywhere (packages are installed, or put on ``PYTHONPATH`` by
  ``scripts/env.sh``);
- every rclpy QoS profile is built in ``r2s2r_common.ros.qos`` (a profile two nodes must agree
  on is then written once);
- the ROS-free cores import no rclpy: only the ROS edges (:func:`is_ros_edge`) do, and a core
  module never imports an edge;
- the package graph drawn in ``docs/architecture.md`` is the code's;
- the cell's camera and frame names are spelled only in their homes (:data:`NAME_HOMES`):
  every other module imports them (``r2s2r_description.cameras``, ``.frames``);
- every exit code is a member of ``r2s2r_common.errors.ExitCode`` (no ``EXIT_*`` constant, no
  ``sys.exit(3)`` or ``raise SystemExit(1)`` elsewhere), and ``docs/architecture.md`` lists
  every member with its number;
- files are renamed into place only by ``r2s2r_common.files`` (the one crash-safe writer),
  except the moves of :data:`RENAME_ALLOWED`;
- every simulator of a package module is built by the factory (:data:`BACKEND_FACTORY`:
  ``make_backend``, ``make_mujoco_backend``), so any backend serves the twin, evaluation and
  generation alike: no ``MujocoBackend(...)`` / ``IsaacSimBackend(...)`` call elsewhere except
  in the backends' own modules (tests and bench/ may construct one directly: they test or
  measure that backend);
- a constant two modules must agree on is assigned in one module (:data:`SHARED_CONSTANTS`),
  which the others import, and the config files that spell the seed bases as user-visible
  defaults (:data:`SEED_KEYS`) agree with it;
- a public class name is defined at module level in one package module only (two classes of
  one name are one fact written twice, or two meanings of one word), except the names of
  :data:`CLASS_NAMES_DEFINED_TWICE`, each with its reason.

Each check is a function over files, run on the workspace and, in its own test, on a planted
violation, so a rule that stopped finding anything would fail too.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import yaml
from r2s2r_common.errors import ExitCode
from r2s2r_policy.evaluation import trials
from test_import_graph import imported_names, imported_packages, modules, packages

REPO = Path(__file__).resolve().parents[1]

MAX_MODULE_LINES = 800
"""Longest module of a package (lines)."""

ROS_RUNTIME = ("rclpy", "launch", "launch_ros", "tf2_ros", "rosbag2_py")
"""Top-level modules that need a running ROS: only the edges import them."""

QOS_HOME = "r2s2r_common.ros.qos"
"""The one module that builds QoS profiles."""

EXIT_CODE_HOME = "r2s2r_common.errors"
"""The one module that defines exit codes (:class:`~r2s2r_common.errors.ExitCode`)."""

WRITER_HOME = "r2s2r_common.files"
"""The one module that renames files into place (``write_atomic``, ``move_into_place``)."""

RENAME_ALLOWED = {
    # A failed grounding artifact set aside as <name>.failed.yaml: a move of a finished file.
    ("r2s2r.pipeline.stages", "stage.output.replace"),
    # WorkerPool.replace(slot) restarts a worker; no file is renamed.
    ("r2s2r_datagen.runner", "pool.replace"),
    # The trace the policy node wrote (whole, synced: write_npz) gets the trial's name: a move.
    ("r2s2r_policy.evaluation.ros", "(trace_dir / new[-1]).replace"),
}
"""(module, renaming call) pairs allowed outside :data:`WRITER_HOME`, each with its reason."""

BACKEND_FACTORY = "r2s2r_sim.backend_config"
"""The one module that builds simulator backends (``make_backend``, ``make_mujoco_backend``)."""

BACKEND_CLASSES = frozenset({"MujocoBackend", "IsaacSimBackend", "IsaacBackend"})
"""Simulator backend classes: constructed only by :data:`BACKEND_HOMES`."""

BACKEND_HOMES = frozenset({BACKEND_FACTORY, "r2s2r_sim.mujoco_backend", "r2s2r_sim.isaac_backend"})
"""The factory and the backends' own modules (a backend may build itself, e.g. a copy)."""

SHARED_CONSTANTS: dict[str, str | None] = {
    # Where the trials' seeds start: the reported evaluation's, and the validation's (the
    # trials choices are made on; they must never meet the evaluation's).
    "EVALUATION_BASE_SEED": "r2s2r_policy.evaluation.trials",
    "VALIDATION_BASE_SEED": "r2s2r_policy.evaluation.trials",
    # The two windows after a rollout's grasp event: two measurements (each docstring says why
    # their values differ).
    "CONTACT_COUNT_WINDOW_S": "r2s2r_policy.evaluation.rollouts",
    "CLOSURE_SEARCH_WINDOW_S": "r2s2r_policy.analysis.style",
    # Retired: it named both windows, 0.5 s in one module and 1.0 s in the other.
    "GRASP_WINDOW_S": None,
}
"""Constant -> the one module that assigns it (None: a retired name, assigned nowhere)."""

SEED_KEYS = {
    "base_seed": "EVALUATION_BASE_SEED",
    "evaluation_base_seed": "EVALUATION_BASE_SEED",
    "validation_base_seed": "VALIDATION_BASE_SEED",
}
"""Top-level key of an evaluation or experiment config -> the constant its value must equal."""

SEED_CONFIGS = ("config/evaluation", "config/experiment")
"""The config folders whose files spell the seed bases (user-visible defaults of a preset)."""

CELL_NAMES = frozenset(
    {
        *(
            f"{camera}{suffix}"
            for camera in ("head_camera", "hand_camera")
            for suffix in ("", "_rgb", "_link", "_optical_frame")
        ),
        "base_link",
        "palm_link",
    }
)
"""Camera names, their image keys and frames, and the addressed robot frames: the cell's names."""

NAME_HOMES = frozenset(
    {"r2s2r_common.topics", "r2s2r_description.cameras", "r2s2r_description.frames"}
)
"""The modules that spell :data:`CELL_NAMES` (the camera names are topic namespaces, so they
live with the topics, below the description; the descriptors and frames in the description)."""

CLASS_NAMES_DEFINED_TWICE: dict[str, str] = {}
"""Public class name -> why more than one package module may define it (none does today)."""


def package_modules() -> Iterator[tuple[str, Path]]:
    """(dotted module, file) of every module of every package (tests are not modules)."""
    for name, folder in packages().items():
        yield from modules(name, folder).items()


def python_sources() -> list[Path]:
    """Every Python file of the workspace: packages, their tests, tests/, bench/, scripts/."""
    roots = [REPO / "r2s2r", REPO / "tests", REPO / "bench", REPO / "scripts"]
    roots += sorted(path for path in (REPO / "src").iterdir() if path.is_dir())
    return sorted(path for root in roots for path in root.rglob("*.py"))


def checked_sources() -> Iterator[tuple[str, Path]]:
    """Package modules as (dotted module, file); bench/ and scripts/ files as (path, file)."""
    yield from package_modules()
    for root in (REPO / "bench", REPO / "scripts"):
        for path in sorted(root.rglob("*.py")):
            yield str(path.relative_to(REPO)), path


def long_modules(files: Iterable[tuple[str, Path]], limit: int) -> list[str]:
    """``module (N lines)`` for each file longer than ``limit`` lines."""
    found = []
    for module, path in files:
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > limit:
            found.append(f"{module} ({count} lines)")
    return found


def sys_path_edits(paths: Iterable[Path]) -> list[str]:
    """``file:line`` of each statement that changes ``sys.path`` (insert, append, assign, ...)."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = node.func.value  # sys.path.insert(...), sys.path.append(...)
            elif isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                target = next(iter(targets))
                if isinstance(target, ast.Subscript):
                    target = target.value  # sys.path[:0] = [...]
            if target is not None and ast.unparse(target) == "sys.path":
                found.append(f"{path.relative_to(path.parents[1])}:{node.lineno}")
    return found


def qos_constructions(files: Iterable[tuple[str, Path]]) -> list[str]:
    """``module:line`` of each ``QoSProfile(...)`` call outside :data:`QOS_HOME`."""
    found = []
    for module, path in files:
        if module == QOS_HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name == "QoSProfile" or name.endswith(".QoSProfile"):
                    found.append(f"{module}:{node.lineno}")
    return found


def spelled_cell_names(files: Iterable[tuple[str, Path]], homes: Iterable[str]) -> list[str]:
    """``module:line 'name'`` of each string constant in :data:`CELL_NAMES` outside ``homes``.

    Docstrings (string expression statements) and comments may mention the names; an f-string
    built from an imported name (``f"{camera.name}/image_raw"``) spells none.
    """
    homes = set(homes)
    found = []
    for module, path in files:
        if module in homes:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in CELL_NAMES
                and id(node) not in docstrings
            ):
                found.append(f"{module}:{node.lineno} {node.value!r}")
    return sorted(
        found, key=lambda entry: (entry.split(":")[0], int(entry.split(":")[1].split()[0]))
    )


def is_ros_edge(module: str) -> bool:
    """A module that talks ROS: a node, a ROS helper, a command line, the bring-up, test kit."""
    parts = module.split(".")
    return (
        parts[0] in ("r2s2r", "r2s2r_testing")
        or "nodes" in parts
        or "ros" in parts
        or parts[-1] in ("node", "ros", "cli")
    )


def cores_importing_ros(files: Iterable[tuple[str, Path]], workspace: set[str]) -> list[str]:
    """``module imports X`` for each core module importing the ROS runtime or a ROS edge."""
    files = list(files)
    edges = {module for module, _ in files if is_ros_edge(module)}
    found = []
    for module, path in files:
        if is_ros_edge(module):
            continue
        for target in imported_names(module, path, path.name == "__init__.py"):
            top = target.split(".")[0]
            if top in ROS_RUNTIME:
                found.append(f"{module} imports {target}")
            elif top in workspace and any(
                target == edge or target.startswith(edge + ".") for edge in edges
            ):
                found.append(f"{module} imports the ROS edge {target}")
    return sorted(set(found))


def _is_exit_literal(node: ast.expr) -> bool:
    """An int literal other than 0 (``True``/``False`` are not exit codes)."""
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value != 0


def exit_code_literals(files: Iterable[tuple[str, Path]]) -> list[str]:
    """``module:line ...`` of each ``EXIT_*`` constant and literal exit code outside its home.

    Found: an assignment to a name ``EXIT_...``, and ``sys.exit(N)`` / ``SystemExit(N)`` with
    an int literal N other than 0 (a message or an ``ExitCode`` member is fine).
    """
    found = []
    for module, path in files:
        if module == EXIT_CODE_HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                    found.append(f"{module}:{node.lineno} defines {target.id}")
            if (
                isinstance(node, ast.Call)
                and node.args
                and _is_exit_literal(node.args[0])
                and ast.unparse(node.func) in ("sys.exit", "SystemExit", "exit")
            ):
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def file_renames(files: Iterable[tuple[str, Path]]) -> list[str]:
    """``module:line call`` of each rename outside :data:`WRITER_HOME` and the allow-list.

    A rename: ``os.replace``, ``os.rename``, ``os.renames``, or ``X.replace(Y)`` /
    ``X.rename(Y)`` with one argument (``Path.replace``; ``str.replace`` takes two).
    """
    found = []
    for module, path in files:
        if module == WRITER_HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = ast.unparse(node.func)
            renames = name in ("os.replace", "os.rename", "os.renames") or (
                node.func.attr in ("replace", "rename")
                and len(node.args) == 1
                and not node.keywords
            )
            if renames and (module, name) not in RENAME_ALLOWED:
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def backend_constructions(files: Iterable[tuple[str, Path]], homes: Iterable[str]) -> list[str]:
    """``module:line call`` of each construction of a :data:`BACKEND_CLASSES` outside ``homes``.

    A construction: a call of the class by name or as an attribute (``mujoco_backend.
    MujocoBackend()``); a docstring's ``MujocoBackend(enable_rendering=False)`` is no call.
    """
    homes = set(homes)
    found = []
    for module, path in files:
        if module in homes:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func).rpartition(".")[2]
                if name in BACKEND_CLASSES:
                    found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def constant_definitions(
    files: Iterable[tuple[str, Path]], homes: dict[str, str | None]
) -> list[str]:
    """Each assignment of a constant of ``homes`` outside its home, and each home lacking one.

    ``module:line assigns NAME`` (at any depth: a constant assigned in a function is a second
    definition too) and ``NAME: not assigned in HOME``.
    """
    found, defined = [], set()
    for module, path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in homes:
                    if homes[target.id] == module:
                        defined.add(target.id)
                    else:
                        found.append(f"{module}:{node.lineno} assigns {target.id}")
    found += [
        f"{name}: not assigned in {home}"
        for name, home in homes.items()
        if home is not None and name not in defined
    ]
    return found


def module_level_classes(body: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """Classes a module body defines, also under a module-level ``if``, ``try`` or ``with``."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield node
        elif isinstance(node, ast.If | ast.Try | ast.TryStar | ast.With):
            yield from module_level_classes(node.body)
            yield from module_level_classes(getattr(node, "orelse", []))
            yield from module_level_classes(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                yield from module_level_classes(handler.body)


def duplicate_class_names(files: Iterable[tuple[str, Path]], allowed: dict[str, str]) -> list[str]:
    """Each public class name defined at module level in two modules or more, not ``allowed``.

    ``Name: module:line, module:line`` (a name starting with ``_`` is private to its module;
    a class nested in a function or a class is not counted), and ``Name: allowed, but defined
    in N module(s)`` for an allowed name that no longer is a duplicate.
    """
    where: dict[str, list[tuple[str, int]]] = {}
    for module, path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in module_level_classes(tree.body):
            if not node.name.startswith("_"):
                where.setdefault(node.name, []).append((module, node.lineno))
    found = []
    for name, places in sorted(where.items()):
        if len({module for module, _ in places}) > 1 and name not in allowed:
            found.append(f"{name}: " + ", ".join(f"{module}:{line}" for module, line in places))
    for name in sorted(allowed):
        count = len({module for module, _ in where.get(name, [])})
        if count < 2:
            found.append(f"{name}: allowed, but defined in {count} module(s)")
    return found


def seed_default_differences(paths: Iterable[Path], values: dict[str, int]) -> list[str]:
    """``file: key = value, NAME = value`` for each :data:`SEED_KEYS` value unlike its constant."""
    found = []
    for path in paths:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            continue
        for key, name in SEED_KEYS.items():
            if key in data and data[key] != values[name]:
                found.append(f"{path.name}: {key} = {data[key]}, {name} = {values[name]}")
    return found


EXIT_TABLE_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([A-Z_]+)`\s*\|", re.M)


def documented_exit_codes(architecture: str) -> dict[str, int]:
    """Name -> number of each row of the architecture's exit-code table."""
    section = architecture.partition("## 9. Exit codes")[2].partition("\n## ")[0]
    if not section:
        raise AssertionError("docs/architecture.md: the section '9. Exit codes' was not found")
    return {name: int(number) for number, name in EXIT_TABLE_ROW.findall(section)}


def exit_code_table_differences(documented: dict[str, int], codes: type[ExitCode]) -> list[str]:
    """Members the table misses or numbers wrongly, and rows that name no member."""
    found = [
        f"{member.name} ({member.value}) is not in the table"
        if member.name not in documented
        else f"{member.name}: the table says {documented[member.name]}, the code {member.value}"
        for member in codes
        if documented.get(member.name) != member.value
    ]
    members = {member.name for member in codes}
    found += [f"{name}: in the table, not a member" for name in documented if name not in members]
    return found


GRAPH_BLOCK = re.compile(
    r"Today's graph \(imports read from the source\):\n\n  ```\n(.*?)\n  ```", re.S
)


def drawn_graph(architecture: str) -> dict[str, set[str]]:
    """Package -> the packages it imports, as the architecture's graph draws them.

    A line ``a + b ← c ← d`` says c imports a and b, and d imports c; lines without an arrow
    (the bring-up, the test kit, imports by name) draw no edge.
    """
    block = GRAPH_BLOCK.search(architecture)
    if block is None:
        raise AssertionError("docs/architecture.md: the import graph block was not found")
    graph: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        if "←" not in line:
            continue
        stages = [[name.strip() for name in part.split("+")] for part in line.split("←")]
        for lower, upper in itertools.pairwise(stages):
            for importer in upper:
                graph.setdefault(importer, set()).update(lower)
            for imported in lower:
                graph.setdefault(imported, set())
    return graph


def closure(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Every package each package reaches through imports."""
    reached: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
        reached[start] = seen
    return reached


def graph_differences(drawn: dict[str, set[str]], code: dict[str, set[str]]) -> list[str]:
    """Arrows drawn that no import makes, and dependencies the drawing does not imply."""
    found = [
        f"drawn: {imported} ← {importer}, but {importer} does not import {imported}"
        for importer, targets in sorted(drawn.items())
        for imported in sorted(targets)
        if imported not in code.get(importer, set())
    ]
    drawn_reach, code_reach = closure(drawn), closure(code)
    for name in sorted(code):
        missing = code_reach[name] - drawn_reach.get(name, set())
        if missing:
            found.append(f"{name} depends on {sorted(missing)}, which the drawing does not show")
    return found


def code_graph() -> dict[str, set[str]]:
    """Package -> the workspace packages it imports (the bring-up and the test kit left out)."""
    left_out = {"r2s2r", "r2s2r_testing"}
    return {
        name: imported_packages(name, folder) - left_out
        for name, folder in packages().items()
        if name not in left_out
    }


# -- the workspace keeps the rules ------------------------------------------------------------


def test_no_module_is_over_the_limit() -> None:
    found = long_modules(package_modules(), MAX_MODULE_LINES)
    assert not found, f"over {MAX_MODULE_LINES} lines, split by concern: {found}"


def test_nothing_edits_sys_path() -> None:
    found = sys_path_edits(python_sources())
    assert not found, f"sys.path edited (install the package, or use scripts/env.sh): {found}"


def test_qos_profiles_are_built_in_one_module() -> None:
    found = qos_constructions(package_modules())
    assert not found, f"QoSProfile built outside {QOS_HOME} (add it there): {found}"


def test_the_cell_names_are_spelled_only_in_their_homes() -> None:
    found = spelled_cell_names(package_modules(), NAME_HOMES)
    assert not found, (
        "camera or frame name spelled outside its home (import it from "
        f"r2s2r_description.cameras / r2s2r_description.frames): {found}"
    )


def test_the_ros_free_cores_import_no_ros_runtime() -> None:
    found = cores_importing_ros(package_modules(), set(packages()))
    assert not found, f"core modules reaching ROS (move the ROS part to a node): {found}"


def test_the_architecture_draws_the_code_graph() -> None:
    drawn = drawn_graph((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    found = graph_differences(drawn, code_graph())
    assert not found, f"docs/architecture.md's package graph is not the code's: {found}"


def test_exit_codes_come_from_one_enum() -> None:
    found = exit_code_literals(checked_sources())
    assert not found, f"exit codes outside {EXIT_CODE_HOME} (use ExitCode): {found}"


def test_the_architecture_lists_every_exit_code() -> None:
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    found = exit_code_table_differences(documented_exit_codes(architecture), ExitCode)
    assert not found, f"docs/architecture.md's exit-code table is not ExitCode: {found}"


def test_files_are_renamed_into_place_by_one_writer() -> None:
    found = file_renames(checked_sources())
    assert not found, (
        f"files renamed outside {WRITER_HOME} (use write_atomic or move_into_place, or add a "
        f"move to RENAME_ALLOWED with its reason): {found}"
    )


def test_simulators_are_built_by_the_factory() -> None:
    found = backend_constructions(package_modules(), BACKEND_HOMES)
    assert not found, (
        f"simulator backend built outside {BACKEND_FACTORY} (use make_backend, or "
        f"make_mujoco_backend where MuJoCo's model is read): {found}"
    )


def test_shared_constants_have_one_home() -> None:
    found = constant_definitions(checked_sources(), SHARED_CONSTANTS)
    assert not found, f"a shared constant assigned outside its home (import it): {found}"


def test_a_class_name_is_defined_in_one_module() -> None:
    found = duplicate_class_names(package_modules(), CLASS_NAMES_DEFINED_TWICE)
    assert not found, (
        "a public class name defined in two package modules (give it one home and import it "
        "there, or rename one; add a legitimate case to CLASS_NAMES_DEFINED_TWICE with its "
        f"reason): {found}"
    )


def test_the_configs_seed_bases_are_the_constants() -> None:
    paths = [path for folder in SEED_CONFIGS for path in sorted((REPO / folder).glob("*.yaml"))]
    values = {name: getattr(trials, name) for name in set(SEED_KEYS.values())}
    assert any("validation_base_seed" in path.read_text(encoding="utf-8") for path in paths)
    found = seed_default_differences(paths, values)
    assert not found, f"a config's seed base differs from r2s2r_policy.evaluation.trials: {found}"


# -- each rule finds a planted violation ------------------------------------------------------


def test_a_shared_constant_outside_its_home_is_found(tmp_path: Path) -> None:
    home = tmp_path / "trials.py"
    home.write_text("VALIDATION_BASE_SEED = 20_000\n")
    other = tmp_path / "bench.py"
    other.write_text(
        "from pkg.trials import VALIDATION_BASE_SEED\n"
        "SEED: int = VALIDATION_BASE_SEED\n"
        "VALIDATION_BASE_SEED = 20_000\n"
        "def f():\n    GRASP_WINDOW_S: float = 1.0\n"
    )
    homes = {"VALIDATION_BASE_SEED": "pkg.trials", "GRASP_WINDOW_S": None, "X_S": "pkg.style"}
    assert constant_definitions([("pkg.trials", home), ("bench/x.py", other)], homes) == [
        "bench/x.py:3 assigns VALIDATION_BASE_SEED",
        "bench/x.py:5 assigns GRASP_WINDOW_S",
        "X_S: not assigned in pkg.style",
    ]


def test_a_class_name_defined_twice_is_found(tmp_path: Path) -> None:
    belt = tmp_path / "geometry.py"
    belt.write_text(
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\nclass CameraModel:\n    width_px: int\n"
        "class _Cache:\n    pass\n"
        "class Error(ValueError):\n    pass\n"
        "class Single:\n    pass\n"
    )
    calibration = tmp_path / "cell_client.py"
    calibration.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    class CameraModel:\n        pass\n"
        "class _Cache:\n    pass\n"
        "class Error(RuntimeError):\n    pass\n"
        "def f():\n    class Single:\n        pass\n"
        "class Holder:\n    class Single:\n        pass\n"
    )
    files = [("belt.geometry", belt), ("calibration.cell_client", calibration)]
    assert duplicate_class_names(files, {}) == [
        "CameraModel: belt.geometry:3, calibration.cell_client:3",
        "Error: belt.geometry:7, calibration.cell_client:7",
    ]
    # An allowed name is not found; an allowed name defined once is (the entry is stale).
    assert duplicate_class_names(files, {"Error": "reason", "Single": "reason"}) == [
        "CameraModel: belt.geometry:3, calibration.cell_client:3",
        "Single: allowed, but defined in 1 module(s)",
    ]


def test_a_config_seed_unlike_its_constant_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "preset.yaml"
    planted.write_text(
        "evaluation_base_seed: 10000\nvalidation_base_seed: 30000\nother:\n  base_seed: 5\n"
    )
    values = {"EVALUATION_BASE_SEED": 10_000, "VALIDATION_BASE_SEED": 20_000}
    assert seed_default_differences([planted], values) == [
        "preset.yaml: validation_base_seed = 30000, VALIDATION_BASE_SEED = 20000"
    ]


def test_a_backend_built_outside_the_factory_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "runtime.py"
    planted.write_text(
        '"""Runs ``MujocoBackend(enable_rendering=False)``."""\n'
        "from r2s2r_sim import isaac_backend\n"
        "from r2s2r_sim.backend_config import make_backend\n"
        "from r2s2r_sim.mujoco_backend import MujocoBackend\n"
        "a = MujocoBackend()\n"
        "b = isaac_backend.IsaacSimBackend(config, enable_rendering=False)\n"
        "c = make_backend()\n"
        "d: MujocoBackend | None = None\n"
    )
    assert backend_constructions(
        [("pkg.runtime", planted), (BACKEND_FACTORY, planted)], BACKEND_HOMES
    ) == [
        "pkg.runtime:5 MujocoBackend()",
        "pkg.runtime:6 isaac_backend.IsaacSimBackend(config, enable_rendering=False)",
    ]


def test_exit_code_literals_are_found(tmp_path: Path) -> None:
    planted = tmp_path / "cli.py"
    planted.write_text(
        "import sys\nfrom r2s2r_common.errors import ExitCode\n"
        "EXIT_SHORT = 3\nEXIT_OK: int = 0\n"
        "def main():\n    sys.exit(2)\n"
        "def other():\n    raise SystemExit(1)\n"
        "def fine(code):\n    sys.exit(0)\n    sys.exit(ExitCode.FAILED)\n"
        "    raise SystemExit('a message')\n    sys.exit(code)\n"
    )
    assert exit_code_literals([("pkg.cli", planted), (EXIT_CODE_HOME, planted)]) == [
        "pkg.cli:3 defines EXIT_SHORT",
        "pkg.cli:4 defines EXIT_OK",
        "pkg.cli:6 sys.exit(2)",
        "pkg.cli:8 SystemExit(1)",
    ]


def test_a_table_that_differs_from_the_exit_codes_is_found() -> None:
    text = (
        "## 9. Exit codes\n\n| Code | Name | Meaning |\n| --- | --- | --- |\n"
        "| 0 | `OK` | Done. |\n| 2 | `FAILED` | Wrong number. |\n| 7 | `GONE` | No member. |\n"
        "\n## 10. Next\n\n| 3 | `NOTHING_DONE` | Another section's row. |\n"
    )
    documented = documented_exit_codes(text)
    assert documented == {"OK": 0, "FAILED": 2, "GONE": 7}
    found = exit_code_table_differences(documented, ExitCode)
    assert "FAILED: the table says 2, the code 1" in found
    assert "NOTHING_DONE (3) is not in the table" in found
    assert "GONE: in the table, not a member" in found
    assert not [line for line in found if line.startswith("OK")]
    with pytest.raises(AssertionError, match="Exit codes"):
        documented_exit_codes("# no such section\n")


def test_a_rename_outside_the_writer_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "store.py"
    planted.write_text(
        "import os\nfrom pathlib import Path\n"
        "os.replace('a.tmp', 'a')\nos.rename('b.tmp', 'b')\n"
        "Path('c.tmp').replace(Path('c'))\nPath('d.tmp').rename('d')\n"
        "'text'.replace('x', 'y')\npool.replace(slot)\n"
    )
    assert file_renames([("pkg.store", planted), (WRITER_HOME, planted)]) == [
        "pkg.store:3 os.replace('a.tmp', 'a')",
        "pkg.store:4 os.rename('b.tmp', 'b')",
        "pkg.store:5 Path('c.tmp').replace(Path('c'))",
        "pkg.store:6 Path('d.tmp').rename('d')",
        "pkg.store:8 pool.replace(slot)",
    ]
    # An allowed move is allowed in its own module only.
    assert "pool.replace(slot)" not in " ".join(file_renames([("r2s2r_datagen.runner", planted)]))


def test_a_long_module_is_found(tmp_path: Path) -> None:
    module = tmp_path / "big.py"
    module.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    small = tmp_path / "small.py"
    small.write_text("x = 1\n" * MAX_MODULE_LINES)
    assert long_modules([("pkg.big", module), ("pkg.small", small)], MAX_MODULE_LINES) == [
        f"pkg.big ({MAX_MODULE_LINES + 1} lines)"
    ]


@pytest.mark.parametrize(
    "statement",
    [
        "sys.path.insert(0, 'x')",
        "sys.path.append('x')",
        "sys.path[:0] = ['x']",
        "sys.path += ['x']",
        "sys.path = ['x']",
    ],
)
def test_a_sys_path_edit_is_found(tmp_path: Path, statement: str) -> None:
    (tmp_path / "pkg").mkdir()
    planted = tmp_path / "pkg" / "bad.py"
    planted.write_text(f"import sys\n{statement}\n")
    fine = tmp_path / "pkg" / "fine.py"
    fine.write_text("import os, sys\nos.pathsep.join(sys.path)\n")
    assert sys_path_edits([planted, fine]) == ["pkg/bad.py:2"]


def test_a_qos_profile_outside_its_home_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "node.py"
    planted.write_text(
        "import rclpy.qos\nfrom rclpy.qos import QoSProfile\n"
        "A = QoSProfile(depth=1)\nB = rclpy.qos.QoSProfile(depth=2)\n"
    )
    assert qos_constructions([("pkg.nodes.node", planted), (QOS_HOME, planted)]) == [
        "pkg.nodes.node:3",
        "pkg.nodes.node:4",
    ]


def test_a_cell_name_outside_its_home_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "node.py"
    planted.write_text(
        '"""Publishes ``head_camera`` images in ``base_link``."""\n'
        "from r2s2r_description.cameras import HEAD\n"
        "# frame: 'palm_link'\n"
        "TOPIC = f'/{HEAD.name}/image_raw'\n"
        "FRAME = 'base_link'\n"
        "def f(name='hand_camera'):\n"
        '    """Look ``palm_link`` up."""\n'
        "    return {'head_camera_rgb': name, 'key': ('x', \"palm_link\")}\n"
    )
    assert spelled_cell_names([("pkg.node", planted), ("pkg.home", planted)], ["pkg.home"]) == [
        "pkg.node:5 'base_link'",
        "pkg.node:6 'hand_camera'",
        "pkg.node:8 'head_camera_rgb'",
        "pkg.node:8 'palm_link'",
    ]


def test_a_core_reaching_ros_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "nodes").mkdir(parents=True)
    for path in (package / "__init__.py", package / "nodes" / "__init__.py"):
        path.write_text("")
    (package / "nodes" / "talker.py").write_text("import rclpy\n")
    (package / "algorithm.py").write_text("def f():\n    from rclpy.node import Node\n")
    (package / "helper.py").write_text("from pkg.nodes.talker import thing\n")
    (package / "clean.py").write_text("import numpy\nfrom pkg import algorithm\n")
    assert cores_importing_ros(modules("pkg", package).items(), {"pkg"}) == [
        "pkg.algorithm imports rclpy.node",
        "pkg.algorithm imports rclpy.node.Node",
        "pkg.helper imports the ROS edge pkg.nodes.talker",
        "pkg.helper imports the ROS edge pkg.nodes.talker.thing",
    ]


def test_a_drawing_that_differs_from_the_code_is_found() -> None:
    text = (
        "Today's graph (imports read from the source):\n\n  ```\n"
        "  a ← b ← c\n  a + b ← d\n  e: imported by name\n  ```"
    )
    drawn = drawn_graph(text)
    assert drawn == {"a": set(), "b": {"a"}, "c": {"b"}, "d": {"a", "b"}}
    code = {"a": set(), "b": {"a"}, "c": {"b", "a"}, "d": {"a", "b"}}
    assert graph_differences(drawn, code) == []
    # An arrow no import makes, and an import the drawing misses.
    code_changed = {"a": set(), "b": set(), "c": {"b", "e"}, "d": {"a", "b"}, "e": set()}
    assert graph_differences(drawn, code_changed) == [
        "drawn: a ← b, but b does not import a",
        "c depends on ['e'], which the drawing does not show",
    ]
