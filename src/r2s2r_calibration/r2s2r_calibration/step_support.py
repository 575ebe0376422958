"""What several grounding steps use: cameras as calibrated so far, scene elements, arm moves."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_description.cameras import HEAD
from r2s2r_description.cell import build_description
from r2s2r_description.frames import BASE_LINK
from r2s2r_description.model import ShapeKind
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_description.transforms import invert_transform
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import OPTICAL_FROM_LINK_RPY_RAD, GroundingArtifact
from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray, pose_from_xyz_rpy, xyz_rpy_from_pose
from r2s2r_calibration.registration.elements import BoxPrimitive, SceneElement


def scene_elements(nominal: WorldParams, names: Sequence[str]) -> list[SceneElement]:
    """Scene elements (boxes of the description's collision geometry) with nominal poses.

    Poses are in ``base_link`` of the nominal world (the frame registration works in).

    Raises:
        ValueError: An element name the description does not have.

    """
    description = build_description(nominal.layout())
    T_world_base = nominal.robot.base_pose.to_pose().matrix()
    T_base_world = invert_transform(T_world_base)
    poses = {"belt": nominal.belt.pose.to_pose().matrix()}
    poses.update({name: b.pose.to_pose().matrix() for name, b in nominal.bins.items()})
    elements = []
    for name in names:
        if name not in poses:
            raise ValueError(f"scene element {name!r}: expected one of {sorted(poses)}")
        link = description.link(f"{name}_link")
        boxes = [
            BoxPrimitive(
                size_m=tuple(float(v) for v in shape.size_m),  # type: ignore[arg-type]
                xyz_m=shape.origin.xyz_m,
                rpy_rad=shape.origin.rpy_rad,
            )
            for shape in link.shapes
            if shape.kind == ShapeKind.BOX and shape.collision
        ]
        xyz, rpy = _xyz_rpy(T_base_world @ poses[name])
        elements.append(SceneElement(name=name, boxes=boxes, xyz_m=xyz, rpy_rad=rpy))
    return elements


def _xyz_rpy(
    pose: FloatArray,
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    xyz, rpy = xyz_rpy_from_pose(pose)
    return (
        (float(xyz[0]), float(xyz[1]), float(xyz[2])),
        (float(rpy[0]), float(rpy[1]), float(rpy[2])),
    )


T_LINK_OPTICAL: FloatArray = pose_from_xyz_rpy((0.0, 0.0, 0.0), OPTICAL_FROM_LINK_RPY_RAD)
"""``T_<camera>_link_<camera>_optical_frame`` (REP 103 body frame to the optical frame)."""


def camera_intrinsics(
    client: CellClient, artifact: GroundingArtifact, key: str
) -> tuple[CameraModel, str | None]:
    """Return the camera's intrinsics from the run's artifact, else its ``camera_info`` + a note.

    Args:
        client: The cell.
        artifact: The run's artifact so far.
        key: ``"head"`` or ``"hand"`` (the camera is ``<key>_camera``).

    """
    record = artifact.cameras.get(key)
    if record is not None and record.intrinsics is not None:
        intr = record.intrinsics
        K = np.array([[intr.fx_px, 0, intr.cx_px], [0, intr.fy_px, intr.cy_px], [0, 0, 1.0]])
        d = intr.distortion
        distortion = np.array([d.k1, d.k2, d.p1, d.p2, d.k3])
        camera = CameraModel(
            width_px=intr.width_px,
            height_px=intr.height_px,
            camera_matrix=K,
            distortion=distortion,
        )
        return camera, None
    return client.camera_model(f"{key}_camera"), f"{key} intrinsics from camera_info (uncalibrated)"


def head_camera(
    client: CellClient, artifact: GroundingArtifact
) -> tuple[CameraModel, FloatArray, list[str]]:
    """Head camera K/D and ``T_base_optical``: calibrated when available, else published.

    Returns:
        The camera model, ``T_base_optical`` and notes on what was not calibrated.

    """
    camera, note = camera_intrinsics(client, artifact, "head")
    notes = [note] if note else []
    record = artifact.cameras.get("head")
    T_world_base = client.frame_pose(BASE_LINK)
    if record is not None and record.pose is not None:
        T_world_optical = record.pose.pose.matrix() @ T_LINK_OPTICAL
    else:
        T_world_optical = client.frame_pose(HEAD.optical_frame)
        notes.append("head camera pose from /tf_static (uncalibrated)")
    return camera, invert_transform(T_world_base) @ T_world_optical, notes


def arm_positions(q: FloatArray) -> FloatArray:
    """Return the arm's joints of an (18,) joint vector (rad)."""
    return np.asarray(q, dtype=float)[: len(ARM_JOINT_NAMES)]


def move_arm(client: CellClient, target: FloatArray, cfg: BoardStepsConfig, lead_s: float) -> None:
    """Move the arm to ``target`` (rad) and let it settle.

    The move takes its largest joint change at ``move_speed_rad_s``, within ``min_move_s`` ..
    ``move_s``.
    """
    start = client.now_s() + lead_s
    current = arm_positions(client.joint_positions())
    largest = float(np.max(np.abs(np.asarray(target, dtype=float) - current)))
    duration = float(np.clip(largest / cfg.move_speed_rad_s, cfg.min_move_s, cfg.move_s))
    client.send_trajectory(
        "arm",
        ARM_JOINT_NAMES,
        np.array([0.0, duration]),
        np.vstack([current, target]),
        start,
    )
    client.wait_until(start + duration + cfg.settle_s)
    # The commanded time is not proof: a command delivered late (a loaded machine, a slow
    # network) starts late. Images are taken only once the measured arm has come to rest.
    deadline = start + duration + cfg.settle_s + cfg.settle_timeout_s
    previous = arm_positions(client.joint_positions())
    while True:
        client.wait_until(client.now_s() + cfg.rest_check_s)
        measured = arm_positions(client.joint_positions())
        still = float(np.max(np.abs(measured - previous))) < cfg.rest_tolerance_rad
        arrived = float(np.max(np.abs(measured - target))) < cfg.reach_tolerance_rad
        if still and arrived:
            return
        if client.now_s() > deadline:
            raise CalibrationError(
                f"the arm did not come to rest at the commanded pose within "
                f"{cfg.settle_timeout_s} s after the move (off by "
                f"{float(np.max(np.abs(measured - target))):.4f} rad, moving "
                f"{float(np.max(np.abs(measured - previous))):.5f} rad per "
                f"{cfg.rest_check_s} s); check that the arm controller is active"
            )
        previous = measured
