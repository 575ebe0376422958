"""The view's core: messages in, Rerun log calls out (no rclpy, no server)."""

from __future__ import annotations

from types import SimpleNamespace as NS  # noqa: N814 (short: messages are nested)
from typing import Any

import numpy as np
import pytest
from r2s2r_description.cell import build_description
from r2s2r_description.frames import BASE_LINK, PALM_LINK
from r2s2r_description.model import ShapeKind, forward_kinematics
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_description.transforms import invert_transform
from r2s2r_description.urdf import UrdfError, parse_urdf_visuals, to_urdf
from r2s2r_view.rerun_log import (
    BELT_SPEED_ENTITY,
    CAMERA_ENTITIES,
    CHUNK_ENTITY,
    OBJECTS_ENTITY,
    REAL_LIKENESS_ENTITY,
    REAL_LIKENESS_MEAN_ENTITY,
    ROBOT_ENTITY,
    TF_ENTITY,
    CellLogger,
)


class RecordingSpy:
    """Stands in for ``rr.RecordingStream``: keeps every log call with the time set before it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], bool, Any]] = []
        self.time: Any = None

    def set_time(self, _timeline: str, *, timestamp: Any) -> None:
        self.time = timestamp

    def log(self, entity: str, *archetypes: Any, static: bool = False) -> None:
        self.calls.append((entity, archetypes, static, self.time))

    def send_blueprint(self, _blueprint: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    def at(self, entity: str) -> list[tuple[tuple[Any, ...], bool, Any]]:
        return [(a, s, t) for e, a, s, t in self.calls if e == entity]


def values(batch: Any) -> list[Any]:
    return list(batch.as_arrow_array().to_pylist())


def header(ns: int, frame: str = "") -> NS:
    return NS(stamp=NS(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=frame)


@pytest.fixture
def logged() -> tuple[CellLogger, RecordingSpy]:
    spy = RecordingSpy()
    return CellLogger(spy), spy  # type: ignore[arg-type]


def test_urdf_visuals_are_the_descriptions_shapes() -> None:
    description = build_description()
    visuals = parse_urdf_visuals(to_urdf(description))
    shapes = [(link.name, shape) for link in description.links for shape in link.shapes]
    assert len(visuals) == len(shapes)
    for visual, (link, shape) in zip(visuals, shapes, strict=True):
        assert visual.link == link
        expected = "cylinder" if shape.kind == ShapeKind.CAPSULE else shape.kind.value
        assert visual.kind == expected
        assert np.allclose(visual.size_m, shape.size_m, atol=1e-8)
        assert np.allclose(visual.origin, shape.origin.matrix(), atol=1e-7)
        assert np.allclose(visual.rgba, shape.rgba, atol=1e-3)
    with pytest.raises(UrdfError, match="not XML"):
        parse_urdf_visuals("<robot")


def test_robot_links_drawn_in_their_frames(logged: tuple[CellLogger, RecordingSpy]) -> None:
    logger, spy = logged
    urdf = to_urdf(build_description())
    logger.log_robot(urdf)
    entities = {e for e, *_ in spy.calls}
    links_with_shapes = {v.link for v in parse_urdf_visuals(urdf)}
    assert {e.split("/")[2] for e in entities} == links_with_shapes
    for entity, archetypes, static, _ in spy.calls:
        assert entity.startswith(ROBOT_ENTITY) and static
        assert values(archetypes[0].frame) == [entity.split("/")[2]]


def test_transforms_name_parent_and_child(logged: tuple[CellLogger, RecordingSpy]) -> None:
    logger, spy = logged
    transform = NS(
        header=header(2_500_000_000, "base_link"),
        child_frame_id="shoulder_link",
        transform=NS(translation=NS(x=0.1, y=0.2, z=0.3), rotation=NS(x=0.0, y=0.0, z=0.0, w=1.0)),
    )
    logger.log_transforms(NS(transforms=[transform]), static=False)
    [(archetypes, static, time)] = spy.at(f"{TF_ENTITY}/shoulder_link")
    (tf,) = archetypes
    assert not static and time == np.datetime64(2_500_000_000, "ns")
    assert values(tf.parent_frame) == ["base_link"]
    assert values(tf.child_frame) == ["shoulder_link"]
    assert np.allclose(values(tf.translation), [[0.1, 0.2, 0.3]])


def image_msg(pixels: np.ndarray, encoding: str) -> NS:
    height, width = pixels.shape[:2]
    return NS(
        header=header(1),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=pixels.strides[0],
        data=pixels.tobytes(),
    )


def test_images_keep_their_pixels_and_bad_ones_are_counted(
    logged: tuple[CellLogger, RecordingSpy],
) -> None:
    logger, spy = logged
    pixels = np.zeros((4, 6, 3), np.uint8)
    pixels[:, :3] = (255, 0, 255)
    assert logger.log_image("head_camera", image_msg(pixels, "bgr8"))
    [(archetypes, _, _)] = spy.at(CAMERA_ENTITIES["head_camera"])
    (image,) = archetypes
    [fmt] = values(image.format)
    assert (fmt["width"], fmt["height"]) == (6, 4)
    assert bytes(np.asarray(values(image.buffer)[0], np.uint8)) == pixels.tobytes()
    broken = image_msg(pixels, "rgb8")
    broken.step = 5
    assert not logger.log_image("hand_camera", broken)
    assert logger.dropped == {"hand_camera": 1}


def test_tracks_are_boxes_in_the_header_frame(logged: tuple[CellLogger, RecordingSpy]) -> None:
    logger, spy = logged
    track = NS(
        id=7,
        object_type="cube",
        pose=NS(position=NS(x=0.5, y=-0.2, z=0.1), orientation=NS(x=0, y=0, z=0, w=1)),
    )
    logger.log_tracks(NS(header=header(3, "base_link"), tracks=[track]))
    [(archetypes, _, _)] = spy.at(OBJECTS_ENTITY)
    frame, boxes = archetypes
    assert values(frame.frame) == [BASE_LINK]
    assert np.allclose(values(boxes.centers), [[0.5, -0.2, 0.1]])
    assert values(boxes.labels) == ["cube #7"]


def test_arm_chunk_draws_the_palm_path_by_forward_kinematics(
    logged: tuple[CellLogger, RecordingSpy],
) -> None:
    logger, spy = logged
    description = build_description()
    logger.log_robot(to_urdf(description))
    targets = [np.linspace(-0.4, 0.4, len(ARM_JOINT_NAMES)) * k for k in (0.5, 1.0)]
    msg = NS(
        header=header(0),
        joint_names=list(ARM_JOINT_NAMES),
        points=[
            NS(positions=list(t), time_from_start=NS(sec=0, nanosec=100_000_000 * (i + 1)))
            for i, t in enumerate(targets)
        ],
    )
    logger.log_trajectory("arm", msg, receive_ns=5_000_000_000)
    [(archetypes, _, time)] = spy.at(f"{CHUNK_ENTITY}/arm")
    assert time == np.datetime64(5_000_000_000, "ns")  # unstamped: sent "now"
    frame, strips, _points = archetypes
    assert values(frame.frame) == [BASE_LINK]
    [path] = values(strips.strips)
    for drawn, target in zip(path, targets, strict=True):
        poses = forward_kinematics(description, dict(zip(ARM_JOINT_NAMES, target, strict=True)))
        expected = (invert_transform(poses[BASE_LINK]) @ poses[PALM_LINK])[:3, 3]
        assert np.allclose(drawn, expected, atol=1e-5)
    scheduled = spy.at(f"plots/chunk/{ARM_JOINT_NAMES[0]}")
    assert [t for *_, t in scheduled] == [
        np.datetime64(5_100_000_000, "ns"),
        np.datetime64(5_200_000_000, "ns"),
    ]


def test_belt_speed_and_real_likeness(logged: tuple[CellLogger, RecordingSpy]) -> None:
    logger, spy = logged
    logger.log_belt_speed(NS(header=header(1), twist=NS(linear=NS(x=0.12))))
    kv = [NS(key="real_likeness", value="0.750"), NS(key="real_likeness_mean", value="0.400")]
    # rclpy hands the byte field ``level`` over as bytes.
    status = NS(name="policy_inference: real-likeness", level=b"\x01", message="sim", values=kv)
    logger.log_diagnostics(NS(header=header(2), status=[status]))
    assert values(spy.at(BELT_SPEED_ENTITY)[0][0][0].scalars) == [0.12]
    assert values(spy.at(REAL_LIKENESS_ENTITY)[0][0][0].scalars) == [0.75]
    assert values(spy.at(REAL_LIKENESS_MEAN_ENTITY)[0][0][0].scalars) == [0.4]
    [(archetypes, _, _)] = spy.at("status/diagnostics")
    assert "WARN" in values(archetypes[0].text)[0]
