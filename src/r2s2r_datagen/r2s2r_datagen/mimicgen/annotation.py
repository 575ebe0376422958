"""Object-centric subtask annotation of demonstrations, with a manual-override sidecar.

Two subtasks per pick (MimicGen's object-centric segmentation):

1. *reach and grasp* the object, in the object's (moving) frame: from the reach onset to the
   moment the grasped object is lifted;
2. *transport and release* over its bin, in the target bin's frame: from there to the end.

Boundaries come from signals computed from the episode alone, as on the real cell (object
poses are the recorded object *tracks*, never simulator state):

- hand closure: mean commanded flexion of the closure joints (the ``actions`` columns); the
  grasp is a rise of at least ``min_closure_range_rad``, "closed" at ``closed_fraction`` of it;
- object lifted: tracked object z above its resting height on the belt (median before the
  grasp) by ``lift_margin_m``, within ``lift_window_s`` of closure;
- object over bin: tracked object xy inside the footprint of its target bin, from the NOMINAL
  world's bin poses (what the cell's drawings say), when the hand opens again.

The real cell's object tracker only follows objects resting on the belt: its track ends when
the hand takes the object (``obs/object_pose_valid`` false from about the grasp on). The track
is used only while it is valid; on the frames after its last valid frame the *palm* stands in
for the held object, its pose from forward kinematics of the commanded arm joints
(:attr:`DemoSignals.palm_positions_m`):

- lifted: palm z above its height when the hand closed by ``lift_margin_m``;
- over bin: palm xy inside the target bin's footprint when the hand opens.

An episode whose track stays valid throughout is annotated from the track alone.

A demonstration without these (no grasp, no lift, released elsewhere, no track) raises
:class:`AnnotationError` with a machine-readable reason, which the source library counts.

Manual override: a YAML sidecar beside the dataset (``<dataset>.subtasks.yaml``, see
:func:`sidecar_path`) keyed by episode index may set any boundary or skip an episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from r2s2r_common.config import ConfigModel, dump_yaml, load_config
from r2s2r_description.cell import BIN_INNER_SIZE_M
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_world.world import WorldParams

from r2s2r_datagen.mimicgen.config import AnnotationConfig
from r2s2r_datagen.mimicgen.kinematics import BaseLinkArm

ANNOTATION_SKIP_REASONS: tuple[str, ...] = (
    "no_object_track",
    "no_detectable_grasp",
    "no_release",
    "released_outside_bin",
    "manual_skip",
    "bad_manual_annotation",
    "failed_demo",
)
"""Reasons a demonstration is not used as a source (counted by the source library)."""


class AnnotationError(ValueError):
    """A demonstration cannot be segmented.

    Args:
        reason: One of :data:`ANNOTATION_SKIP_REASONS`.
        detail: Human-readable explanation.

    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class DemoSignals:
    """What annotation reads from one episode (frame ``base_link``).

    Attributes:
        times_s: ``(T,)`` frame times.
        actions: ``(T, J)`` commanded joint targets.
        action_names: Column names of ``actions``.
        object_pose: ``(T, 7)`` tracked object pose (xyz, quaternion xyzw) or None.
        object_valid: ``(T,)`` where the track is valid, or None.
        object_type: Object type name (selects the target bin).
        palm_positions_m: ``(T, 3)`` palm positions (FK of the commanded arm joints), read on
            the frames after the object track has ended; None: computed by :func:`annotate`
            from the NOMINAL world's kinematics when needed.

    """

    times_s: NDArray[np.float64]
    actions: NDArray[np.float64]
    action_names: tuple[str, ...]
    object_pose: NDArray[np.float64] | None
    object_valid: NDArray[np.bool_] | None
    object_type: str
    palm_positions_m: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class SubtaskAnnotation:
    """Frame indices of one demonstration's subtasks.

    Attributes:
        reach_start: First frame of subtask 1 (the arm starts to move).
        grasp_closed: Frame at which the hand counts as closed.
        grasp_end: First frame of subtask 2 (the grasped object is lifted): the boundary.
        release: Frame at which the hand counts as open again, over the bin.
        end: One past the last frame (the episode length).
        source: ``auto`` or ``manual`` (any field from the sidecar).

    """

    reach_start: int
    grasp_closed: int
    grasp_end: int
    release: int
    end: int
    source: Literal["auto", "manual"] = "auto"

    @property
    def boundaries(self) -> list[tuple[int, int]]:
        """``[(start, end), ...]`` frame ranges (end exclusive) of the two subtasks."""
        return [(self.reach_start, self.grasp_end), (self.grasp_end, self.end)]

    def check(self) -> None:
        """Raise :class:`AnnotationError` (``bad_manual_annotation``) unless ordered in range."""
        order = (self.reach_start, self.grasp_closed, self.grasp_end, self.release, self.end)
        if not (0 <= order[0] < order[1] < order[2] < order[3] < order[4]):
            names = ("reach_start", "grasp_closed", "grasp_end", "release", "end")
            raise AnnotationError(
                "bad_manual_annotation",
                "expected 0 ≤ reach_start < grasp_closed < grasp_end < release < end, got "
                f"{dict(zip(names, order, strict=True))}",
            )

    def with_offsets(
        self,
        rng: np.random.Generator,
        start_offset_frames: tuple[int, int],
        grasp_offset_frames: tuple[int, int],
    ) -> SubtaskAnnotation:
        """MimicGen's random boundary offsets, clamped so the subtasks keep their meaning.

        The reach onset moves within ``[0, grasp_closed − 1]`` and the grasp boundary within
        ``[grasp_closed + 1, release − 1]`` (never before the hand has closed).
        """
        start = self.reach_start + int(
            rng.integers(start_offset_frames[0], start_offset_frames[1] + 1)
        )
        grasp = self.grasp_end + int(
            rng.integers(grasp_offset_frames[0], grasp_offset_frames[1] + 1)
        )
        return replace(
            self,
            reach_start=int(np.clip(start, 0, self.grasp_closed - 1)),
            grasp_end=int(np.clip(grasp, self.grasp_closed + 1, self.release - 1)),
        )

    def as_dict(self) -> dict[str, int | str]:
        """JSON-friendly form (provenance, sidecar)."""
        return {
            "reach_start": self.reach_start,
            "grasp_closed": self.grasp_closed,
            "grasp_end": self.grasp_end,
            "release": self.release,
            "end": self.end,
            "source": self.source,
        }


def bin_poses_in_base(world: WorldParams) -> dict[str, NDArray[np.float64]]:
    """4x4 pose of every bin in ``base_link`` of ``world`` (outer bottom centre)."""
    base_inverse = np.linalg.inv(world.robot.base_pose.to_pose().matrix())
    return {name: base_inverse @ b.pose.to_pose().matrix() for name, b in world.bins.items()}


def inside_footprint(
    bin_pose: NDArray[np.float64], position_m: NDArray[np.float64], margin_m: float = 0.0
) -> bool:
    """Whether ``position_m``'s xy lies inside the bin's inner footprint (grown by margin)."""
    local = bin_pose[:3, :3].T @ (np.asarray(position_m, dtype=float) - bin_pose[:3, 3])
    half_x = BIN_INNER_SIZE_M[0] / 2.0 + margin_m
    half_y = BIN_INNER_SIZE_M[1] / 2.0 + margin_m
    return bool(abs(local[0]) <= half_x and abs(local[1]) <= half_y)


def closure_signal(
    actions: NDArray[np.float64], action_names: Sequence[str], joints: Sequence[str]
) -> NDArray[np.float64]:
    """Mean commanded flexion of ``joints`` per frame.

    Raises:
        ValueError: If a closure joint is not among ``action_names``.

    """
    missing = [j for j in joints if j not in action_names]
    if missing:
        raise ValueError(
            f"annotation.closure_joints: {missing} not in the episode's action_names "
            f"{list(action_names)}"
        )
    columns = [list(action_names).index(j) for j in joints]
    return np.asarray(actions[:, columns], dtype=float).mean(axis=1)


def palm_positions(signals: DemoSignals, nominal_world: WorldParams) -> NDArray[np.float64]:
    """``(T, 3)`` palm positions in base_link: the signals' own, else FK of the arm commands.

    Raises:
        ValueError: If an arm joint is not among the episode's ``action_names``.

    """
    if signals.palm_positions_m is not None:
        return np.asarray(signals.palm_positions_m, dtype=float)
    names = list(signals.action_names)
    missing = [j for j in ARM_JOINT_NAMES if j not in names]
    if missing:
        raise ValueError(f"arm joints {missing} not in the episode's action_names {names}")
    arm_q = np.asarray(signals.actions[:, [names.index(j) for j in ARM_JOINT_NAMES]], dtype=float)
    return BaseLinkArm(nominal_world).forward_many(arm_q)[:, :3, 3]  # type: ignore[no-any-return]


def annotate(
    signals: DemoSignals, nominal_world: WorldParams, config: AnnotationConfig
) -> SubtaskAnnotation:
    """Find the subtask boundaries of one demonstration from its recorded signals.

    The object track is read while it is valid; after its last valid frame (the tracker lost
    the object to the hand) the palm pose stands in for the held object (see the module doc).

    Args:
        signals: The episode's commands, object track and (optionally) palm positions.
        nominal_world: The NOMINAL world (bin footprints, target bin of each object type,
            kinematics for the palm when ``signals.palm_positions_m`` is None).
        config: Thresholds.

    Raises:
        AnnotationError: ``no_object_track``, ``no_detectable_grasp``, ``no_release`` or
            ``released_outside_bin``.

    """
    n = signals.times_s.shape[0]
    if signals.object_pose is None or signals.object_valid is None:
        raise AnnotationError("no_object_track", "the episode has no obs/object_pose")
    valid = np.asarray(signals.object_valid, dtype=bool)
    if valid.sum() < 3:
        raise AnnotationError("no_object_track", f"{int(valid.sum())} valid object poses")
    closure = closure_signal(signals.actions, signals.action_names, config.closure_joints)
    peak = int(np.argmax(closure))
    low = float(closure[: peak + 1].min())
    rise = float(closure[peak]) - low
    if rise < config.min_closure_range_rad:
        raise AnnotationError(
            "no_detectable_grasp",
            f"hand closure rises by {rise:.3f} rad < min_closure_range_rad "
            f"{config.min_closure_range_rad}",
        )
    closed = int(np.argmax(closure >= low + config.closed_fraction * rise))
    before = valid[: closed + 1]
    if not before.any():
        raise AnnotationError("no_object_track", "no valid object pose before the grasp")
    rest_z = float(np.median(signals.object_pose[: closed + 1][before, 2]))
    frames = np.arange(n)
    track_end = int(np.flatnonzero(valid)[-1])
    untracked = frames > track_end  # the tracker lost the object (to the hand): use the palm
    in_window = (frames > closed) & (
        signals.times_s <= signals.times_s[closed] + config.lift_window_s
    )
    lifted = valid & (signals.object_pose[:, 2] > rest_z + config.lift_margin_m) & in_window
    palm: NDArray[np.float64] | None = None
    if (untracked & in_window).any():
        palm = palm_positions(signals, nominal_world)
        palm_rest_z = float(palm[closed, 2])  # the palm's height as the hand closed
        lifted |= untracked & (palm[:, 2] > palm_rest_z + config.lift_margin_m) & in_window
    if not lifted.any():
        what = "the object" if palm is None else f"the object (tracked to {track_end}) or palm"
        raise AnnotationError(
            "no_detectable_grasp",
            f"hand closed at frame {closed} but {what} never rose {config.lift_margin_m} m "
            f"above its rest within {config.lift_window_s} s",
        )
    lift = int(np.argmax(lifted))
    opened = (closure < low + config.open_fraction * rise) & (frames > lift)
    if not opened.any():
        raise AnnotationError("no_release", f"the hand never opens after the lift at {lift}")
    release = int(np.argmax(opened))
    target = nominal_world.objects[signals.object_type].target_bin
    bin_pose = bin_poses_in_base(nominal_world)[target]
    if untracked[release]:  # the hand holds the object: the palm is over where it drops
        if palm is None:
            palm = palm_positions(signals, nominal_world)
        where, held = palm[release], "palm"
    else:
        tracked = np.flatnonzero(valid[: release + 1])  # non-empty: valid before the grasp
        where, held = signals.object_pose[tracked[-1], :3], "object"
    if not inside_footprint(bin_pose, where, config.bin_margin_m):
        raise AnnotationError(
            "released_outside_bin",
            f"{held} not over {target} when the hand opened (frame {release}, xy "
            f"{np.round(where[:2], 3).tolist()})",
        )
    arm_columns = [list(signals.action_names).index(j) for j in ARM_JOINT_NAMES]
    arm = np.asarray(signals.actions[:, arm_columns], dtype=float)
    moved = np.abs(arm - arm[0]).max(axis=1) > config.start_motion_rad
    reach_start = int(np.argmax(moved)) if moved[:closed].any() else 0
    annotation = SubtaskAnnotation(reach_start, closed, lift, release, n)
    annotation.check()
    return annotation


# -- manual override sidecar ---------------------------------------------------------------------


class SubtaskOverride(ConfigModel):
    """One episode's manual annotation: any boundary given replaces the automatic one."""

    reach_start: int | None = Field(default=None, ge=0, description="Reach onset frame.")
    grasp_closed: int | None = Field(default=None, ge=0, description="Hand-closed frame.")
    grasp_end: int | None = Field(default=None, ge=0, description="Subtask 1/2 boundary frame.")
    release: int | None = Field(default=None, ge=0, description="Hand-open-over-bin frame.")
    skip: str | None = Field(default=None, description="Exclude the episode, with this note.")

    def complete(self) -> bool:
        """Whether every boundary is given (usable without an automatic annotation)."""
        return None not in (self.reach_start, self.grasp_closed, self.grasp_end, self.release)


class SubtaskSidecar(ConfigModel):
    """``<dataset>.subtasks.yaml``: manual subtask annotations by episode index."""

    schema_version: Literal[1] = Field(default=1, description="Schema version of this file.")
    episodes: dict[int, SubtaskOverride] = Field(
        default_factory=dict, description="Episode index → override."
    )


def sidecar_path(dataset_path: str | Path) -> Path:
    """Where the manual annotations of a dataset live.

    ``demos.hdf5`` → ``demos.subtasks.yaml`` beside it; a shard directory ``demos/`` →
    ``demos.subtasks.yaml`` beside the directory.
    """
    path = Path(dataset_path)
    stem = path.name if path.is_dir() or not path.suffix else path.stem
    return path.parent / f"{stem}.subtasks.yaml"


def load_sidecar(dataset_path: str | Path) -> SubtaskSidecar:
    """Return the dataset's manual annotations (empty when there is no sidecar).

    Raises:
        r2s2r_common.config.ConfigError: The sidecar exists but is invalid.

    """
    path = sidecar_path(dataset_path)
    if not path.is_file():
        return SubtaskSidecar()
    return load_config(SubtaskSidecar, path)


def save_sidecar(dataset_path: str | Path, sidecar: SubtaskSidecar) -> Path:
    """Write the sidecar beside the dataset; returns its path."""
    path = sidecar_path(dataset_path)
    data = sidecar.model_dump(mode="python", exclude_none=True)
    dump_yaml(data, path)
    return path


def apply_override(
    automatic: SubtaskAnnotation | None, override: SubtaskOverride, length: int
) -> SubtaskAnnotation:
    """Merge a manual override into the automatic annotation (or use it alone if complete).

    Raises:
        AnnotationError: ``manual_skip`` if the override skips the episode;
            ``bad_manual_annotation`` if it is incomplete without an automatic annotation or
            not ordered.

    """
    if override.skip is not None:
        raise AnnotationError("manual_skip", override.skip)
    if automatic is None:
        if not override.complete():
            raise AnnotationError(
                "bad_manual_annotation",
                "automatic annotation failed and the override does not give every boundary",
            )
        base = SubtaskAnnotation(0, 1, 2, 3, length)
    else:
        base = automatic
    merged = SubtaskAnnotation(
        reach_start=override.reach_start if override.reach_start is not None else base.reach_start,
        grasp_closed=(
            override.grasp_closed if override.grasp_closed is not None else base.grasp_closed
        ),
        grasp_end=override.grasp_end if override.grasp_end is not None else base.grasp_end,
        release=override.release if override.release is not None else base.release,
        end=length,
        source="manual",
    )
    merged.check()
    return merged
