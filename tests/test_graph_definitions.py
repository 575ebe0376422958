"""Graph definitions: loading, argument resolution and user errors (no processes started)."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from r2s2r.graph import (
    ArgRef,
    ConfigRef,
    GraphError,
    GraphSpec,
    available_graphs,
    load_graph,
    parse_launch_arguments,
    parse_template,
    resolve_graph,
)

CONFIG = Path(__file__).resolve().parent.parent / "config"


def make_graph(tmp_path: Path) -> Path:
    (tmp_path / "graphs").mkdir()
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "talker.yaml").write_text("talker:\n  ros__parameters: {rate_hz: 5.0}\n")
    (tmp_path / "graphs" / "demo.yaml").write_text(
        """
name: demo
description: test graph
arguments:
  - {name: rate, default: "7.5", description: publish rate}
  - name: with_listener
    default: "true"
    description: start the listener
    choices: ["true", "false"]
  - {name: params, default: "$(config)/nodes/talker.yaml", description: parameter file}
  - {name: data, default: "$(config)/nodes/talker.yaml", description: data file, file: true}
nodes:
  - name: talker
    package: pkg_a
    executable: talk
    parameters: ["$(arg params)"]
    parameter_overrides: {rate_hz: "$(arg rate)", enabled: true, label: ""}
    remappings: {chatter: /demo/chatter}
  - name: listener
    package: pkg_b
    executable: listen
    required: false
    condition: "$(arg with_listener)"
"""
    )
    return tmp_path


def test_shipped_graphs_load_and_resolve_with_defaults() -> None:
    names = available_graphs(CONFIG)
    assert {"real_deploy", "sim_generate"} <= set(names)
    for name in names:
        spec = load_graph(name, CONFIG)
        assert isinstance(spec, GraphSpec)
        nodes = resolve_graph(spec, {}, CONFIG)
        assert nodes, f"graph {name} starts no node with its defaults"
        for node in nodes:
            for path in node.parameter_files:
                assert path.is_file()


def test_resolution_substitutes_arguments_and_conditions(tmp_path: Path) -> None:
    base = make_graph(tmp_path)
    spec = load_graph("demo", base)
    nodes = resolve_graph(spec, {"rate": "2.0"}, base)
    assert [n.name for n in nodes] == ["talker", "listener"]
    talker = nodes[0]
    assert talker.parameter_files == (base / "nodes" / "talker.yaml",)
    assert talker.parameter_overrides == {"rate_hz": "2.0", "enabled": True, "label": ""}
    args = talker.ros_arguments()
    assert args[:3] == ["--ros-args", "-r", "__node:=talker"]
    assert "rate_hz:=2.0" in args and "enabled:=true" in args and "label:=''" in args
    assert "chatter:=/demo/chatter" in args
    assert [n.name for n in resolve_graph(spec, {"with_listener": "false"}, base)] == ["talker"]


def test_user_errors_name_the_thing_and_the_choices(tmp_path: Path) -> None:
    base = make_graph(tmp_path)
    with pytest.raises(GraphError, match=r"unknown graph 'nope' \(choices: demo\)"):
        load_graph("nope", base)
    spec = load_graph("demo", base)
    with pytest.raises(GraphError, match=r"argument .speed. .*choices: data, params, rate"):
        resolve_graph(spec, {"speed": "1"}, base)
    with pytest.raises(GraphError, match=r"with_listener:=maybe is not allowed"):
        resolve_graph(spec, {"with_listener": "maybe"}, base)
    with pytest.raises(GraphError, match=r"parameter file not found: /no/such.yaml"):
        resolve_graph(spec, {"params": "/no/such.yaml"}, base)
    with pytest.raises(GraphError, match=r"launch argument data:=/no/data.yaml: file not found"):
        resolve_graph(spec, {"data": "/no/data.yaml"}, base)
    with pytest.raises(GraphError, match=r"bad launch argument 'rate=3'"):
        parse_launch_arguments(["rate=3"])


@pytest.mark.graph
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["launch", "nope"], "unknown graph 'nope' (choices:"),
        (["launch", "sim_generate", "no_such_arg:=1"], "unknown launch argument 'no_such_arg'"),
        (["launch", "sim_generate", "oops"], "bad launch argument 'oops'"),
        (["launch", "sim_generate", "episodes:=four"], "episodes_per_configuration"),
    ],
)
def test_cli_user_errors_are_one_line_exit_2(argv: list[str], expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", *argv], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.graph
def test_cli_missing_parameter_file_is_one_line_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "r2s2r.cli",
            "launch",
            "real_deploy",
            f"twin_config:={tmp_path}/x.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "x.yaml" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.graph
def test_cli_help_on_every_verb() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert listing.returncode == 0
    verbs = [
        line.split()[0]
        for line in listing.stdout.split("Commands:")[1].splitlines()
        if line.startswith("  ") and line.split()
    ]
    assert {"launch", "graphs"} <= set(verbs)
    for verb in verbs:
        result = subprocess.run(
            [sys.executable, "-m", "r2s2r.cli", verb, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (verb, result.stderr)
        assert "Usage:" in result.stdout


def test_real_deploy_wires_the_grounding_artifact_and_one_static_tf_publisher() -> None:
    spec = load_graph("real_deploy", CONFIG)
    nominal = {n.name: n for n in resolve_graph(spec, {}, CONFIG)}
    assert nominal["cell_state_publisher"].parameter_overrides["grounding_artifact"] == ""
    assert nominal["belt_speed"].parameter_overrides["grounding_artifact"] == ""
    assert nominal["real_twin"].parameter_overrides["head_camera_info_file"] == ""
    given = {
        "grounding_artifact": "/runs/g/artifact.yaml",
        "head_camera_info": "/runs/g/cal/head_camera.yaml",
        "hand_camera_info": "/runs/g/cal/hand_camera.yaml",
    }
    nodes = {n.name: n for n in resolve_graph(spec, given, CONFIG)}
    for name in ("cell_state_publisher", "belt_speed"):
        assert nodes[name].parameter_overrides["grounding_artifact"] == "/runs/g/artifact.yaml"
        assert "grounding_artifact:=/runs/g/artifact.yaml" in nodes[name].ros_arguments()
    twin = nodes["real_twin"].parameter_overrides
    assert twin["head_camera_info_file"] == "/runs/g/cal/head_camera.yaml"
    assert twin["hand_camera_info_file"] == "/runs/g/cal/hand_camera.yaml"
    # One publisher of the cell's static frames: the description's (grounded) publisher; the
    # twin's nominal /tf_static is off, as no hardware driver publishes the cell's mounts.
    assert twin["publish_tf_static"] is False
    publisher_file = nodes["cell_state_publisher"].parameter_files[0]
    publisher = yaml.safe_load(publisher_file.read_text())["cell_state_publisher"]
    assert publisher["ros__parameters"]["publish_fixed"] is True


def test_templates_split_into_text_and_references() -> None:
    assert parse_template("$(config)/nodes/$(arg name).yaml") == (
        ConfigRef(),
        "/nodes/",
        ArgRef("name"),
        ".yaml",
    )
    assert parse_template("plain") == ("plain",)
    assert parse_template("") == ()


def test_overrides_are_typed_by_the_schema_the_node_declares() -> None:
    given = {"episodes": "7", "output_dir": "123", "ray_address": "true"}
    (node,) = resolve_graph(load_graph("sim_generate", CONFIG), given, CONFIG)
    overrides = node.parameter_overrides
    assert overrides["episodes_per_configuration"] == 7
    assert type(overrides["episodes_per_configuration"]) is int
    assert overrides["output_dir"] == "123" and overrides["ray_address"] == "true"
    args = node.ros_arguments()
    # rcl reads -p values as YAML: strings that look like numbers or booleans are quoted.
    assert "episodes_per_configuration:=7" in args
    assert "output_dir:='123'" in args and "ray_address:='true'" in args
    twin = resolve_graph(load_graph("real_deploy", CONFIG), {"real_time_factor": "2"}, CONFIG)[0]
    assert twin.parameter_overrides["real_time_factor"] == 2.0
    assert type(twin.parameter_overrides["real_time_factor"]) is float
    assert "real_time_factor:=2.0" in twin.ros_arguments()
    with pytest.raises(GraphError, match=r"episodes_per_configuration .*'four': expected an int"):
        resolve_graph(load_graph("sim_generate", CONFIG), {"episodes": "four"}, CONFIG)


def test_an_override_the_node_does_not_declare_is_an_error(tmp_path: Path) -> None:
    graph = tmp_path / "typo.yaml"
    graph.write_text(
        "name: typo\ndescription: an override with a typo\nnodes:\n"
        "  - {name: sim_generate, package: r2s2r, executable: sim_generate,\n"
        "     parameter_overrides: {episodes_per_config: 3}}\n"
    )
    with pytest.raises(GraphError, match="'episodes_per_config' is not a parameter of"):
        resolve_graph(load_graph(str(graph)), {}, CONFIG)


def test_every_node_parameter_file_is_in_config_nodes_named_after_its_node() -> None:
    parameter_files = [
        path
        for path in sorted(CONFIG.rglob("*.yaml"))
        if "ros__parameters" in path.read_text(encoding="utf-8")
    ]
    assert parameter_files, "no node parameter files found"
    for path in parameter_files:
        assert path.parent == CONFIG / "nodes", f"{path}: node parameter files live in config/nodes"
        nodes = list(yaml.safe_load(path.read_text(encoding="utf-8")))
        assert nodes == [path.stem], f"{path}: expected one node named {path.stem!r}, got {nodes}"


def test_real_deploy_runs_a_policy_only_when_asked() -> None:
    spec = load_graph("real_deploy", CONFIG)
    assert "policy_inference" not in {n.name for n in resolve_graph(spec, {}, CONFIG)}
    given = {
        "policy": "true",
        "checkpoint": "/runs/exp/policies/grounded_mimicgen/checkpoints/step_00006000",
        "image_height_px": "64",
        "image_width_px": "64",
        "execution": "receding",
        "executed_steps": "3",
    }
    nodes = {n.name: n for n in resolve_graph(spec, given, CONFIG)}
    policy = nodes["policy_inference"]
    overrides = policy.parameter_overrides
    assert overrides["checkpoint_path"] == given["checkpoint"]
    assert overrides["image_height_px"] == overrides["image_width_px"] == 64
    assert overrides["execution"] == "receding" and overrides["executed_steps"] == 3
    assert overrides["has_object_tracks"] is True
    # A stopped policy leaves the cell's drivers up; the node configures itself (no manager).
    assert policy.required is False
    params = yaml.safe_load(policy.parameter_files[0].read_text())["policy_inference"]
    assert params["ros__parameters"]["autostart"] is True
    with pytest.raises(GraphError, match=r"execution:=fast is not allowed"):
        resolve_graph(spec, {**given, "execution": "fast"}, CONFIG)
