"""Topic names have one home, ``r2s2r_common.topics``; files that cannot import it are checked.

Python imports the names. The YAML files under ``config/`` (node parameters, graph definitions:
arguments, parameter overrides, remappings) and the rviz configuration spell them, so a typo
there, or a rename that forgets a file, would only show on a running cell: every topic name
these files spell must be one the module defines. The names themselves are the cell's contract
(a lab's hardware publishes them, docs/architecture.md §4) and are pinned here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import r2s2r_common.topics as topics
import yaml
from r2s2r_description.controllers import ARM, CONTROLLER_JOINTS, HAND, controller_name

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config"
RVIZ = CONFIG / "r2s2r.rviz"

CELL_NAMES: dict[str, str] = {
    "JOINT_STATES": "/joint_states",
    "TF": "/tf",
    "TF_STATIC": "/tf_static",
    "ROBOT_DESCRIPTION": "/robot_description",
    "CLOCK": "/clock",
    "DIAGNOSTICS": "/diagnostics",
    "BELT_ENCODER": "/belt/encoder",
    "BELT_SPEED": "/belt/speed",
    "OBJECT_TRACKS": "/objects/tracks",
    "TRIAL_OUTCOME": "/trial/outcome",
    "TRIAL_START": "/trial/start",
    "TRIAL_RESET": "/trial/reset",
    "OPERATOR_OBJECT_POSES": "/twin/operator/object_poses",
    "OPERATOR_BOARD_POSE": "/twin/operator/board_pose",
    "CELL_MARKERS": "/cell/markers",
    "HEAD_CAMERA_IMAGE": "/head_camera/image_raw",
    "HEAD_CAMERA_INFO": "/head_camera/camera_info",
    "HEAD_DEPTH": "/head_camera/depth/image_raw",
    "HAND_CAMERA_IMAGE": "/hand_camera/image_raw",
    "HAND_CAMERA_INFO": "/hand_camera/camera_info",
}
"""The names a cell exposes, spelled out: what a lab's hardware publishes and serves."""

RVIZ_TOOL_TOPICS = {"/initialpose", "/goal_pose", "/clicked_point"}
"""rviz's own tools publish these (its defaults); no node of the cell uses them."""

TOPIC_KEY = re.compile(r"(^|_)topics?$")
"""Parameters and launch arguments that hold topic names (``objects_topic``, ``topics``)."""

ABSOLUTE_NAME = re.compile(r"^/[A-Za-z_][A-Za-z0-9_/]*$")


def defined_names() -> set[str]:
    """Every topic and service name the module defines, the families expanded."""
    names = {
        value
        for key, value in vars(topics).items()
        if key.isupper() and isinstance(value, str) and value.startswith("/")
    }
    for camera in (topics.HEAD_CAMERA, topics.HAND_CAMERA):
        names |= {
            topics.camera_image(camera),
            topics.camera_info(camera),
            topics.sim_camera_image(camera),
        }
    names |= {topics.joint_trajectory(controller_name(key)) for key in CONTROLLER_JOINTS}
    return names


def spelled_names(data: Any, key: str = "") -> Iterator[str]:
    """Topic names a parsed YAML document spells.

    A string (value or mapping key) that is an absolute ROS name counts, wherever it stands,
    except device paths (``/dev/...``); a QoS override ``<topic>=<profile>`` counts by its
    topic. Under a topic-holding key (:data:`TOPIC_KEY`) or ``remappings`` every string counts
    (a relative or misspelled name there is reported as it is), except launch substitutions
    (``$(arg ...)``).
    """
    if isinstance(data, dict):
        for child_key, value in data.items():
            if isinstance(child_key, str) and child_key.startswith("/"):
                yield child_key
            inside = str(child_key)
            if key == "remappings" or TOPIC_KEY.search(key):
                inside = key  # a list or mapping under a topic key keeps its meaning
            yield from spelled_names(value, inside)
    elif isinstance(data, list):
        for value in data:
            yield from spelled_names(value, key)
    elif isinstance(data, str):
        name = data.split("=", 1)[0] if key == "qos_overrides" else data
        if name.startswith("$("):
            return
        holds_topics = TOPIC_KEY.search(key) or key in ("remappings", "qos_overrides")
        if holds_topics or (ABSOLUTE_NAME.match(name) and not name.startswith("/dev/")):
            yield name


def rviz_topics(data: Any) -> Iterator[tuple[str, str]]:
    """(section, name) of every ``Topic`` and ``Description Topic`` value in an rviz file."""
    manager = data["Visualization Manager"]
    for section in ("Displays", "Tools"):
        for item in manager.get(section) or []:
            for key in ("Topic", "Description Topic"):
                if isinstance(item.get(key), dict) and "Value" in item[key]:
                    yield section, item[key]["Value"]


def yaml_files() -> list[Path]:
    return sorted(CONFIG.rglob("*.yaml"))


def test_the_names_a_cell_exposes_are_pinned() -> None:
    assert {name: getattr(topics, name) for name in CELL_NAMES} == CELL_NAMES
    assert topics.joint_trajectory(controller_name(ARM)) == "/arm_controller/joint_trajectory"
    assert topics.joint_trajectory(controller_name(HAND)) == "/hand_controller/joint_trajectory"
    assert topics.camera_image("head_camera", relative=True) == "head_camera/image_raw"
    assert topics.sim_camera_image("hand_camera") == "/sim/hand_camera/image_raw"


@pytest.mark.parametrize("path", yaml_files(), ids=lambda path: str(path.relative_to(CONFIG)))
def test_every_topic_a_config_file_spells_is_defined(path: Path) -> None:
    unknown = sorted(set(spelled_names(yaml.safe_load(path.read_text()))) - defined_names())
    assert not unknown, f"{path.relative_to(REPO)}: not in r2s2r_common.topics: {unknown}"


def test_every_topic_the_rviz_file_shows_is_defined() -> None:
    found = list(rviz_topics(yaml.safe_load(RVIZ.read_text())))
    displays = {name for section, name in found if section == "Displays"}
    assert displays, "no display topics found: the rviz file's layout changed"
    assert not displays - defined_names(), sorted(displays - defined_names())
    assert {name for section, name in found if section == "Tools"} <= RVIZ_TOOL_TOPICS


def test_the_check_finds_typos_and_relative_names() -> None:
    node = yaml.safe_load(
        """
recorder:
  ros__parameters:
    topics: [/joint_states, /belt/sped, objects/tracks]
    qos_overrides: [/tf_static=reliable, /tf_statics=reliable]
    outcome_topic: /trial/outcome
    output_dir: runs/demos
    device: /dev/video0
    note: /head_camera/image_row
"""
    )
    graph = yaml.safe_load(
        """
arguments:
  - {name: objects_topic, default: /twin/operator/object_pose, choices: [/objects/tracks]}
nodes:
  - name: demonstrator
    parameter_overrides: {objects_topic: "$(arg objects_topic)"}
    remappings: {/joint_states: /robot/joint_state}
"""
    )
    unknown = set(spelled_names(node)) | set(spelled_names(graph))
    assert unknown - defined_names() == {
        "/belt/sped",
        "objects/tracks",
        "/tf_statics",
        "/head_camera/image_row",
        "/twin/operator/object_pose",
        "/robot/joint_state",
    }
