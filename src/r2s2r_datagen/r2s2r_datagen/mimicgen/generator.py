"""MimicGen with moving objects: the behavior-grounded episode generator (registry ``mimicgen``).

One job = one new trial (object type, arrival, pose, belt speed ``v_new``). A rollout:

1. play the trial (:class:`~r2s2r_sim.task.TrialRunner`) until the object is on the belt;
   read its pose (simulator state: this is generation, not the real cell);
2. choose a source demo by nearest neighbour on (across-belt offset, yaw up to symmetry, belt
   speed), uniformly among the k nearest; draw random subtask-boundary offsets;
3. subtask 1 (reach and grasp), object-centric in the *moving* frame: retime its start so the
   new object is where the source object was (:func:`~.geometry.retimed_start_s`), read the
   object pose once at the start of the bridge, predict it to the segment start, and carry
   the source palm poses from the source's moving frame to the new one (same durations; see
   :mod:`.geometry` for why this keeps the grasp at any belt speed);
4. subtask 2 (transport and release), in the target bin's frame (static);
5. each segment is preceded by a short pose interpolation (bridge) from the last commanded
   palm pose, converted to joint targets by IK (seeded by the previous solution), given small
   Gaussian joint noise, and executed through the backend's ``command_trajectory``; the hand
   replays the source's hand commands on the same clock;
6. the trial's success predicate judges; failures are retried with another source (up to
   ``max_attempts``), only successes are returned, with provenance.

Attempts are recorded *deferred* (:class:`~r2s2r_datagen.recording.RecordingBackend` with
``deferred=True``, on a backend with scene snapshots): each is stepped with a snapshot of the
scene at every frame and no camera rendered or perception run, since nothing a rollout decides
reads the recording; only an attempt that succeeds has its frames rendered and perceived. The
episodes are the ones a live recording of every attempt gives (``deferred=False``; tested array
for array), without the cost of the frames of the failed attempts or a second rollout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.config import ConfigError, parse_config
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES, HOME_POSITIONS, JOINT_LIMITS
from r2s2r_description.transforms import wrap_angle
from r2s2r_sim.backend import SceneSnapshots, SimBackend
from r2s2r_sim.task import TrialOutcome, TrialRunner
from r2s2r_world.kinematics import IkError
from r2s2r_world.world import WorldParams, load_world

from r2s2r_datagen.generator import (
    EpisodeJob,
    EpisodeSkipped,
    GenerationResult,
    GeneratorUnavailableError,
)
from r2s2r_datagen.mimicgen.annotation import bin_poses_in_base
from r2s2r_datagen.mimicgen.config import (
    GenerationParams,
    MimicGenConfig,
    load_mimicgen_config,
    resolve,
)
from r2s2r_datagen.mimicgen.geometry import (
    FloatArray,
    MovingFrame,
    equivalent_yaw,
    interpolate_poses,
    relative_poses,
    retimed_start_s,
    symmetry_period_rad,
    transform_segment,
    yaw_of_matrix,
    yaw_phase_in,
)
from r2s2r_datagen.mimicgen.kinematics import BaseLinkArm
from r2s2r_datagen.mimicgen.source import (
    SourceDemo,
    SourceLibrary,
    SourceLibraryError,
    across,
    belt_direction_in_base,
)
from r2s2r_datagen.recording import RecordingBackend

HOME_ARM = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
ARM_LOWER = np.array([JOINT_LIMITS[n].lower_rad for n in ARM_JOINT_NAMES])
ARM_UPPER = np.array([JOINT_LIMITS[n].upper_rad for n in ARM_JOINT_NAMES])


class RolloutAbortedError(RuntimeError):
    """A rollout ended before its segments were executed (reason in ``reason``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class RolloutResult:
    """One simulator rollout of a generated trajectory.

    Attributes:
        outcome: The success predicate's judgement.
        source: The source demo used.
        provenance: What was done (JSON-friendly).

    """

    outcome: TrialOutcome
    source: SourceDemo
    provenance: dict[str, Any] = field(default_factory=dict)


def _object_in_base(
    backend: SimBackend, world: WorldParams, name: str
) -> tuple[FloatArray, float, bool]:
    """Position, yaw and activity of an object in base_link (simulator state)."""
    pose = backend.object_poses()[name]
    base_inverse: np.ndarray = np.linalg.inv(world.robot.base_pose.to_pose().matrix())
    w, x, y, z = (float(v) for v in pose.quat_wxyz)
    world_yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    position = (base_inverse @ np.append(pose.position_m, 1.0))[:3]
    yaw = world_yaw + yaw_of_matrix(base_inverse)
    return position, wrap_angle(yaw, upper_closed=True), pose.active


class MimicGenGenerator:
    """Episode generator: MimicGen with moving objects over a library of source demos.

    Args:
        library: Annotated source demonstrations.
        params: Generation parameters.
        deferred: Render and perceive only the attempt that succeeds, from the snapshots its
            recording kept (see the module docstring; the same episodes), where the backend
            keeps scene snapshots; False records every attempt live.

    """

    def __init__(
        self, library: SourceLibrary, params: GenerationParams, deferred: bool = True
    ) -> None:
        self.library = library
        self.params = params
        self.deferred = deferred
        self._arms: dict[str, BaseLinkArm] = {}

    # -- helpers ---------------------------------------------------------------------------
    def _arm(self, world: WorldParams) -> BaseLinkArm:
        key = world.layout().__repr__()
        if key not in self._arms:
            self._arms[key] = BaseLinkArm(world)
        return self._arms[key]

    def _advance_to(self, runner: TrialRunner, backend: SimBackend, until_s: float) -> bool:
        """Step until ``until_s`` (or the outcome is decided); True if decided."""
        timestep = backend.world.physics.timestep_s
        while backend.time_s < until_s - 1e-9:
            remaining = math.ceil((until_s - backend.time_s) / timestep - 1e-9)
            if runner.step(max(1, min(self.params.steps_per_call, remaining))) is not None:
                return True
        return runner.done

    def _joints(
        self,
        arm: BaseLinkArm,
        poses: FloatArray,
        seed_q: FloatArray,
        rng: np.random.Generator,
        noisy_from: int,
    ) -> FloatArray:
        """IK of every pose seeded by the previous solution; noise on rows ≥ ``noisy_from``."""
        joints = np.empty((poses.shape[0], len(ARM_JOINT_NAMES)))
        seed = np.asarray(seed_q, dtype=float)
        for k, pose in enumerate(poses):
            seed = arm.solve(
                pose, seed, self.params.ik_tolerance_m, self.params.ik_tolerance_rad, 400
            )
            joints[k] = seed
        if self.params.action_noise_rad > 0.0 and noisy_from < joints.shape[0]:
            joints[noisy_from:] += rng.normal(
                0.0, self.params.action_noise_rad, joints[noisy_from:].shape
            )
        return np.clip(joints, ARM_LOWER, ARM_UPPER)

    def _bridge(
        self, start_pose: FloatArray, end_pose: FloatArray, start_s: float, end_s: float
    ) -> tuple[FloatArray, FloatArray]:
        """Bridge points strictly after ``start_s`` up to (excluding) ``end_s``."""
        count = max(1, math.ceil((end_s - start_s) / self.params.bridge_dt_s - 1e-9))
        fractions = np.arange(1, count) / count
        times = start_s + fractions * (end_s - start_s)
        return times, interpolate_poses(start_pose, end_pose, fractions)

    def _send(
        self,
        backend: SimBackend,
        times_s: FloatArray,
        arm_q: FloatArray,
        hand_times_s: FloatArray,
        hand_q: FloatArray,
    ) -> None:
        now = backend.time_s
        backend.command_trajectory(ARM_JOINT_NAMES, list(times_s - now), arm_q)
        keep = hand_times_s - now > 1e-6
        if keep.any():
            backend.command_trajectory(
                HAND_JOINT_NAMES, list(hand_times_s[keep] - now), hand_q[keep]
            )

    # -- one rollout -------------------------------------------------------------------------
    def rollout(
        self,
        job: EpisodeJob,
        backend: SimBackend,
        rng: np.random.Generator,
        exclude: tuple[int, ...] = (),
    ) -> RolloutResult:
        """Play the job's trial once with a trajectory generated from one source demo.

        Raises:
            SourceLibraryError: No eligible source demo (excluding ``exclude``).
            IkError: A generated palm pose is out of reach.
            RolloutAbortedError: The trial ended before the trajectory was sent.

        """
        params = self.params
        world = job.world
        arm = self._arm(world)
        runner = TrialRunner(backend, world, job.plan)
        runner.start()
        arrival = job.plan.arrivals[0]
        name, object_type = arrival.instance.name, arrival.instance.type_name
        while not backend.object_poses()[name].active:
            if runner.step(params.steps_per_call) is not None:
                raise RolloutAbortedError("timeout", "the object never arrived")
        now = backend.time_s
        position, yaw, _ = _object_in_base(backend, world, name)
        direction = belt_direction_in_base(world)
        speed = job.plan.belt_speed_mps
        velocity = direction * speed
        source, distance = self.library.choose(
            rng,
            object_type,
            float(position @ across(direction)),
            yaw,
            speed,
            world,
            params,
            exclude,
        )
        annotation = source.annotation.with_offsets(
            rng, params.start_offset_frames, params.grasp_offset_frames
        )
        start, boundary, end = annotation.reach_start, annotation.grasp_end, annotation.end
        src_times = source.times_s
        src_start_s = float(src_times[start])

        # Subtask 1: retime its start, then read the object once (bridge start), predict it
        # to the segment start and carry the segment into the new object's moving frame.
        if params.moving_frame and speed > 1e-6:
            segment_start = retimed_start_s(
                source.along_m(src_start_s), float(position @ direction), now, speed
            )
        else:  # static MimicGen: the source's delay from arrival to reach onset
            first_seen = float(src_times[0])
            segment_start = now + max(0.0, src_start_s - first_seen)
        bridge_start = max(segment_start - params.bridge_s, now)
        segment_start = bridge_start + params.bridge_s
        if self._advance_to(runner, backend, bridge_start):
            raise RolloutAbortedError("timeout", "trial decided before the reach")
        read_position, read_yaw, _ = _object_in_base(backend, world, name)
        spec = world.objects[object_type]
        frame_yaw = equivalent_yaw(
            read_yaw, source.motion.yaw_rad, symmetry_period_rad(spec.shape, spec.size_m)
        )
        origin = read_position + velocity * (segment_start - backend.time_s)
        source_frame = MovingFrame(
            src_start_s,
            source.motion.position_at(src_start_s),
            source.motion.yaw_rad,
            source.motion.velocity_mps,
        )
        target_frame = MovingFrame(segment_start, origin, frame_yaw, velocity)
        if not params.moving_frame:
            source_frame, target_frame = source_frame.static(), target_frame.static()
        segment_poses = source.palm_poses[start:boundary]
        weights = yaw_phase_in(
            relative_poses(segment_poses, src_times[start:boundary], source_frame)[:, :3, 3],
            params.yaw_phase_in_m,
        )
        times1, poses1 = transform_segment(
            segment_poses, src_times[start:boundary], source_frame, target_frame, weights
        )
        current_q = HOME_ARM.copy()
        bridge_times, bridge_poses = self._bridge(
            arm.forward(current_q), poses1[0], backend.time_s, float(times1[0])
        )
        all_times = np.concatenate([bridge_times, times1])
        joints1 = self._joints(
            arm, np.concatenate([bridge_poses, poses1]), current_q, rng, bridge_times.size
        )
        self._send(backend, all_times, joints1, times1, source.hand_commands[start:boundary])
        end1 = float(times1[-1])

        # Subtask 2: transport and release, in the target bin's (static) frame. When the new
        # object goes to another bin than the source's, the bin frame is phased in as the palm
        # nears the bin (a rigid transform would move the lift, at the belt, by the bins'
        # spacing).
        bins = bin_poses_in_base(world)
        source_bin = bins[world.objects[source.object_type].target_bin]
        target_bin = bins[spec.target_bin]
        source_bin_frame = MovingFrame(
            float(src_times[boundary]), source_bin[:3, 3], yaw_of_matrix(source_bin), np.zeros(3)
        )
        start2 = end1 + params.bridge_between_s
        target_bin_frame = MovingFrame(
            start2, target_bin[:3, 3], yaw_of_matrix(target_bin), np.zeros(3)
        )
        segment2 = source.palm_poses[boundary:end]
        bin_weights = yaw_phase_in(
            relative_poses(segment2, src_times[boundary:end], source_bin_frame)[:, :3, 3],
            params.bin_phase_in_m,
        )
        times2, poses2 = transform_segment(
            segment2,
            src_times[boundary:end],
            source_bin_frame,
            target_bin_frame,
            bin_weights,
            bin_weights,
        )
        decided = self._advance_to(runner, backend, end1 - params.bridge_dt_s)
        end2 = end1
        if not decided:
            last_q = joints1[-1]
            bridge_times2, bridge_poses2 = self._bridge(
                arm.forward(last_q), poses2[0], end1, start2
            )
            joints2 = self._joints(
                arm, np.concatenate([bridge_poses2, poses2]), last_q, rng, bridge_times2.size
            )
            self._send(
                backend,
                np.concatenate([bridge_times2, times2]),
                joints2,
                times2,
                source.hand_commands[boundary:end],
            )
            end2 = float(times2[-1])
            decided = self._advance_to(runner, backend, end2)
        if not decided:
            self._advance_to(runner, backend, end2 + params.settle_timeout_s)
        outcome = runner.outcome()
        provenance = {
            "source_demo": source.index,
            "source_object_type": source.object_type,
            "source_belt_speed_mps": round(source.belt_speed_mps, 5),
            "nn_distance": round(float(distance), 4),
            "subtask_boundaries": [[start, boundary], [boundary, end]],
            "subtask_annotation": source.annotation.as_dict(),
            "segment_times_s": [
                [round(float(times1[0]), 3), round(end1, 3)],
                [round(float(times2[0]), 3), round(end2, 3)],
            ],
            "reach_wait_s": round(bridge_start - now, 3),
            "moving_frame": params.moving_frame,
        }
        return RolloutResult(outcome, source, provenance)

    # -- EpisodeGenerator ----------------------------------------------------------------------
    def generate(self, job: EpisodeJob, backend: SimBackend) -> GenerationResult:
        """See :meth:`r2s2r_datagen.generator.EpisodeGenerator.generate`.

        Raises:
            EpisodeSkipped: ``no_source_demo`` when no source demo is eligible for the job.

        """
        started = time.perf_counter()
        deferred = self.deferred and isinstance(backend, SceneSnapshots)
        recorder = RecordingBackend(backend, job.recording, deferred=deferred)
        rng = np.random.default_rng(job.seed)
        failures: list[dict[str, Any]] = []
        tried: list[int] = []
        for attempt in range(1, self.params.max_attempts + 1):
            try:
                result = self.rollout(job, recorder, rng, tuple(tried))
            except SourceLibraryError as error:
                if attempt == 1:
                    raise EpisodeSkipped("no_source_demo", str(error)) from None
                break
            except IkError as error:
                failures.append({"reason": "unreachable_object", "detail": str(error)[:200]})
                continue
            except RolloutAbortedError as error:
                failures.append({"reason": error.reason, "detail": error.detail})
                continue
            tried.append(result.source.index)
            if result.outcome.success:
                provenance = {
                    "generator": "mimicgen",
                    "source_dataset": self.library.dataset_path,
                    **result.provenance,
                    "attempt": attempt,
                    "failures": failures,
                }
                episode = recorder.to_episode(
                    world_config_id=job.world_config_id,
                    behavior_source="mimicgen",
                    task=job.task,
                    object_type=job.plan.arrivals[0].instance.type_name,
                    belt_speed_mps=job.plan.belt_speed_mps,
                    success=True,
                    provenance=provenance,
                )
                return GenerationResult(
                    episode=episode,
                    outcome="success",
                    attempts=attempt,
                    timings=self._timings(started, recorder),
                    provenance=provenance,
                )
            failures.append({"reason": result.outcome.reason, "source_demo": result.source.index})
        attempts = len(failures)
        reasons = [f["reason"] for f in failures]
        unreachable = bool(reasons) and all(r == "unreachable_object" for r in reasons)
        return GenerationResult(
            episode=None,
            outcome=reasons[-1] if reasons else "no_source_demo",
            attempts=attempts,
            timings=self._timings(started, recorder),
            skipped=unreachable,
            detail="; ".join(f"{f['reason']}" for f in failures),
            provenance={"generator": "mimicgen", "failures": failures},
        )

    @staticmethod
    def _timings(started: float, recorder: RecordingBackend) -> dict[str, float]:
        return {"rollout": time.perf_counter() - started, "render": recorder.render_s}


GENERATION_OPTION_KEYS = frozenset(GenerationParams.model_fields)


def make_generator(options: Mapping[str, Any]) -> MimicGenGenerator:
    """Build the generator registered as behavior ``mimicgen`` (see :mod:`r2s2r_datagen.generator`).

    Options (from the configurations file's ``behavior_options.mimicgen``):
    ``config_path`` (default: the bundled ``config/datagen/mimicgen.yaml``),
    ``source_dataset`` (overrides the config's), and any :class:`GenerationParams` field.

    Raises:
        GeneratorUnavailableError: No source dataset configured, or it cannot be read, or
            no demonstration in it is usable.
        r2s2r_common.config.ConfigError: Unknown option or invalid value.

    """
    options = dict(options)
    config_path = options.pop("config_path", None)
    source_option = options.pop("source_dataset", None)
    unknown = sorted(set(options) - GENERATION_OPTION_KEYS)
    if unknown:
        raise ConfigError(
            f"behavior_options.mimicgen: unknown options {unknown}; expected config_path, "
            f"source_dataset or fields of GenerationParams {sorted(GENERATION_OPTION_KEYS)}"
        )
    config, base_dir = load_mimicgen_config(config_path)
    generation = parse_config(
        GenerationParams,
        {**config.generation.model_dump(mode="python"), **options},
        "behavior_options.mimicgen",
    )
    source = str(source_option) if source_option else config.source_dataset
    if not source:
        raise GeneratorUnavailableError(
            "generator for behavior 'mimicgen' not available: no source_dataset configured "
            "(set behavior_options.mimicgen.source_dataset or source_dataset in mimicgen.yaml)"
        )
    source_path = Path(source) if source_option else resolve(base_dir, source)
    return generator_from_dataset(
        source_path, config, resolve(base_dir, config.nominal_world_path), generation
    )


def generator_from_dataset(
    source_path: str | Path,
    config: MimicGenConfig,
    nominal_world_path: str | Path,
    generation: GenerationParams | None = None,
) -> MimicGenGenerator:
    """Build the generator from a source dataset path.

    Raises:
        GeneratorUnavailableError: Unreadable dataset or no usable demonstration in it.

    """
    from r2s2r_dataset import DatasetError

    nominal = load_world(nominal_world_path)
    try:
        library = SourceLibrary.from_dataset(source_path, nominal, config.annotation)
    except DatasetError as error:
        raise GeneratorUnavailableError(
            f"generator for behavior 'mimicgen' not available: source dataset: {error}"
        ) from None
    if not library.demos:
        raise GeneratorUnavailableError(
            f"generator for behavior 'mimicgen' not available: no usable demonstration in "
            f"{source_path} (skipped: {dict(library.skipped)})"
        )
    return MimicGenGenerator(library, generation or config.generation)
