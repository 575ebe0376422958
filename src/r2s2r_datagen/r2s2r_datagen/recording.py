"""Episode recording inside generation: frames sampled like the real dataset.

:class:`RecordingBackend` wraps a simulator backend. A generator drives it exactly like the
backend (``reset``, ``command_trajectory``, ``step``...); every ``1 / rate_hz`` of simulated
time it samples one frame, the way :mod:`r2s2r_recorder.bag_converter` builds the real
dataset from a bag:

- observations at frame time ``t``: head and hand camera RGB (rendered with the world's
  intrinsics, resized to the dataset resolution with ``INTER_AREA``), measured joint
  positions (:data:`ALL_JOINT_NAMES` order), belt speed, the tracked object, and the episode
  object's pose in ``base_link`` (x, y, z, then quaternion x, y, z, w; valid once it is on the
  belt; simulator truth, for MimicGen and analysis, never a policy input);
- with ``recording.perception`` on (the default), belt speed and the tracked object come from
  the cell's perception (:class:`r2s2r_belt.perception.CellPerception`: the ``belt_speed`` and
  ``object_tracker`` cores with their node configurations and, by default, the simulated world
  as the cell's knowledge, as a grounded cell publishes it)
  fed with the simulated belt encoder (at ``encoder_rate_hz``, the belt's travel at each tick,
  interpolated within a step call, where the speed is constant; the belt ran before the
  episode, so the estimator starts warmed up at the episode's speed) and the rendered head
  RGB-D frames, exactly as the deployed cell makes them; the tracked-object vector is
  :class:`r2s2r_dataset.ObjectTrackLatch` over the tracker's output;
- the action at ``t``: the joint target *in force*: of the last trajectory commanded on each
  controller at or before ``t``, the first point whose ``command time + time_from_start`` is
  at or after ``t`` (the last point once all have passed); the home pose before any command.

A frame at ``t`` is taken when simulation is about to advance past ``t`` (or when the episode
is closed), so a command or a spawn issued at ``t`` is part of frame ``t``, as in the bag.

A *deferred* recording (``deferred=True``, on a backend with
:class:`~r2s2r_sim.backend.SceneSnapshots`) steps the backend exactly as a live one does (the
same step calls, cut at the same frame ticks) but renders nothing and runs no
perception while it runs: at each frame it keeps a scene snapshot and what the frame reads of
the simulator, at each encoder tick the belt travel. :meth:`RecordingBackend.to_episode` then
draws the snapshots and feeds the perception in the same order, so the episode is the live
one's, array for array. A generator whose actions never read the recording (MimicGen: the
simulator's poses, not the cell's perception) pays for cameras and perception only on the
attempts it keeps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray
from r2s2r_dataset.reference import TimedCommand, controller_reference
from r2s2r_description.cameras import HEAD
from r2s2r_description.controllers import CONTROLLER_JOINTS
from r2s2r_description.robot import (
    ALL_JOINT_NAMES,
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
)
from r2s2r_description.transforms import Vector
from r2s2r_sim.backend import (
    Contact,
    FloatArray,
    ObjectInstance,
    ObjectPose,
    SceneSnapshots,
    SimBackend,
)
from r2s2r_world.world import WorldParams
from scipy.spatial.transform import Rotation

from r2s2r_datagen.config import RecordingConfig
from r2s2r_dataset import (
    IMAGE_KEY_OF_CAMERA,
    OBJECT_TRACK_KEY,
    TRACKER_SOURCE,
    Episode,
    EpisodeMetadata,
    ObjectTrackLatch,
)

CAMERAS: dict[str, str] = {key: camera for camera, key in IMAGE_KEY_OF_CAMERA.items()}
"""Dataset image key → simulator camera name."""

PREROLL_S = 1.0
"""Encoder history fed before an episode's first frame (the belt ran before the trial)."""


def perception_config(
    belt_speed_config: str, object_tracker_config: str, cell_knowledge_world: str, world: Any
) -> Any:
    """Return the simulated cell's perception configuration (node files + what it knows).

    Args:
        belt_speed_config: ``belt_speed`` parameters.
        object_tracker_config: ``object_tracker`` parameters.
        cell_knowledge_world: Empty: the simulated ``world`` knows itself
            (:meth:`~r2s2r_belt.perception.CellKnowledge.exact`); else a world file, known as a
            cell before grounding knows the nominal world.
        world: The simulated world.

    Raises:
        r2s2r_common.config.ConfigError: If a file cannot be loaded.

    """
    from r2s2r_belt.perception import CellKnowledge
    from r2s2r_belt.perception import perception_config as make_config

    if cell_knowledge_world:
        knowledge = CellKnowledge.ungrounded(cell_knowledge_world)
    else:
        knowledge = CellKnowledge.exact(world)
    return make_config(knowledge, belt_speed_config, object_tracker_config)


class RecordingError(RuntimeError):
    """The recording cannot be sampled as asked (e.g. the frame period is not whole steps)."""


@dataclass(frozen=True)
class _EncoderReading:
    """The belt encoder at a tick: what the perception is fed."""

    time_s: float
    travel_m: float
    belt_speed_mps: float


@dataclass(frozen=True)
class _FrameState:
    """What a frame reads of the simulator at its time; ``scene`` set when deferred."""

    time_s: float
    joint_pos: NDArray[np.float32]
    belt_speed_mps: float
    object_world: FloatArray | None
    object_valid: bool
    scene: object = None


def episode_actions(
    commands: dict[str, list[TimedCommand]], times_s: Sequence[float] | FloatArray
) -> NDArray[np.float32]:
    """Actions of an episode's frames: each controller's reference (:data:`ALL_JOINT_NAMES`).

    Raises:
        r2s2r_dataset.reference.ReferenceError: A logged command names other joints.

    """
    columns = []
    for controller, names in CONTROLLER_JOINTS.items():
        home = [HOME_POSITIONS[n] for n in names]
        columns.append(controller_reference(commands[controller], names, times_s, home))
    return np.concatenate(columns, axis=1).astype(np.float32)


class RecordingBackend:
    """A :class:`~r2s2r_sim.backend.SimBackend` that records the episode it runs.

    Args:
        inner: The worker's backend (rendering enabled).
        config: Frame rate and dataset image size.
        object_name: The episode object whose pose is recorded (default: the first object
            passed to :meth:`reset`).
        deferred: Render and perceive in :meth:`to_episode`, from scene snapshots (see the
            module docstring); :meth:`object_tracked` then refuses.

    Raises:
        RecordingError: At reset, if ``1 / rate_hz`` is not a whole number of physics steps;
            at construction, if ``deferred`` and the backend keeps no scene snapshots.

    """

    def __init__(
        self,
        inner: SimBackend,
        config: RecordingConfig,
        object_name: str | None = None,
        deferred: bool = False,
    ) -> None:
        if deferred and not isinstance(inner, SceneSnapshots):
            raise RecordingError(
                f"a deferred recording needs a backend with scene snapshots "
                f"(r2s2r_sim.backend.SceneSnapshots); {type(inner).__name__} has none"
            )
        self.inner = inner
        self.config = config
        self.deferred = deferred
        self._object_name_arg = object_name
        self._object_name: str | None = object_name
        self._period_steps = 0
        self._timestep_s = 0.0
        self._steps = 0
        self._last_sampled_step = -1
        self._commands: dict[str, list[TimedCommand]] = {"arm": [], "hand": []}
        self._base_inverse: FloatArray = np.eye(4)
        self._frames: dict[str, list[Any]] = {}
        self._belt_speed_mps: float | None = None
        self._perception: Any = None
        self._latch: ObjectTrackLatch | None = None
        self._encoder_period_steps = 0
        self._roller_radius_m = 1.0
        self._encoder_started = False
        self._last_encoder_step = -1
        self._deferred_events: list[_EncoderReading | _FrameState] = []
        self._later_keys: tuple[str, ...] = ()  # cameras a live recording draws when closed
        self._later_scenes: list[tuple[int, object]] = []  # (frame row, scene snapshot)
        self._world: WorldParams | None = None
        self._clear()
        self.render_s = 0.0
        self.perception_s = 0.0

    # -- recording ---------------------------------------------------------------------------
    def _clear(self) -> None:
        self._frames = {
            "time": [],
            **{key: [] for key in CAMERAS},
            "joint_pos": [],
            "belt": [],
            "object_world": [],
            "object_valid": [],
            OBJECT_TRACK_KEY: [],
        }
        self._commands = {"arm": [], "hand": []}
        self._steps = 0
        self._last_sampled_step = -1
        self._deferred_events = []
        self._later_scenes = []

    def object_tracked(self) -> bool:
        """Whether the cell's perception reports the episode's object now (True without it).

        What a behavior that reacts only to what the cell sees waits for: the latest frame's
        tracked object is visible.
        """
        if not self.config.perception:
            return True
        if self.deferred:
            raise RecordingError(
                "a deferred recording runs no perception while it runs: deferred=False to ask"
            )
        if self._latch is None or not self._frames[OBJECT_TRACK_KEY]:
            return False
        visible = self._latch.fields.index("visible")
        return bool(self._frames[OBJECT_TRACK_KEY][-1][visible] > 0.5)

    @property
    def num_frames(self) -> int:
        """Frames recorded since the last reset."""
        return len(self._frames["time"])

    def _sample(self) -> None:
        """Take the frame due now (live), or keep what it needs to be taken later (deferred)."""
        self._encoder_sample()
        world_pose, valid = self._object_world_pose()
        state = _FrameState(
            time_s=self._steps * self._timestep_s,
            joint_pos=self.inner.joint_positions().astype(np.float32),
            belt_speed_mps=self.belt_speed_mps,
            object_world=world_pose,
            object_valid=valid,
            scene=(
                self.inner.scene_snapshot()  # type: ignore[attr-defined]
                if self.deferred or self._later_keys
                else None
            ),
        )
        if self.deferred:
            self._deferred_events.append(state)
        else:
            self._take_frame(state, self._later_keys)
        self._last_sampled_step = self._steps

    def _take_frame(self, state: _FrameState, later: Sequence[str] = ()) -> None:
        """Render the cameras as the scene is drawn now, run the perception, append the frame.

        Cameras whose keys are in ``later`` are drawn from ``state.scene`` when the recording
        is closed (:meth:`_develop`); their rows hold ``None`` until then.
        """
        started = time.perf_counter()
        head_native: NDArray[np.uint8] | None = None
        depth = None
        for key, camera in CAMERAS.items():
            if key in later:
                self._frames[key].append(None)
                continue
            image, native, camera_depth = self._render_camera(camera)
            if camera == HEAD.name:
                head_native, depth = native, camera_depth
            self._frames[key].append(image)
        rendered = time.perf_counter()
        self.render_s += rendered - started
        belt_speed = state.belt_speed_mps
        if self._perception is not None and self._latch is not None:
            assert head_native is not None
            tracks = self._perception.add_head_frame(state.time_s, head_native, depth)
            self._latch.update(state.time_s, tracks or [])
            self._frames[OBJECT_TRACK_KEY].append(self._latch.features(state.time_s))
            fused = self._perception.belt_speed(state.time_s)
            belt_speed = float(fused.speed_mps) if fused is not None else 0.0
            self.perception_s += time.perf_counter() - rendered
        self._frames["time"].append(state.time_s)
        self._frames["joint_pos"].append(state.joint_pos)
        self._frames["belt"].append(belt_speed)
        self._frames["object_world"].append(state.object_world)
        self._frames["object_valid"].append(state.object_valid)
        if later:
            self._later_scenes.append((len(self._frames["time"]) - 1, state.scene))

    def _render_camera(
        self, camera: str
    ) -> tuple[NDArray[np.uint8], NDArray[np.uint8], NDArray[np.float32] | None]:
        """Render a camera now: (dataset-size RGB, native RGB, native depth for perception)."""
        depth = None
        if camera == HEAD.name and self._perception is not None:
            native, depth = self._render_rgbd(camera)
        else:
            native = np.asarray(self.inner.render(camera), dtype=np.uint8)
        size = (self.config.image_width_px, self.config.image_height_px)
        image = native
        if (image.shape[1], image.shape[0]) != size:
            resized = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
            image = np.asarray(resized, dtype=np.uint8)
        return image, native, depth

    def _render_rgbd(self, camera: str) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
        """Return a camera's RGB and depth of now, from one render where the backend can."""
        render_rgbd = getattr(self.inner, "render_rgbd", None)
        if render_rgbd is not None:
            rgb, depth = render_rgbd(camera)
        else:
            rgb, depth = self.inner.render(camera), self.inner.render_depth(camera)
        return np.asarray(rgb, dtype=np.uint8), np.asarray(depth, dtype=np.float32)

    def _encoder_sample(self) -> None:
        """Read the belt encoder if it ticks now: fed to the perception, or kept (deferred)."""
        if (
            not self._encoder_period_steps
            or self._steps == self._last_encoder_step
            or self._steps % self._encoder_period_steps
        ):
            return
        self._encoder_reading(self._steps, self.inner.belt_travel_m)

    def _encoder_readings_inside(self, start_step: int, travel_before_m: float) -> None:
        """Read the encoder ticks strictly inside the step call just made, from ``start_step``.

        The belt's speed changes only between step calls (:meth:`set_belt_speed`), so its
        travel is linear in time within one: each tick reads the travel interpolated between
        the call's two ends (equal to what cutting the call at the tick reads, to float
        rounding), and the call need not be cut at 100 Hz.
        """
        period = self._encoder_period_steps
        first = start_step - start_step % period + period
        if first >= self._steps:
            return
        travel_after_m = self.inner.belt_travel_m
        span = self._steps - start_step
        for tick in range(first, self._steps, period):
            fraction = (tick - start_step) / span
            self._encoder_reading(
                tick, travel_before_m + (travel_after_m - travel_before_m) * fraction
            )

    def _encoder_reading(self, step: int, travel_m: float) -> None:
        """Take the encoder's reading at ``step``: fed to the perception, or kept (deferred)."""
        reading = _EncoderReading(
            time_s=step * self._timestep_s, travel_m=travel_m, belt_speed_mps=self.belt_speed_mps
        )
        if self.deferred:
            self._deferred_events.append(reading)
        else:
            self._feed_encoder(reading)
        self._last_encoder_step = step

    def _feed_encoder(self, reading: _EncoderReading) -> None:
        """Feed an encoder reading (after a warm-up history at the first one)."""
        assert self._perception is not None
        if not self._encoder_started:
            self._encoder_started = True
            period_s = self._encoder_period_steps * self._timestep_s
            count = round(PREROLL_S / period_s)
            for k in range(count, 0, -1):
                before_s = reading.time_s - k * period_s
                self._perception.add_encoder(
                    before_s, reading.belt_speed_mps * before_s / self._roller_radius_m
                )
        self._perception.add_encoder(reading.time_s, reading.travel_m / self._roller_radius_m)

    def _develop(self) -> None:
        """Draw what was left for the close from the scene snapshots.

        A deferred recording's frames (the perception fed in the order it ran), or the cameras
        of a live one that nothing read while it ran.
        """
        if not self._deferred_events and not self._later_scenes:
            return
        snapshots: SceneSnapshots = self.inner  # type: ignore[assignment]
        now = snapshots.scene_snapshot()
        try:
            if self._deferred_events:
                self._start_perception()
                for event in self._deferred_events:
                    if isinstance(event, _EncoderReading):
                        if self._perception is not None:
                            self._feed_encoder(event)
                    else:
                        snapshots.show_scene_snapshot(event.scene)
                        self._take_frame(event)
            if self._later_scenes:
                started = time.perf_counter()
                for row, scene in self._later_scenes:
                    snapshots.show_scene_snapshot(scene)
                    for key in self._later_keys:
                        self._frames[key][row] = self._render_camera(CAMERAS[key])[0]
                self.render_s += time.perf_counter() - started
        finally:
            snapshots.show_scene_snapshot(now)
        self._deferred_events = []
        self._later_scenes = []

    def _object_world_pose(self) -> tuple[FloatArray | None, bool]:
        """Return the object's world pose (x, y, z, quaternion w, x, y, z) while on the belt."""
        if self._object_name is None:
            return None, False
        pose = self.inner.object_poses()[self._object_name]
        if not pose.active:
            return None, False
        return np.concatenate([pose.position_m, pose.quat_wxyz]), True

    def _object_poses_in_base(self) -> NDArray[np.float32]:
        """(T, 7) object poses in ``base_link`` (x, y, z, quaternion x, y, z, w); 0 if invalid.

        Converted once per episode: scipy's rotations cost as much per call as for a whole
        batch, and converting row by row or in one batch gives the same numbers.
        """
        world_poses = self._frames["object_world"]
        poses = np.zeros((len(world_poses), 7), dtype=np.float32)
        rows = [k for k, pose in enumerate(world_poses) if pose is not None]
        if not rows:
            return poses
        world = np.stack([world_poses[k] for k in rows])
        quat_xyzw = world[:, [4, 5, 6, 3]]
        rotations = Rotation.from_quat(quat_xyzw).as_matrix()
        base_objects = []
        for rotation, position in zip(rotations, world[:, :3], strict=True):
            world_object: FloatArray = np.eye(4)
            world_object[:3, :3] = rotation
            world_object[:3, 3] = position
            base_objects.append(self._base_inverse @ world_object)
        base = np.stack(base_objects)
        base_quat_xyzw = Rotation.from_matrix(base[:, :3, :3]).as_quat()
        poses[rows] = np.concatenate([base[:, :3, 3], base_quat_xyzw], axis=1).astype(np.float32)
        return poses

    def _sample_due(self) -> None:
        if self._steps % self._period_steps == 0 and self._last_sampled_step != self._steps:
            self._sample()

    def to_episode(
        self,
        *,
        world_config_id: str,
        behavior_source: str,
        task: str,
        object_type: str,
        belt_speed_mps: float,
        success: bool,
        provenance: dict[str, Any],
    ) -> Episode:
        """Close the recording (taking a frame due now) and return it as an Episode.

        Raises:
            RecordingError: If no frame was recorded.

        """
        self._sample_due()
        self._develop()
        if not self._frames["time"]:
            raise RecordingError("no frame recorded: reset and step the backend first")
        frames = self._frames
        metadata = EpisodeMetadata(
            source="sim",
            world_config_id=world_config_id,
            behavior_source=behavior_source,  # type: ignore[arg-type]
            task=task,
            object_type=object_type,
            belt_speed_mps=belt_speed_mps,
            outcome="success" if success else "failure",
            joint_names=list(ALL_JOINT_NAMES),
            action_names=list(ALL_JOINT_NAMES),
            control_rate_hz=self.config.rate_hz,
            provenance=provenance,
            belt_speed_source="belt_speed" if self._latch is not None else "commanded",
            object_track_source=TRACKER_SOURCE if self._latch is not None else "",
            object_track_fields=list(self._latch.fields) if self._latch is not None else [],
        )
        has_object = self._object_name is not None
        extra_obs = {}
        if self._latch is not None:
            extra_obs[OBJECT_TRACK_KEY] = np.stack(frames[OBJECT_TRACK_KEY]).astype(np.float32)
        episode = Episode(
            metadata=metadata,
            timestamps_s=np.asarray(frames["time"], dtype=np.float64),
            images={key: np.stack(frames[key]) for key in CAMERAS},
            joint_pos_rad=np.stack(frames["joint_pos"]).astype(np.float32),
            belt_speed_mps=np.asarray(frames["belt"], dtype=np.float32),
            actions=episode_actions(self._commands, frames["time"]),
            object_pose=self._object_poses_in_base() if has_object else None,
            object_pose_valid=(
                np.asarray(frames["object_valid"], dtype=np.bool_) if has_object else None
            ),
            extra_obs=extra_obs,
        )
        episode.validate()
        return episode

    # -- SimBackend ---------------------------------------------------------------------------
    @property
    def time_s(self) -> float:
        """See :attr:`r2s2r_sim.backend.SimBackend.time_s`."""
        return self.inner.time_s

    @property
    def world(self) -> WorldParams:
        """See :attr:`r2s2r_sim.backend.SimBackend.world`."""
        return self.inner.world

    def reset(self, world: WorldParams, seed: int, objects: Sequence[ObjectInstance] = ()) -> None:
        """Reset the backend and start a new recording."""
        self.inner.reset(world, seed, objects)
        self._timestep_s = world.physics.timestep_s
        ratio = 1.0 / (self.config.rate_hz * self._timestep_s)
        if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
            raise RecordingError(
                f"recording.rate_hz = {self.config.rate_hz}: expected 1 / (k · timestep_s) for "
                f"an integer k ≥ 1 (timestep_s = {self._timestep_s})"
            )
        self._period_steps = round(ratio)
        self._clear()
        self._perception = None
        self._latch = None
        self._encoder_started = False
        self._last_encoder_step = -1
        self._encoder_period_steps = 0
        if self.config.perception:
            encoder_ratio = 1.0 / (self.config.encoder_rate_hz * self._timestep_s)
            if abs(encoder_ratio - round(encoder_ratio)) > 1e-6 or round(encoder_ratio) < 1:
                raise RecordingError(
                    f"recording.encoder_rate_hz = {self.config.encoder_rate_hz}: expected "
                    f"1 / (k · timestep_s) for an integer k ≥ 1 (timestep_s = {self._timestep_s})"
                )
            self._encoder_period_steps = round(encoder_ratio)
            self._roller_radius_m = world.belt.roller_radius_m
        self._world = world
        self._later_keys = ()
        if not self.deferred:
            self._start_perception()
            if isinstance(self.inner, SceneSnapshots):
                live = {HEAD.name} if self._perception is not None else set()
                self._later_keys = tuple(k for k, c in CAMERAS.items() if c not in live)
        self._object_name = self._object_name_arg or (objects[0].name if objects else None)
        self._base_inverse = np.asarray(
            np.linalg.inv(world.robot.base_pose.to_pose().matrix()), dtype=np.float64
        )

    def _start_perception(self) -> None:
        """Start the cell's perception for the episode (with ``recording.perception`` on)."""
        if not self.config.perception or self._world is None:
            return
        from r2s2r_belt.perception import CellPerception

        config = perception_config(
            self.config.belt_speed_config,
            self.config.object_tracker_config,
            self.config.cell_knowledge_world,
            self._world,
        )
        self._perception = CellPerception(config)
        self._latch = ObjectTrackLatch(self._perception.catalogue.names)

    def step(self, n_steps: int = 1) -> None:
        """Advance ``n_steps`` physics steps, sampling a frame at every frame time passed."""
        if self._period_steps == 0:
            # Not reset through this wrapper: the inner backend complains.
            self.inner.step(n_steps)
            self._steps += int(n_steps)
            return
        remaining = int(n_steps)
        while remaining > 0:
            self._sample_due()
            self._encoder_sample()
            chunk = min(remaining, self._period_steps - self._steps % self._period_steps)
            start_step = self._steps
            travel_before_m = self.inner.belt_travel_m if self._encoder_period_steps else 0.0
            self.inner.step(chunk)
            self._steps += chunk
            remaining -= chunk
            if self._encoder_period_steps:
                self._encoder_readings_inside(start_step, travel_before_m)

    def command_trajectory(
        self,
        joint_names: Sequence[str],
        times_s: Sequence[float] | FloatArray,
        positions: Sequence[Sequence[float]] | FloatArray,
        velocities: Sequence[Sequence[float]] | FloatArray | None = None,
    ) -> None:
        """Send the trajectory to the backend and log it for the actions."""
        self.inner.command_trajectory(joint_names, times_s, positions, velocities)
        names = tuple(joint_names)
        controller = "arm" if set(names) <= set(ARM_JOINT_NAMES) else "hand"
        if controller == "hand" and not set(names) <= set(HAND_JOINT_NAMES):
            return  # the backend accepted it, so this cannot happen; keep the log consistent
        self._commands[controller].append(
            TimedCommand(
                start_s=self.inner.time_s,
                joint_names=names,
                times_s=np.asarray(times_s, dtype=float).reshape(-1),
                positions=np.asarray(positions, dtype=float),
                velocities=None if velocities is None else np.asarray(velocities, dtype=float),
            )
        )

    def set_joint_targets(self, joint_names: Sequence[str], positions: Sequence[float]) -> None:
        """Send a one-point trajectory at ``time_from_start = 0`` (logged like any command)."""
        self.command_trajectory(joint_names, [0.0], [list(positions)])

    def joint_positions(self) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.joint_positions`."""
        return self.inner.joint_positions()

    def joint_velocities(self) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.joint_velocities`."""
        return self.inner.joint_velocities()

    def render(self, camera_name: str) -> NDArray[np.uint8]:
        """See :meth:`r2s2r_sim.backend.SimBackend.render`."""
        return self.inner.render(camera_name)

    def render_depth(self, camera_name: str) -> NDArray[np.float32]:
        """See :meth:`r2s2r_sim.backend.SimBackend.render_depth`."""
        return self.inner.render_depth(camera_name)

    def spawn_object(
        self, name: str, position_m: Vector, quat_wxyz: Vector = (1.0, 0.0, 0.0, 0.0)
    ) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.spawn_object`."""
        self.inner.spawn_object(name, position_m, quat_wxyz)

    def object_poses(self) -> dict[str, ObjectPose]:
        """See :meth:`r2s2r_sim.backend.SimBackend.object_poses`."""
        return self.inner.object_poses()

    def contacts(self) -> list[Contact]:
        """See :meth:`r2s2r_sim.backend.SimBackend.contacts`."""
        return self.inner.contacts()

    def body_pose(self, name: str) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.body_pose`."""
        return self.inner.body_pose(name)

    def set_belt_speed(self, speed_mps: float) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.set_belt_speed`."""
        self.inner.set_belt_speed(speed_mps)
        self._belt_speed_mps = float(speed_mps)

    @property
    def belt_speed_mps(self) -> float:
        """The belt speed in force (m/s)."""
        inner_speed = getattr(self.inner, "belt_speed_mps", None)
        if isinstance(inner_speed, float):
            return inner_speed
        if self._belt_speed_mps is not None:
            return self._belt_speed_mps
        return self.inner.world.belt.speed_mps

    @property
    def belt_travel_m(self) -> float:
        """See :attr:`r2s2r_sim.backend.SimBackend.belt_travel_m`."""
        return self.inner.belt_travel_m

    def get_state(self) -> object:
        """See :meth:`r2s2r_sim.backend.SimBackend.get_state`."""
        return self.inner.get_state()

    def set_state(self, state: object) -> None:
        """Restore a simulator snapshot.

        The recording is not rewound: generators that roll back must reset through this
        wrapper or record with a fresh one.
        """
        self.inner.set_state(state)

    def __getattr__(self, name: str) -> Any:
        # Backend-specific extras (joint_targets, park_object, model...) pass through.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)
