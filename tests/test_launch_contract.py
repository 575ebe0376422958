"""Contract: ``ros2 launch r2s2r <graph>.launch.py`` starts what ``r2s2r launch <graph>`` starts.

Every graph of config/graphs/ is built by ``r2s2r.launch_description`` with a minimal recording
fake of the launch API (always: no ``launch`` needed), and with the real ``launch`` and
``launch_ros`` when they import. A small visitor does with the entities what LaunchService
does (declare the arguments, call the opaque functions, evaluate conditions, substitutions and
parameters), without starting processes. The nodes it would start are compared with
``r2s2r.graph.resolve_graph`` (the supervisor's input): package, executable, name, parameter
files, typed overrides, remappings, arguments, conditions, and whether the node is required.
Declared parameter types come from each node's ``PARAMETER_SCHEMA`` (the schema its executable
declares its ROS parameters from).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ament_index_python.packages import get_package_share_directory
from r2s2r_common.config import schema_parameter_types

from r2s2r.graph import GraphError, available_graphs, load_graph, resolve_graph

GRAPHS = available_graphs()


# --------------------------------------------------------------------------------------------
# A minimal recording fake of the launch / launch_ros API (the parts the builder uses), with
# the semantics of launch 3.4 / launch_ros 0.26 (Jazzy) for what it evaluates.


class FakeSubstitution:
    """Base of the fake substitutions."""

    def perform(self, context: Any) -> str:
        raise NotImplementedError


class TextSubstitution(FakeSubstitution):
    def __init__(self, *, text: str) -> None:
        self.text = text

    def perform(self, context: Any) -> str:
        return self.text


class LaunchConfiguration(FakeSubstitution):
    def __init__(self, variable_name: str, *, default: Any = None) -> None:
        self.variable_name = variable_name

    def perform(self, context: Any) -> str:
        if self.variable_name not in context.launch_configurations:
            raise LookupError(f"launch configuration '{self.variable_name}' does not exist")
        return str(context.launch_configurations[self.variable_name])


class PathJoinSubstitution(FakeSubstitution):
    def __init__(self, substitutions: list[Any]) -> None:
        self.substitutions = substitutions

    def perform(self, context: Any) -> str:
        return os.path.join(*(fake_perform(context, part) for part in self.substitutions))


class FindPackageShare(FakeSubstitution):
    def __init__(self, package: str) -> None:
        self.package = package

    def perform(self, context: Any) -> str:
        return str(get_package_share_directory(self.package))


def fake_perform(context: Any, value: Any) -> str:
    """What launch.utilities.perform_substitutions gives for a SomeSubstitutionsType."""
    if isinstance(value, str):
        return value
    if isinstance(value, FakeSubstitution):
        return value.perform(context)
    if isinstance(value, list | tuple):
        return "".join(fake_perform(context, part) for part in value)
    raise TypeError(f"not a substitution: {value!r}")


def fake_coerce(text: str, value_type: type | None) -> Any:
    """launch.utilities.type_utils.coerce_to_type for scalars."""
    if value_type is None:
        return yaml.safe_load(text) if text else text
    if value_type is str:
        return text
    if value_type in (int, float):
        return value_type(text)
    if value_type is bool:
        loaded = yaml.safe_load({"1": "true", "0": "false"}.get(text, text))
        if not isinstance(loaded, bool):
            raise ValueError(f"Failed to convert '{text}' to '{value_type}'")
        return loaded
    raise ValueError(f"data_type is invalid: {value_type}")


class FakeLaunchContext:
    def __init__(self, argv: list[str] | None = None) -> None:
        self.argv = list(argv or [])
        self.launch_configurations: dict[str, str] = {}
        self.is_shutdown = False


class FakeAction:
    def __init__(self, *, condition: Any = None, **unused: Any) -> None:
        self.condition = condition

    def visit(self, context: Any) -> list[Any] | None:
        return None


class LaunchDescription:
    def __init__(self, initial_entities: list[Any] | None = None) -> None:
        self.entities = list(initial_entities or [])

    def visit(self, context: Any) -> list[Any]:
        return self.entities


class DeclareLaunchArgument(FakeAction):
    def __init__(
        self,
        name: str,
        *,
        default_value: Any = None,
        description: str | None = None,
        choices: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # As launch's constructor: a plain-string default must be one of the choices.
        if choices is not None and isinstance(default_value, str) and default_value not in choices:
            raise RuntimeError(
                f'Provided default_value "{default_value}" is not in provided choices "{choices}".'
            )
        self.name = name
        self.default_value = default_value
        self.choices = choices

    def visit(self, context: Any) -> None:
        if self.name not in context.launch_configurations:
            if self.default_value is None:
                raise RuntimeError(f'Required launch argument "{self.name}" was not provided.')
            context.launch_configurations[self.name] = fake_perform(context, self.default_value)
        value = context.launch_configurations[self.name]
        if self.choices is not None and value not in self.choices:
            raise RuntimeError(
                f'Argument "{self.name}" provided value "{value}" is not valid. Valid options '
                f"are: {self.choices}"
            )


class OpaqueFunction(FakeAction):
    def __init__(self, *, function: Any, args: Any = None, kwargs: Any = None, **rest: Any):
        super().__init__(**rest)
        self.function = function
        self.args = list(args or [])
        self.kwargs = dict(kwargs or {})

    def visit(self, context: Any) -> list[Any] | None:
        return self.function(context, *self.args, **self.kwargs)


class RegisterEventHandler(FakeAction):
    def __init__(self, event_handler: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recorded_handler = event_handler


class EmitEvent(FakeAction):
    def __init__(self, *, event: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.event = event


class LogInfo(FakeAction):
    def __init__(self, *, msg: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.msg = msg


class Shutdown:
    def __init__(self, *, reason: str = "reason not given", due_to_sigint: bool = False):
        self.reason = reason


class OnProcessExit:
    def __init__(self, *, target_action: Any = None, on_exit: Any, **kwargs: Any) -> None:
        self.target_action = target_action
        self.on_exit = on_exit

    def handle(self, event: Any, context: Any) -> Any:
        return self.on_exit(event, context) if callable(self.on_exit) else self.on_exit


@dataclass
class FakeProcessExited:
    returncode: int
    action: Any


class IfCondition:
    def __init__(self, predicate_expression: Any) -> None:
        self.predicate_expression = predicate_expression

    def evaluate(self, context: Any) -> bool:
        text = fake_perform(context, self.predicate_expression).lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValueError(f"Unexpected evaluation of IfCondition: {text!r}")


class Node(FakeAction):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(condition=kwargs.get("condition"))
        self.recorded_kwargs = kwargs


class ParameterFile:
    def __init__(self, param_file: Any, *, allow_substs: Any = False) -> None:
        self.param_file = param_file

    def evaluate(self, context: Any) -> Path:
        return Path(fake_perform(context, self.param_file))


class ParameterValue:
    def __init__(self, value: Any, *, value_type: type | None = None) -> None:
        self.value = value
        self.value_type = value_type

    def evaluate(self, context: Any) -> Any:
        return fake_coerce(fake_perform(context, self.value), self.value_type)


def fake_parameter_value(context: Any, value: Any) -> Any:
    """What launch_ros's normalize + evaluate of a parameter dict gives for one value."""
    if isinstance(value, ParameterValue):
        return value.evaluate(context)
    if isinstance(value, str):
        return value  # yaml.dump()ed by launch_ros: stays a string
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, FakeSubstitution) or (
        isinstance(value, list | tuple) and any(isinstance(v, FakeSubstitution) for v in value)
    ):
        return yaml.safe_load(fake_perform(context, value) or "''")
    raise TypeError(f"parameter value of a type launch_ros does not take: {value!r}")


def fake_modules() -> dict[str, types.ModuleType]:
    """The fake launch/launch_ros modules, by import name."""
    contents: dict[str, dict[str, Any]] = {
        "launch": {"LaunchDescription": LaunchDescription, "LaunchContext": FakeLaunchContext},
        "launch.actions": {
            "DeclareLaunchArgument": DeclareLaunchArgument,
            "OpaqueFunction": OpaqueFunction,
            "RegisterEventHandler": RegisterEventHandler,
            "EmitEvent": EmitEvent,
            "LogInfo": LogInfo,
        },
        "launch.substitutions": {
            "LaunchConfiguration": LaunchConfiguration,
            "TextSubstitution": TextSubstitution,
            "PathJoinSubstitution": PathJoinSubstitution,
        },
        "launch.conditions": {"IfCondition": IfCondition},
        "launch.event_handlers": {"OnProcessExit": OnProcessExit},
        "launch.events": {"Shutdown": Shutdown},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node},
        "launch_ros.substitutions": {"FindPackageShare": FindPackageShare},
        "launch_ros.parameter_descriptions": {
            "ParameterFile": ParameterFile,
            "ParameterValue": ParameterValue,
        },
    }
    modules = {}
    for name, attributes in contents.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        modules[name] = module
    return modules


# --------------------------------------------------------------------------------------------
# The two API flavours behind one interface, and the visitor.


class FakeApi:
    """Evaluates what the builder made with the fake API."""

    name = "fake"

    def context(self, given: dict[str, str], argv: list[str]) -> Any:
        context = FakeLaunchContext(argv)
        context.launch_configurations.update(given)
        return context

    def perform(self, context: Any, value: Any) -> str:
        return fake_perform(context, value)

    def parameters(self, context: Any, parameters: list[Any]) -> tuple[list[Path], dict]:
        files: list[Path] = []
        overrides: dict[str, Any] = {}
        for item in parameters:
            if isinstance(item, dict):
                for key, value in item.items():
                    overrides[fake_perform(context, key)] = fake_parameter_value(context, value)
            elif isinstance(item, ParameterFile):
                files.append(item.evaluate(context))
            else:
                files.append(Path(fake_perform(context, item)))
        return files, overrides

    def targets(self, handler: Any, action: Any) -> bool:
        return isinstance(handler, OnProcessExit) and handler.target_action is action

    def exit_event(self, action: Any, code: int) -> Any:
        return FakeProcessExited(code, action)

    def set_shutdown(self, context: Any) -> None:
        context.is_shutdown = True


class RealApi:
    """Evaluates what the builder made with the real launch/launch_ros (Jazzy)."""

    name = "real"

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import launch.actions
        import launch_ros.actions

        class RecordingNode(launch_ros.actions.Node):  # type: ignore[misc,name-defined]
            def __init__(self, **kwargs: Any) -> None:
                self.recorded_kwargs = kwargs
                super().__init__(**kwargs)

        class RecordingRegister(launch.actions.RegisterEventHandler):  # type: ignore[misc,name-defined]
            def __init__(self, event_handler: Any, **kwargs: Any) -> None:
                self.recorded_handler = event_handler
                super().__init__(event_handler, **kwargs)

        monkeypatch.setattr(launch_ros.actions, "Node", RecordingNode)
        monkeypatch.setattr(launch.actions, "RegisterEventHandler", RecordingRegister)

    def context(self, given: dict[str, str], argv: list[str]) -> Any:
        from launch import LaunchContext

        context = LaunchContext(argv=argv)
        context.launch_configurations.update(given)
        return context

    def perform(self, context: Any, value: Any) -> str:
        from launch.utilities import normalize_to_list_of_substitutions, perform_substitutions

        return str(perform_substitutions(context, normalize_to_list_of_substitutions(value)))

    def parameters(self, context: Any, parameters: list[Any]) -> tuple[list[Path], dict]:
        from launch_ros.utilities import evaluate_parameters, normalize_parameters

        files: list[Path] = []
        overrides: dict[str, Any] = {}
        for item in evaluate_parameters(context, normalize_parameters(parameters)):
            if isinstance(item, dict):
                overrides.update(item)
            else:
                files.append(Path(item))
        return files, overrides

    def targets(self, handler: Any, action: Any) -> bool:
        from launch.event_handlers import OnProcessExit

        return isinstance(handler, OnProcessExit) and handler.matches(self.exit_event(action, 0))

    def exit_event(self, action: Any, code: int) -> Any:
        from launch.events.process import ProcessExited

        return ProcessExited(
            returncode=code, action=action, name="test", cmd=["x"], cwd=None, env=None, pid=1
        )

    def set_shutdown(self, context: Any) -> None:
        context._set_is_shutdown(True)


def real_launch_importable() -> bool:
    try:
        import launch_ros.actions  # noqa: F401

        import launch
    except ImportError:
        return False
    return hasattr(launch, "LaunchService")  # not this repository's launch/ folder


@pytest.fixture(params=["fake", "real"])
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    if request.param == "fake":
        for name, module in fake_modules().items():
            monkeypatch.setitem(sys.modules, name, module)
        yield FakeApi()
    else:
        if not real_launch_importable():
            pytest.skip("launch/launch_ros not importable (a full ROS 2 install has them)")
        yield RealApi(monkeypatch)


@dataclass
class Started:
    """A node the launch would start, evaluated as launch_ros evaluates it."""

    package: str
    executable: str
    name: str
    parameter_files: tuple[Path, ...]
    parameter_overrides: dict[str, Any]
    remappings: dict[str, str]
    arguments: tuple[str, ...]
    required: bool


@dataclass
class Run:
    context: Any
    arguments: dict[str, str]
    nodes: list[Started]
    actions: list[Any]
    exit_handlers: list[Any]


def run_launch(api: Any, graph: str, given: dict[str, str] | None = None, argv: Any = None) -> Run:
    """Build the graph's launch description and visit it as LaunchService would."""
    from r2s2r.launch_description import generate_graph_launch_description

    given = dict(given or {})
    # ros2 launch: every NAME:=VALUE is in argv and set as a launch configuration.
    argv = list(argv) if argv is not None else [f"{k}:={v}" for k, v in given.items()]
    context = api.context(given, argv)
    description = generate_graph_launch_description(graph)
    nodes: list[Any] = []
    handlers: list[Any] = []

    def visit(entity: Any) -> None:
        if hasattr(entity, "recorded_kwargs"):
            if entity.condition is None or entity.condition.evaluate(context):
                nodes.append(entity)
            return
        if hasattr(entity, "recorded_handler"):
            handlers.append(entity.recorded_handler)
        for sub_entity in entity.visit(context) or []:
            visit(sub_entity)

    visit(description)
    started = []
    for action in nodes:
        kwargs = action.recorded_kwargs
        files, overrides = api.parameters(context, list(kwargs.get("parameters") or []))
        own = [h for h in handlers if api.targets(h, action)]
        started.append(
            Started(
                package=kwargs["package"],
                executable=kwargs["executable"],
                name=kwargs["name"],
                parameter_files=tuple(files),
                parameter_overrides=overrides,
                remappings={
                    api.perform(context, source): api.perform(context, target)
                    for source, target in kwargs.get("remappings") or []
                },
                arguments=tuple(api.perform(context, a) for a in kwargs.get("arguments") or []),
                required=bool(own),
            )
        )
    arguments = {a.name: context.launch_configurations[a.name] for a in load_graph(graph).arguments}
    return Run(context, arguments, started, nodes, handlers)


def typed(values: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    return {key: (type(value).__name__, value) for key, value in values.items()}


def declared_types(package: str, executable: str) -> dict[str, type] | None:
    """Scalar parameter types the executable declares (its module's PARAMETER_SCHEMA)."""
    for entry in importlib.metadata.distribution(package).entry_points:
        if entry.group == "console_scripts" and entry.name == executable:
            schema = getattr(importlib.import_module(entry.module), "PARAMETER_SCHEMA", None)
            if schema is None:
                return None
            scalars = {
                name: kind
                for name, (kind, is_list) in schema_parameter_types(schema).items()
                if not is_list
            }
            return {"use_sim_time": bool, **scalars}
    return None


def argument_sets(graph: str) -> list[dict[str, str]]:
    """Defaults; every choice of every argument that has choices; numbers changed."""
    spec = load_graph(graph)
    sets: list[dict[str, str]] = [{}]
    for argument in spec.arguments:
        for choice in argument.choices or []:
            sets.append({argument.name: choice})
    changed = {}
    for argument in spec.arguments:
        try:
            number = float(argument.default)
        except ValueError:
            continue
        # An integer default gets another integer; a float default gets an integer-looking
        # text ("3"), which a float parameter must still receive as 3.0.
        changed[argument.name] = str(int(number) + 3)
    if changed:
        sets.append(changed)
    return sets


CASES = [(graph, given) for graph in GRAPHS for given in argument_sets(graph)]


# --------------------------------------------------------------------------------------------


def test_every_graph_is_covered() -> None:
    assert {"real_deploy", "sim_generate", "record_demos"} <= set(GRAPHS)


@pytest.mark.parametrize("graph", GRAPHS)
def test_every_node_has_a_schema_declaring_its_overrides(graph: str) -> None:
    for node in load_graph(graph).nodes:
        types_ = declared_types(node.package, node.executable)
        assert types_ is not None, f"{node.package}/{node.executable} names no PARAMETER_SCHEMA"
        for name in node.parameter_overrides:
            assert name in types_, f"{graph}/{node.name}: '{name}' is not a declared parameter"


@pytest.mark.parametrize("graph", GRAPHS)
def test_defaults_are_valid_against_choices_after_substitution(api: Any, graph: str) -> None:
    run = run_launch(api, graph)
    for argument in load_graph(graph).arguments:
        value = run.arguments[argument.name]
        assert "$(" not in value, f"{argument.name} default reached launch unresolved: {value}"
        if argument.choices is not None:
            assert value in argument.choices, (argument.name, value)


@pytest.mark.parametrize(("graph", "given"), CASES)
def test_launch_starts_what_the_supervisor_starts(
    api: Any, graph: str, given: dict[str, str]
) -> None:
    expected = resolve_graph(load_graph(graph), given)
    run = run_launch(api, graph, given)
    assert [n.name for n in run.nodes] == [n.name for n in expected]  # conditions
    for started, node in zip(run.nodes, expected, strict=True):
        assert (started.package, started.executable) == (node.package, node.executable)
        assert started.parameter_files == node.parameter_files, node.name
        assert typed(started.parameter_overrides) == typed(node.parameter_overrides), node.name
        assert started.remappings == node.remappings, node.name
        assert started.arguments == node.arguments, node.name
        assert started.required == node.required, node.name


@pytest.mark.parametrize(("graph", "given"), CASES)
def test_no_number_or_bool_parameter_is_passed_as_a_string(
    api: Any, graph: str, given: dict[str, str]
) -> None:
    run = run_launch(api, graph, given)
    supervisor = {n.name: n for n in resolve_graph(load_graph(graph), given)}
    for started in run.nodes:
        declared = declared_types(started.package, started.executable) or {}
        for source in (started.parameter_overrides, supervisor[started.name].parameter_overrides):
            for key, value in source.items():
                if declared.get(key) in (bool, int, float):
                    assert type(value) is declared[key], (started.name, key, value)


@pytest.mark.parametrize("graph", GRAPHS)
def test_a_required_node_exit_stops_the_launch(api: Any, graph: str) -> None:
    run = run_launch(api, graph)
    required = []
    for action, started in zip(run.actions, run.nodes, strict=True):
        own = [h for h in run.exit_handlers if api.targets(h, action)]
        if not started.required:
            assert not own, started.name
            continue
        (handler,) = own
        required.append((handler, action))
        done = handler.handle(api.exit_event(action, 0), run.context)
        reasons = [a.event.reason for a in done or [] if hasattr(a, "event")]
        assert len(reasons) == 1 and f"'{started.name}' finished" in str(reasons[0])
        with pytest.raises(GraphError, match=rf"'{started.name}' died with exit code 3"):
            handler.handle(api.exit_event(action, 3), run.context)
    assert required
    api.set_shutdown(run.context)  # exits while the launch shuts down (Ctrl-C) change nothing
    for handler, action in required:
        assert not handler.handle(api.exit_event(action, -2), run.context)


@pytest.mark.parametrize(
    ("graph", "given", "argv"),
    [
        ("real_deploy", {"use_twin": "maybe"}, None),
        ("real_deploy", {"twin_config": "/no/such/twin.yaml"}, None),
        ("sim_generate", {"episodes": "four"}, None),
        ("real_deploy", {"real_time_factor": "fast"}, None),
        ("sim_generate", {"no_such_arg": "1"}, None),
        ("sim_generate", {}, ["episodes:=1", "no_such_arg:=1"]),
    ],
)
def test_bad_input_gives_the_supervisors_one_line_error(
    api: Any, graph: str, given: dict[str, str], argv: list[str] | None
) -> None:
    names = [token.partition(":=")[0] for token in argv or []]
    supervisor_given = {**given, **{n: "1" for n in names}}
    with pytest.raises(GraphError) as expected:
        resolve_graph(load_graph(graph), supervisor_given)
    with pytest.raises(GraphError) as raised:
        run_launch(api, graph, given, argv)
    assert str(raised.value) == str(expected.value)
    assert "\n" not in str(raised.value)


def test_missing_parameter_file_gives_the_supervisors_error(api: Any, tmp_path: Path) -> None:
    graph = tmp_path / "broken.yaml"
    graph.write_text(
        "name: broken\ndescription: a node whose parameter file is missing\n"
        "nodes:\n  - name: sim_generate\n    package: r2s2r\n"
        f"    executable: sim_generate\n    parameters: ['{tmp_path}/missing.yaml']\n"
    )
    with pytest.raises(GraphError, match="parameter file not found") as expected:
        resolve_graph(load_graph(str(graph)), {})
    with pytest.raises(GraphError) as raised:
        run_launch(api, str(graph))
    assert str(raised.value) == str(expected.value)
