"""The digital copy of a real cell, free of ROS: joint states, TF and object tracks into MuJoCo.

:class:`CellMirror` holds a MuJoCo model of a world (nominal or grounded) and sets its state
*kinematically* from what the real cell publishes — no physics is stepped:

- joint states: positions by name into ``qpos`` (names checked, lengths checked, non-robot
  names ignored and reported), then ``mj_forward``;
- fixed TF transforms (``/tf_static``, e.g. ``world -> base_link``): the body of the child frame
  is moved relative to its parent when the parent matches the model's tree (frames driven by
  joints, or unknown to the model, are reported as not mirrored);
- object tracks (``/objects/tracks``, poses in a frame such as ``base_link``): each track gets a
  body of its object type from a fixed pool of slots (the model is compiled once) and is placed
  at the track's pose; slots of vanished tracks are parked out of view.

It also measures how well the copy follows: :meth:`CellMirror.palm_error_m` compares the
simulator's palm with the description's forward kinematics of the same joint state, and
:meth:`CellMirror.joint_state_age_s` says how old the last joint state is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import mujoco
import numpy as np
from numpy.typing import NDArray
from r2s2r_description.cell import build_description
from r2s2r_description.frames import BASE_LINK, PALM_LINK
from r2s2r_description.model import forward_kinematics
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.tf_tree import JointStateError, check_joint_state
from r2s2r_description.transforms import make_transform, matrix_to_quat, quat_to_matrix
from r2s2r_world.world import WorldParams

from r2s2r_sim.backend import BackendError, FloatArray, ObjectInstance
from r2s2r_sim.backend_config import SimBackendConfig, make_mujoco_backend


class MirrorError(ValueError):
    """Input the mirror cannot apply: malformed joint state, unknown frame, bad pose."""


class TransformResult(StrEnum):
    """What :meth:`CellMirror.apply_fixed_transform` did with one transform."""

    APPLIED = "applied"  # a fixed body of the model, moved to the transform
    JOINT_DRIVEN = "joint_driven"  # a link moved by a joint: joint states drive it instead
    UNKNOWN_FRAME = "unknown_frame"  # not a body of the model (object frames, other trees)
    OTHER_PARENT = "other_parent"  # the model's parent of this frame is another frame


@dataclass(frozen=True)
class JointStateUpdate:
    """What one joint state did to the mirror.

    Attributes:
        applied: Robot joints set from the message.
        ignored: Names in the message that are not robot joints (e.g. a belt roller).
        missing: Robot joints the message did not name (they keep their previous value).

    """

    applied: tuple[str, ...]
    ignored: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True)
class TrackInput:
    """One tracked object as the real cell reports it.

    Attributes:
        track_id: Tracker's id, stable while tracked.
        object_type: Type name (a key of the world's object types).
        position_m: (3,) centre in the tracks' frame.
        quat_wxyz: (4,) orientation in the tracks' frame.

    """

    track_id: int
    object_type: str
    position_m: Sequence[float]
    quat_wxyz: Sequence[float]


@dataclass(frozen=True)
class TrackUpdate:
    """What one track message did to the mirror.

    Attributes:
        shown: Tracks placed in the simulator.
        unknown_types: Track types the world does not know (not shown).
        overflow: Tracks of a known type beyond the slots of that type (not shown).

    """

    shown: int
    unknown_types: tuple[str, ...]
    overflow: int


@dataclass(frozen=True)
class MirroredObject:
    """An object currently shown in the mirror.

    Attributes:
        track_id: The real cell's track id.
        object_type: Its type.
        position_m: (3,) centre in ``world``.
        quat_wxyz: (4,) orientation in ``world``.

    """

    track_id: int
    object_type: str
    position_m: FloatArray
    quat_wxyz: FloatArray


def slot_name(object_type: str, index: int) -> str:
    """Body name of the ``index``-th mirror slot of ``object_type``."""
    return f"mirror_{object_type}_{index}"


class CellMirror:
    """A kinematic MuJoCo copy of the cell that follows the real one (see the module docstring).

    Args:
        world: World of the copy (nominal or grounded; never the twin's hidden file).
        slots_per_type: Objects of each type that can be shown at once.
        enable_rendering: Create camera renderers (``MUJOCO_GL=egl``) for :meth:`render`.

    Raises:
        ValueError: If ``slots_per_type`` is not positive.

    """

    def __init__(self, world: WorldParams, slots_per_type: int = 3, enable_rendering: bool = False):
        if slots_per_type < 1:
            raise ValueError(f"slots_per_type = {slots_per_type}: expected ≥ 1")
        self.world = world
        self.description = build_description(world.layout())
        self._slots = {
            type_name: [slot_name(type_name, i) for i in range(slots_per_type)]
            for type_name in world.objects
        }
        instances = [
            ObjectInstance(name, type_name)
            for type_name, names in self._slots.items()
            for name in names
        ]
        self.backend = make_mujoco_backend(SimBackendConfig(enable_rendering=enable_rendering))
        self.backend.reset(world, 0, instances)
        model = self.backend.model
        self._qpos_adr = {
            name: int(model.jnt_qposadr[model.joint(name).id]) for name in ALL_JOINT_NAMES
        }
        self.joint_positions: dict[str, float] = dict(
            zip(ALL_JOINT_NAMES, (float(v) for v in self.backend.joint_positions()), strict=True)
        )
        self.last_joint_state_s: float | None = None
        self.joint_states_applied = 0
        self._assigned: dict[int, tuple[str, str]] = {}  # track id -> (type, slot body)
        self._shown: dict[int, MirroredObject] = {}

    # -- joint states ---------------------------------------------------------------------------
    def apply_joint_state(
        self, names: Sequence[str], positions: Sequence[float], received_s: float
    ) -> JointStateUpdate:
        """Set the robot's joints from a joint state (kinematically) and recompute the scene.

        Args:
            names: Joint names.
            positions: Positions in radians, one per name.
            received_s: When it arrived (any monotonic clock also used for the age query).

        Raises:
            MirrorError: Lengths differ, a name repeats or a position is not finite; nothing
                is applied.

        """
        try:
            by_name = check_joint_state(names, positions)
        except JointStateError as error:
            raise MirrorError(str(error)) from None
        data = self.backend.data
        applied = []
        for name, value in by_name.items():
            if name in self._qpos_adr:
                data.qpos[self._qpos_adr[name]] = value
                self.joint_positions[name] = value
                applied.append(name)
        mujoco.mj_forward(self.backend.model, data)
        self.last_joint_state_s = received_s
        self.joint_states_applied += 1
        return JointStateUpdate(
            applied=tuple(applied),
            ignored=tuple(name for name in by_name if name not in self._qpos_adr),
            missing=tuple(name for name in ALL_JOINT_NAMES if name not in by_name),
        )

    def joint_state_age_s(self, now_s: float) -> float | None:
        """Seconds since the last joint state was applied, or None if none has been."""
        return None if self.last_joint_state_s is None else now_s - self.last_joint_state_s

    def is_stale(self, now_s: float, timeout_s: float) -> bool:
        """Tell whether no joint state arrived within ``timeout_s`` (or none ever did)."""
        age_s = self.joint_state_age_s(now_s)
        return age_s is None or age_s > timeout_s

    # -- TF -------------------------------------------------------------------------------------
    def apply_fixed_transform(
        self, parent: str, child: str, transform: FloatArray
    ) -> TransformResult:
        """Move the fixed body ``child`` to ``transform`` (``parent <- child``).

        Args:
            parent: Parent frame of the transform.
            child: Child frame.
            transform: 4x4 homogeneous transform.

        Returns:
            :attr:`TransformResult.APPLIED`, or why the transform was not applied.

        Raises:
            MirrorError: If the transform is not a finite rigid transform.

        """
        matrix = np.asarray(transform, dtype=float)
        rotation = matrix[:3, :3] if matrix.shape == (4, 4) else np.zeros((3, 3))
        if (
            matrix.shape != (4, 4)
            or not np.all(np.isfinite(matrix))
            or not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-6)
        ):
            raise MirrorError(f"transform {parent} -> {child}: expected a finite rigid 4x4")
        model = self.backend.model
        body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, child)
        if body_id <= 0:
            return TransformResult.UNKNOWN_FRAME
        if model.body_jntnum[body_id] > 0:
            return TransformResult.JOINT_DRIVEN
        if model.body(int(model.body_parentid[body_id])).name != parent:
            return TransformResult.OTHER_PARENT
        model.body_pos[body_id] = matrix[:3, 3]
        model.body_quat[body_id] = matrix_to_quat(rotation)
        mujoco.mj_forward(model, self.backend.data)
        return TransformResult.APPLIED

    def frame_pose(self, frame: str) -> FloatArray:
        """4x4 pose of a frame (a body of the model) in ``world``.

        Raises:
            MirrorError: If the model has no such frame.

        """
        try:
            return self.backend.body_pose(frame)
        except BackendError:
            raise MirrorError(f"frame {frame!r}: not a frame of the mirrored cell") from None

    # -- objects --------------------------------------------------------------------------------
    def apply_tracks(self, frame_id: str, tracks: Sequence[TrackInput]) -> TrackUpdate:
        """Show exactly the given tracks (poses in ``frame_id``); park every other slot.

        Raises:
            MirrorError: Unknown frame, or a track with a non-finite position or zero
                quaternion; nothing is changed.

        """
        world_from_frame = self.frame_pose(frame_id)
        poses: dict[int, FloatArray] = {}
        for track in tracks:
            position = np.asarray(track.position_m, dtype=float)
            quat = np.asarray(track.quat_wxyz, dtype=float)
            if position.shape != (3,) or quat.shape != (4,) or not np.all(np.isfinite(position)):
                raise MirrorError(f"track {track.track_id}: expected a finite 3-D position")
            if not np.linalg.norm(quat) > 1e-9:
                raise MirrorError(f"track {track.track_id}: zero quaternion")
            local = make_transform(position.tolist(), quat_to_matrix(quat.tolist()))
            poses[track.track_id] = np.asarray(world_from_frame @ local, dtype=float)
        wanted = {t.track_id: t.object_type for t in tracks}
        for track_id, (type_name, body) in list(self._assigned.items()):
            if wanted.get(track_id) != type_name:
                self.backend.park_object(body)
                del self._assigned[track_id]
                self._shown.pop(track_id, None)
        unknown: list[str] = []
        overflow = 0
        for track in tracks:
            if track.object_type not in self._slots:
                unknown.append(track.object_type)
                continue
            if track.track_id not in self._assigned:
                used = {body for _, body in self._assigned.values()}
                free = [b for b in self._slots[track.object_type] if b not in used]
                if not free:
                    overflow += 1
                    continue
                self._assigned[track.track_id] = (track.object_type, free[0])
            body = self._assigned[track.track_id][1]
            pose = poses[track.track_id]
            quat_world = matrix_to_quat(pose[:3, :3])
            self.backend.spawn_object(body, pose[:3, 3], quat_world)
            self._shown[track.track_id] = MirroredObject(
                track.track_id, track.object_type, pose[:3, 3].copy(), quat_world
            )
        mujoco.mj_forward(self.backend.model, self.backend.data)
        return TrackUpdate(len(self._shown), tuple(sorted(set(unknown))), overflow)

    def objects(self) -> list[MirroredObject]:
        """Objects shown now, by track id."""
        return [self._shown[k] for k in sorted(self._shown)]

    # -- checks and views ----------------------------------------------------------------------
    def palm_error_m(self) -> float:
        """Distance between the simulator's palm and the FK of the mirrored joint state.

        The reference is the description's forward kinematics of :attr:`joint_positions`
        (what rviz shows for the same joint state), placed at the simulator's ``base_link``
        (which follows ``/tf_static``). A non-zero value means the copy does not follow: a
        joint mapped wrongly, a kinematic mismatch between description and MuJoCo model.
        """
        fk = forward_kinematics(self.description, self.joint_positions)
        base_from_palm = np.linalg.inv(fk[BASE_LINK]) @ fk[PALM_LINK]
        expected = self.backend.body_pose(BASE_LINK) @ base_from_palm
        return float(np.linalg.norm(expected[:3, 3] - self.backend.body_pose(PALM_LINK)[:3, 3]))

    def render(self, camera_name: str) -> NDArray[np.uint8]:
        """RGB render of the mirrored state (``head_camera`` or ``hand_camera``)."""
        return self.backend.render(camera_name)

    def render_depth(self, camera_name: str) -> NDArray[np.float32]:
        """Metric depth render of the mirrored state (m along the optical axis)."""
        return self.backend.render_depth(camera_name)

    def close(self) -> None:
        """Free the renderers."""
        self.backend.close()
