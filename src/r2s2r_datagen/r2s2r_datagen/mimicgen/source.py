"""Source demonstrations: loading, annotation, object motion, and nearest-neighbour choice.

A :class:`SourceDemo` is one annotated demonstration with what MimicGen needs: the palm poses
(FK of the recorded *commands*), the hand commands, the subtask boundaries and the tracked
object's motion on the belt (a constant-velocity fit of the track before the grasp, so
tracker noise averages out). :class:`SourceLibrary` holds the usable ones, counts why the
others were skipped, and picks a source for a new trial by nearest neighbour on (object
across-belt offset, yaw up to the object's symmetry, belt speed), MimicGen-style among the k
nearest.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
from numpy.typing import NDArray
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_world.world import WorldParams

from r2s2r_datagen.mimicgen.annotation import (
    AnnotationError,
    DemoSignals,
    SubtaskAnnotation,
    SubtaskOverride,
    annotate,
    apply_override,
    load_sidecar,
)
from r2s2r_datagen.mimicgen.config import AnnotationConfig, GenerationParams
from r2s2r_datagen.mimicgen.geometry import (
    equivalent_yaw,
    fit_linear_motion,
    pose7_to_matrix,
    symmetry_period_rad,
    yaw_of_matrix,
)
from r2s2r_datagen.mimicgen.kinematics import BaseLinkArm
from r2s2r_dataset import (
    ACTIONS_KEY,
    DATA_GROUP,
    METADATA_ATTR,
    OBJECT_POSE_KEY,
    OBJECT_POSE_VALID_KEY,
    OBS_GROUP,
    TIMESTAMPS_KEY,
    Episode,
    EpisodeDataset,
    EpisodeMetadata,
    episode_keys,
)

FloatArray = NDArray[np.float64]


class SourceLibraryError(ValueError):
    """No usable source demonstration (empty dataset, or every demo skipped)."""


def belt_direction_in_base(world: WorldParams) -> FloatArray:
    """Return the unit belt travel direction (belt_link x) in base_link, on the xy plane."""
    base = world.robot.base_pose.to_pose().matrix()
    belt = world.belt.pose.to_pose().matrix()
    direction = (np.linalg.inv(base) @ belt)[:3, 0].copy()
    direction[2] = 0.0
    return direction / np.linalg.norm(direction)  # type: ignore[no-any-return]


def across(direction: FloatArray) -> FloatArray:
    """Return the horizontal unit vector 90° counter-clockwise of ``direction``."""
    return np.array([-direction[1], direction[0], 0.0])


@dataclass(frozen=True)
class ObjectMotion:
    """An object's constant-velocity motion on the belt (base_link).

    Attributes:
        reference_s: Time at which ``position_m`` holds.
        position_m: (3,) position at ``reference_s``.
        velocity_mps: (3,) velocity (z set to 0).
        yaw_rad: Yaw while on the belt.

    """

    reference_s: float
    position_m: FloatArray
    velocity_mps: FloatArray
    yaw_rad: float

    def position_at(self, time_s: float) -> FloatArray:
        """Position at ``time_s``."""
        return self.position_m + self.velocity_mps * (time_s - self.reference_s)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SourceDemo:
    """One annotated source demonstration.

    Attributes:
        index: Episode index in the source dataset.
        metadata: The episode's metadata.
        times_s: ``(T,)`` frame times.
        arm_commands: ``(T, 6)`` commanded arm joints.
        hand_commands: ``(T, 12)`` commanded hand joints.
        palm_poses: ``(T, 4, 4)`` palm poses in base_link (FK of ``arm_commands``).
        annotation: Subtask boundaries (before random offsets).
        motion: The object's motion on the belt, fitted from its track.
        belt_direction: (3,) unit belt direction in base_link.
        object_valid: ``(T,)`` where the object track was valid (None: not kept).

    """

    index: int
    metadata: EpisodeMetadata
    times_s: FloatArray
    arm_commands: FloatArray
    hand_commands: FloatArray
    palm_poses: FloatArray
    annotation: SubtaskAnnotation
    motion: ObjectMotion
    belt_direction: FloatArray
    object_valid: NDArray[np.bool_] | None = None

    @property
    def object_type(self) -> str:
        """The demonstrated object's type."""
        return self.metadata.object_type

    @property
    def belt_speed_mps(self) -> float:
        """Speed of the tracked object along the belt (fitted)."""
        return float(self.motion.velocity_mps @ self.belt_direction)

    @property
    def lateral_m(self) -> float:
        """The object's across-belt offset (base_link, relative to the base origin)."""
        return float(self.motion.position_m @ across(self.belt_direction))

    def along_m(self, time_s: float) -> float:
        """Return the object's position along the belt at ``time_s``."""
        return float(self.motion.position_at(time_s) @ self.belt_direction)


def signals_of(
    times_s: FloatArray,
    actions: FloatArray,
    metadata: EpisodeMetadata,
    object_pose: FloatArray | None,
    object_valid: NDArray[np.bool_] | None,
    palm_positions_m: FloatArray | None = None,
) -> DemoSignals:
    """Bundle an episode's arrays for :func:`annotate`.

    ``palm_positions_m`` (``(T, 3)``, base_link, FK of the arm commands) stands in for the
    object once its track has ended (the real tracker loses it when the hand takes it).
    """
    return DemoSignals(
        times_s=np.asarray(times_s, dtype=float),
        actions=np.asarray(actions, dtype=float),
        action_names=tuple(metadata.action_names),
        object_pose=None if object_pose is None else np.asarray(object_pose, dtype=float),
        object_valid=None if object_valid is None else np.asarray(object_valid, dtype=bool),
        object_type=metadata.object_type,
        palm_positions_m=(
            None if palm_positions_m is None else np.asarray(palm_positions_m, dtype=float)
        ),
    )


def fit_object_motion(
    signals: DemoSignals,
    annotation: SubtaskAnnotation,
    fallback_speed_mps: float,
    belt_direction: FloatArray,
) -> ObjectMotion:
    """Constant-velocity fit of the object track before the grasp (on the belt, untouched).

    Uses the valid track frames up to two frames before the hand counts as closed (the track
    is never read after the grasp: the real tracker loses the object to the hand); with fewer
    than three of them, the first valid pose and ``fallback_speed_mps`` along the belt.
    """
    assert signals.object_pose is not None and signals.object_valid is not None
    last = max(annotation.grasp_closed - 2, 1)
    frames = np.flatnonzero(signals.object_valid[:last])
    reference_s = float(signals.times_s[annotation.reach_start])
    yaws = [yaw_of_matrix(pose7_to_matrix(signals.object_pose[k])) for k in frames]
    yaw = math.atan2(float(np.mean(np.sin(yaws))), float(np.mean(np.cos(yaws)))) if yaws else 0.0
    if frames.size >= 3:
        position, velocity = fit_linear_motion(
            signals.times_s[frames], signals.object_pose[frames, :3], reference_s
        )
        velocity = np.asarray(velocity, dtype=float)
    else:
        valid = np.flatnonzero(signals.object_valid)
        k = int(valid[0])
        velocity = np.asarray(belt_direction, dtype=float) * fallback_speed_mps
        position = signals.object_pose[k, :3] + velocity * (reference_s - float(signals.times_s[k]))
    velocity[2] = 0.0
    return ObjectMotion(reference_s, np.asarray(position, dtype=float), velocity, yaw)


def build_source_demo(
    index: int,
    metadata: EpisodeMetadata,
    times_s: FloatArray,
    actions: FloatArray,
    object_pose: FloatArray | None,
    object_valid: NDArray[np.bool_] | None,
    nominal_world: WorldParams,
    annotation_config: AnnotationConfig,
    arm: BaseLinkArm,
    override: SubtaskOverride | None = None,
) -> SourceDemo:
    """Annotate one episode and prepare it as a source.

    Args:
        index: Episode index in its dataset.
        metadata: Its metadata.
        times_s: ``(T,)`` frame times.
        actions: ``(T, J)`` commanded joints, ``metadata.action_names`` order.
        object_pose: ``(T, 7)`` tracked object pose (base_link) or None.
        object_valid: ``(T,)`` track validity or None.
        nominal_world: NOMINAL world (bins, belt direction for the fallback).
        annotation_config: Annotation thresholds.
        arm: FK of the palm in base_link.
        override: A :class:`~r2s2r_datagen.mimicgen.annotation.SubtaskOverride` or None.

    Raises:
        AnnotationError: If the episode is not usable (the reason says why).

    """
    if metadata.outcome == "failure":
        raise AnnotationError("failed_demo", "the episode's outcome is failure")
    names = list(metadata.action_names)
    missing = [j for j in (*ARM_JOINT_NAMES, *HAND_JOINT_NAMES) if j not in names]
    if missing:
        raise ValueError(f"joints {missing} not in the episode's action_names {names}")
    commands = np.asarray(actions, dtype=float)
    arm_commands = commands[:, [names.index(j) for j in ARM_JOINT_NAMES]]
    hand_commands = commands[:, [names.index(j) for j in HAND_JOINT_NAMES]]
    palm_poses = arm.forward_many(arm_commands)
    signals = signals_of(
        times_s, commands, metadata, object_pose, object_valid, palm_poses[:, :3, 3]
    )
    automatic: SubtaskAnnotation | None
    try:
        automatic = annotate(signals, nominal_world, annotation_config)
        error: AnnotationError | None = None
    except AnnotationError as failure:
        automatic, error = None, failure
    if override is not None:
        annotation = apply_override(automatic, override, signals.times_s.shape[0])
    elif automatic is None:
        assert error is not None
        raise error
    else:
        annotation = automatic
    if (
        signals.object_pose is None
        or signals.object_valid is None
        or not signals.object_valid.any()
    ):
        raise AnnotationError("no_object_track", "the episode has no valid object pose")
    direction = belt_direction_in_base(nominal_world)
    motion = fit_object_motion(signals, annotation, metadata.belt_speed_mps, direction)
    speed = float(np.linalg.norm(motion.velocity_mps))
    if speed > 1e-3:
        direction = motion.velocity_mps / speed
    return SourceDemo(
        index=index,
        metadata=metadata,
        times_s=signals.times_s,
        arm_commands=arm_commands,
        hand_commands=hand_commands,
        palm_poses=palm_poses,
        annotation=annotation,
        motion=motion,
        belt_direction=direction,
        object_valid=signals.object_valid,
    )


@dataclass(frozen=True)
class _EpisodeArrays:
    index: int
    metadata: EpisodeMetadata
    times_s: FloatArray
    actions: FloatArray
    object_pose: FloatArray | None
    object_valid: NDArray[np.bool_] | None


def _read_arrays(path: str | Path) -> Iterator[_EpisodeArrays]:
    """Episodes' non-image arrays, in :class:`EpisodeDataset` index order.

    Reads the documented robomimic-style layout (:mod:`r2s2r_dataset.hdf5`) with h5py
    directly, so the camera images (most of the bytes) are never decompressed.
    """
    root = Path(path)
    files = (
        [root]
        if root.is_file()
        else sorted(p for p in root.iterdir() if p.suffix in (".hdf5", ".h5") and p.is_file())
    )
    index = 0
    for file_path in files:
        with h5py.File(file_path, "r") as handle:
            data = handle[DATA_GROUP]
            for key in episode_keys(data):
                group = data[key]
                obs = group[OBS_GROUP]
                yield _EpisodeArrays(
                    index=index,
                    metadata=EpisodeMetadata.model_validate_json(group.attrs[METADATA_ATTR]),
                    times_s=np.asarray(group[TIMESTAMPS_KEY], dtype=float),
                    actions=np.asarray(group[ACTIONS_KEY], dtype=float),
                    object_pose=(
                        np.asarray(obs[OBJECT_POSE_KEY], dtype=float)
                        if OBJECT_POSE_KEY in obs
                        else None
                    ),
                    object_valid=(
                        np.asarray(obs[OBJECT_POSE_VALID_KEY], dtype=bool)
                        if OBJECT_POSE_VALID_KEY in obs
                        else None
                    ),
                )
                index += 1


@dataclass
class SourceLibrary:
    """The usable source demonstrations and why the others were skipped.

    Attributes:
        demos: Usable, annotated demonstrations.
        skipped: Count per skip reason.
        skipped_detail: Episode index → ``"reason: detail"``.
        dataset_path: Where the demos came from ('' when built in memory).

    """

    demos: list[SourceDemo]
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_detail: dict[int, str] = field(default_factory=dict)
    dataset_path: str = ""

    @classmethod
    def from_episodes(
        cls,
        episodes: Sequence[Episode],
        nominal_world: WorldParams,
        annotation_config: AnnotationConfig,
        overrides: dict[int, SubtaskOverride] | None = None,
    ) -> SourceLibrary:
        """Build from in-memory episodes (index = position in ``episodes``)."""
        arm = BaseLinkArm(nominal_world)
        library = cls(demos=[])
        for index, episode in enumerate(episodes):
            library._add(
                _EpisodeArrays(
                    index,
                    episode.metadata,
                    np.asarray(episode.timestamps_s, dtype=float),
                    np.asarray(episode.actions, dtype=float),
                    None if episode.object_pose is None else np.asarray(episode.object_pose),
                    None
                    if episode.object_pose_valid is None
                    else np.asarray(episode.object_pose_valid, dtype=bool),
                ),
                nominal_world,
                annotation_config,
                arm,
                (overrides or {}).get(index),
            )
        return library

    @classmethod
    def from_dataset(
        cls, path: str | Path, nominal_world: WorldParams, annotation_config: AnnotationConfig
    ) -> SourceLibrary:
        """Load, annotate (with the sidecar's manual overrides) and fit every episode.

        Raises:
            r2s2r_dataset.DatasetError: The path holds no readable dataset.

        """
        count = len(EpisodeDataset(path))  # validates the path and gives the index range
        sidecar = load_sidecar(path)
        arm = BaseLinkArm(nominal_world)
        library = cls(demos=[], dataset_path=str(path))
        for arrays in _read_arrays(path):
            library._add(
                arrays, nominal_world, annotation_config, arm, sidecar.episodes.get(arrays.index)
            )
        assert len(library.demos) + sum(library.skipped.values()) == count
        return library

    def _add(
        self,
        arrays: _EpisodeArrays,
        nominal_world: WorldParams,
        annotation_config: AnnotationConfig,
        arm: BaseLinkArm,
        override: SubtaskOverride | None,
    ) -> None:
        try:
            demo = build_source_demo(
                arrays.index,
                arrays.metadata,
                arrays.times_s,
                arrays.actions,
                arrays.object_pose,
                arrays.object_valid,
                nominal_world,
                annotation_config,
                arm,
                override,
            )
        except AnnotationError as error:
            self.skipped[error.reason] += 1
            self.skipped_detail[arrays.index] = str(error)
            return
        except (ValueError, KeyError) as error:  # bad columns, unknown object type
            self.skipped["bad_episode"] += 1
            self.skipped_detail[arrays.index] = f"bad_episode: {error}"
            return
        self.demos.append(demo)

    def rank(
        self,
        object_type: str,
        lateral_m: float,
        yaw_rad: float,
        speed_mps: float,
        world: WorldParams,
        params: GenerationParams,
        exclude: Sequence[int] = (),
    ) -> list[tuple[float, SourceDemo]]:
        """Return the sources sorted by distance to a new trial (nearest first).

        Distance: ``‖(Δlateral / lateral_scale, Δyaw / yaw_scale, Δspeed / speed_scale)‖``,
        ``Δyaw`` taken up to the new object's symmetry. Only sources of the new object's type
        are ranked when there are any (a grasp is shaped for its object); otherwise all (or
        none, with ``same_object_type_only``). Sources in ``exclude`` are left out.
        """
        spec = world.objects[object_type]
        period = symmetry_period_rad(spec.shape, spec.size_m)
        candidates = [d for d in self.demos if d.index not in exclude]
        same_type = [d for d in candidates if d.object_type == object_type]
        if same_type or params.same_object_type_only:
            candidates = same_type
        ranked = []
        for demo in candidates:
            yaw_diff = equivalent_yaw(yaw_rad, demo.motion.yaw_rad, period) - demo.motion.yaw_rad
            distance = math.sqrt(
                ((lateral_m - demo.lateral_m) / params.lateral_scale_m) ** 2
                + (yaw_diff / params.yaw_scale_rad) ** 2
                + ((speed_mps - demo.belt_speed_mps) / params.speed_scale_mps) ** 2
            )
            ranked.append((distance, demo))
        ranked.sort(key=lambda item: (item[0], item[1].index))
        return ranked

    def choose(
        self,
        rng: np.random.Generator,
        object_type: str,
        lateral_m: float,
        yaw_rad: float,
        speed_mps: float,
        world: WorldParams,
        params: GenerationParams,
        exclude: Sequence[int] = (),
    ) -> tuple[SourceDemo, float]:
        """One source uniformly among the ``nn_k`` nearest (see :meth:`rank`).

        Raises:
            SourceLibraryError: If no source is eligible.

        """
        ranked = self.rank(object_type, lateral_m, yaw_rad, speed_mps, world, params, exclude)
        if not ranked:
            raise SourceLibraryError(
                f"no eligible source demonstration for a {object_type!r} "
                f"({len(self.demos)} usable, {len(exclude)} excluded, "
                f"same_object_type_only = {params.same_object_type_only})"
            )
        distance, demo = ranked[int(rng.integers(min(params.nn_k, len(ranked))))]
        return demo, distance
