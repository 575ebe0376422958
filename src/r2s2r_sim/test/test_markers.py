"""Cell markers (ROS-free specs) and the rviz configuration that shows them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_description.cell import BELT_THICKNESS_M, BIN_WALL_THICKNESS_M, build_description
from r2s2r_description.model import forward_kinematics
from r2s2r_description.transforms import make_transform, quat_to_matrix
from r2s2r_sim.markers import MarkerError, MarkerShape, MarkerSpec, cell_markers, object_marker
from r2s2r_world.world import WorldParams

REPO = Path(__file__).resolve().parents[3]
RVIZ = REPO / "config" / "r2s2r.rviz"


def world_pose(spec: MarkerSpec, poses: dict[str, np.ndarray]) -> np.ndarray:
    return poses[spec.frame_id] @ make_transform(spec.position_m, quat_to_matrix(spec.quat_wxyz))


def test_cell_markers_show_table_belt_and_bins_in_their_frames(
    nominal_world: WorldParams,
) -> None:
    description = build_description(nominal_world.layout())
    specs = cell_markers(description)
    by_ns: dict[str, list[MarkerSpec]] = {}
    for spec in specs:
        by_ns.setdefault(spec.namespace, []).append(spec)
    assert set(by_ns) == {"table", "belt", "bins", "cameras"}
    # ids unique within a namespace
    for items in by_ns.values():
        assert len({s.marker_id for s in items}) == len(items)
    # no robot links (the RobotModel display draws the robot from /robot_description)
    robot_frames = {link.name for link in description.links if link.kind != "cell"}
    assert not robot_frames & {s.frame_id for s in specs}
    assert {s.frame_id for s in by_ns["bins"]} == {f"{b}_link" for b in nominal_world.bins}
    assert len(by_ns["bins"]) == 5 * len(nominal_world.bins)  # floor + four walls each

    poses = forward_kinematics(description)
    (surface,) = [s for s in by_ns["belt"] if s.label == "belt_surface"]
    assert surface.frame_id == "belt_link" and surface.shape == MarkerShape.CUBE
    assert surface.scale_m == pytest.approx((1.6, 0.30, 0.04))
    belt_xyz = nominal_world.belt.pose.xyz_m
    np.testing.assert_allclose(
        world_pose(surface, poses)[:3, 3],
        [belt_xyz[0], belt_xyz[1], belt_xyz[2] - BELT_THICKNESS_M / 2],
        atol=1e-9,
    )
    floor_bin_1 = next(s for s in by_ns["bins"] if s.label == "bin_1_floor")
    bin_xyz = nominal_world.bins["bin_1"].pose.xyz_m
    np.testing.assert_allclose(
        world_pose(floor_bin_1, poses)[:3, 3],
        [bin_xyz[0], bin_xyz[1], bin_xyz[2] + BIN_WALL_THICKNESS_M / 2],
        atol=1e-9,
    )
    (table,) = by_ns["table"]
    assert table.frame_id == "world"
    assert "floor" not in {s.label for s in specs}
    assert "floor" in {s.label for s in cell_markers(description, include_floor=True)}


def test_object_marker_has_type_shape_size_and_colour(nominal_world: WorldParams) -> None:
    yaw = np.pi / 3
    marker = object_marker(
        7,
        "cylinder",
        nominal_world.objects,
        "base_link",
        (0.5, 0.1, 0.05),
        (2.0 * np.cos(yaw / 2), 0.0, 0.0, 2.0 * np.sin(yaw / 2)),  # normalised on the way
    )
    cylinder = nominal_world.objects["cylinder"]
    assert (marker.namespace, marker.marker_id, marker.frame_id) == ("objects", 7, "base_link")
    assert marker.shape == MarkerShape.CYLINDER
    assert marker.scale_m == pytest.approx(cylinder.size_m)
    assert marker.rgba == cylinder.rgba
    assert marker.quat_wxyz == pytest.approx((np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)))
    cube = object_marker(0, "cube", nominal_world.objects, "world", (0, 0, 1), (1, 0, 0, 0))
    assert cube.shape == MarkerShape.CUBE and cube.rgba == nominal_world.objects["cube"].rgba
    sphere = object_marker(1, "sphere", nominal_world.objects, "world", (0, 0, 1), (1, 0, 0, 0))
    assert sphere.shape == MarkerShape.SPHERE and sphere.scale_m == pytest.approx((0.055,) * 3)
    with pytest.raises(MarkerError, match="'teapot': unknown"):
        object_marker(0, "teapot", nominal_world.objects, "world", (0, 0, 0), (1, 0, 0, 0))
    with pytest.raises(MarkerError, match="non-zero quaternion"):
        object_marker(0, "cube", nominal_world.objects, "world", (0, 0, 0), (0, 0, 0, 0))
    with pytest.raises(MarkerError, match="3 finite values"):
        object_marker(0, "cube", nominal_world.objects, "world", (0, np.nan, 0), (1, 0, 0, 0))


def test_rviz_config_shows_robot_cameras_and_cell_markers() -> None:
    config = yaml.safe_load(RVIZ.read_text())
    assert {"Panels", "Visualization Manager", "Window Geometry"} <= set(config)
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"]: d for d in manager["Displays"] if d.get("Enabled", True)}
    topics: dict[str, list[str]] = {}
    for display in manager["Displays"]:
        if not display.get("Enabled", True):
            continue
        topic = display.get("Topic") or display.get("Description Topic") or {}
        topics.setdefault(display["Class"], []).append(topic.get("Value", ""))
    robot = displays["rviz_default_plugins/RobotModel"]
    assert robot["Description Source"] == "Topic"
    assert robot["Description Topic"]["Value"] == "/robot_description"
    # rviz reads the description latched: its QoS must match the publisher's.
    assert robot["Description Topic"]["Durability Policy"] == "Transient Local"
    assert "rviz_default_plugins/TF" in displays
    assert sorted(topics["rviz_default_plugins/Image"]) == [
        "/hand_camera/image_raw",
        "/head_camera/image_raw",
    ]
    for display in manager["Displays"]:
        if display["Class"] == "rviz_default_plugins/Image":  # the cameras' sensor-data QoS
            assert display["Topic"]["Reliability Policy"] == "Best Effort"
    sim_views = [d for d in manager["Displays"] if "/sim/" in d.get("Topic", {}).get("Value", "")]
    assert [d["Topic"]["Value"] for d in sim_views] == ["/sim/head_camera/image_raw"]
    assert topics["rviz_default_plugins/MarkerArray"] == ["/cell/markers"]
    markers = displays["rviz_default_plugins/MarkerArray"]
    assert {"belt", "bins", "objects", "table"} <= set(markers["Namespaces"])
    tools = {tool["Class"] for tool in manager["Tools"]}
    assert "rviz_default_plugins/Interact" in tools
    classes = {panel["Class"] for panel in config["Panels"]}
    assert "rviz_common/Displays" in classes
    assert manager["Views"]["Current"]["Class"] == "rviz_default_plugins/Orbit"
