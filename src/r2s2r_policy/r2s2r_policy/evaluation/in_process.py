"""Fast evaluation without ROS: policy, the twin's simulated cell and trial judge in one loop.

The in-process evaluator runs the same trials (seeds, conditions; :func:`trial_plan`) on the
same cell the real twin serves (:class:`r2s2r_sim.cell_runtime.SimCell` over the twin world:
same camera model with its intrinsics, distortion and blur, same controllers and latency, same
:class:`~r2s2r_sim.task.TrialRunner` judging success) and feeds the policy through the same
observation pipeline as the ROS path:

- camera frames go to :meth:`InferenceEngine.observe_image` (resized to the spec like the node);
- joint positions at the control rate, as ``/joint_states``;
- belt speed and object tracks from the graph's perception run in process
  (:class:`r2s2r_belt.perception.CellPerception`: the ``belt_speed`` node's encoder + optical
  flow + Kalman filter and the ``object_tracker`` node's detector + tracker, configured from the
  same ``config/nodes/{belt_speed,object_tracker}.yaml`` files and knowing the cell only as its
  ``camera_info`` and ``/tf_static`` state it), fed with the cell's encoder and head RGB-D
  frames;
- chunks pass the engine's safety filter and go to the cell split per controller, as the
  node's JointTrajectory messages do.

What differs from the ROS path: the engine steps synchronously on simulated time (exactly
every control period, no inference or transport latency; on the graph these add a few ms), and
the simulation runs as fast as the CPU allows. Like the twin, this evaluator reads the twin's
hidden world file: it *is* a twin instance, not part of the pipeline under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from r2s2r_belt.estimates import FusedSpeed
from r2s2r_belt.perception import CellKnowledge, CellPerception, perception_config
from r2s2r_common.config import resolve_config_path
from r2s2r_dataset.object_track import TrackView
from r2s2r_description.cameras import HEAD
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_sim.backend_config import make_backend
from r2s2r_sim.cell_runtime import CellConfig, ControlStep, SimCell
from r2s2r_world.world import load_world

from r2s2r_dataset import IMAGE_KEY_OF_CAMERA

from ..checkpoint import load_checkpoint
from ..inference.commands import ActionCommand
from ..inference.engine import InferenceConfig, InferenceEngine
from ..models import Policy
from ..spec import RobotSpec
from .report import EvaluationReport
from .trials import (
    NOMINAL,
    EvaluationConfig,
    TrialRecord,
    TrialSpec,
    policy_fault_reason,
    trace_file_name,
    trial_plan,
)


def make_perception(
    knowledge: CellKnowledge | None = None,
    belt_config_path: str | Path = "nodes/belt_speed.yaml",
    tracker_config_path: str | Path = "nodes/object_tracker.yaml",
) -> CellPerception:
    """Build the evaluation graph's perception (relative paths resolve against ``config/``).

    Args:
        knowledge: What the cell publishes (camera_info, ``/tf_static``, roller radius):
            :meth:`CellKnowledge.from_artifact` for a grounded cell, as the pipeline runs it;
            default: a cell before grounding (the nominal world).
        belt_config_path: ``belt_speed`` parameters.
        tracker_config_path: ``object_tracker`` parameters.

    """
    return CellPerception(
        perception_config(
            knowledge or CellKnowledge.ungrounded(), belt_config_path, tracker_config_path
        )
    )


def _perceive(
    step: ControlStep, perception: CellPerception
) -> tuple[list[TrackView] | None, float, FusedSpeed | None]:
    """Feed a control step to perception; the tracks of a new head frame (and its time), speed.

    As the ``belt_speed`` and ``object_tracker`` nodes: the encoder reading, then the head
    camera's frame (RGB-D), then the fused speed at the step's time.
    """
    tracks, tracks_time_s = None, 0.0
    if step.encoder_angle_rad is not None:
        perception.add_encoder(step.time_s, step.encoder_angle_rad)
    for frame in step.frames:
        if frame.camera_name == HEAD.name:  # the belt-speed vision and the tracker see the head
            tracks = perception.add_head_frame(frame.time_s, frame.rgb, frame.depth_m)
            tracks_time_s = frame.time_s
    return tracks, tracks_time_s, perception.belt_speed(step.time_s)


def run_trial(
    cell: SimCell,
    engine: InferenceEngine,
    trial: TrialSpec,
    perception: CellPerception,
    on_command: Callable[[float, ActionCommand], None] | None = None,
    on_step: Callable[[SimCell, ControlStep], None] | None = None,
    settle_s: float = 0.0,
    inference_delay_s: float = 0.0,
) -> TrialRecord:
    """Reset the cell, run one trial with the policy until the judge decides, and record it.

    Args:
        cell: The simulated cell (rendering head depth when the policy reads object tracks).
        engine: Engine whose clock is ``cell.time_s`` and whose ``publish`` is unused here.
        trial: Seed and condition.
        perception: Belt speed and object tracking (kept across trials, like the running nodes).
        on_command: Called with (cell time, command) for every command sent (tests, logging).
        on_step: Called with the cell and every control step (diagnostics that read the
            twin's truth, e.g. ``bench/probe_policy_rollouts.py``; never a policy input).
        settle_s: Cell seconds the reset cell idles (sensed, the policy off) before the start.
        inference_delay_s: Cell seconds from a due inference to the engine's step (and its
            command): the graph's perception and inference time; the inputs that arrive
            meanwhile (joint states) are the policy's, as on the graph.

    Returns:
        The trial's record.

    """
    started_wall = time.perf_counter()
    cell.reset(0)  # /trial/reset: robot home, belt clear
    settle_until_s = cell.time_s + settle_s - 1e-9
    while cell.time_s < settle_until_s:  # the idle cell, sensed as the running nodes sense it
        _perceive(cell.step_control(), perception)
    condition = "" if trial.condition == NOMINAL else trial.condition
    cell.start_trial(trial.seed, condition)
    engine.reset()
    engine.rearm()  # each trial starts armed: the operator re-arms between trials
    if engine.trace is not None:
        engine.trace.clear()
    names = list(ALL_JOINT_NAMES)
    commands = 0
    next_tick_s = cell.time_s
    limit_s = cell.world.task.trial_timeout_s + 10.0
    trial_start_s = cell.time_s
    infer_at_s: float | None = None  # an inference due, delayed as on the graph
    while True:
        step = cell.step_control()
        if on_step is not None:
            on_step(cell, step)
        engine.observe_joints(names, step.joint_positions, step.time_s)
        tracks, tracks_time_s, speed = _perceive(step, perception)
        if tracks is not None:
            engine.observe_object_tracks(tracks, tracks_time_s)
        if speed is not None and step.encoder_angle_rad is not None:
            engine.observe_belt_speed(speed.speed_mps, step.time_s)
        for frame in step.frames:
            key = IMAGE_KEY_OF_CAMERA.get(frame.camera_name)
            if key in engine.spec.image_keys:
                engine.observe_image(key, frame.rgb, frame.time_s)
        if step.outcome is not None:
            outcome = step.outcome
            if engine.trace is not None:
                engine.trace.metadata.update(
                    trial_index=trial.index, seed=trial.seed, started_at_s=trial_start_s
                )
            stop = engine.safety_stop
            return TrialRecord(
                index=trial.index,
                seed=trial.seed,
                condition=trial.condition,
                success=outcome.success,
                reason=policy_fault_reason(
                    outcome.success, outcome.reason, commands, "" if stop is None else str(stop)
                ),
                object_type=outcome.object_type,
                duration_s=outcome.duration_s,
                wall_s=time.perf_counter() - started_wall,
                commands_sent=commands,
                started_at_s=outcome.time_s - outcome.duration_s,
                safety_stop="" if stop is None else str(stop),
            )
        if step.time_s - trial_start_s > limit_s:
            raise RuntimeError(
                f"trial {trial.index} (seed {trial.seed}) undecided after {limit_s:.0f} s of cell "
                "time: the trial judge never ruled"
            )
        if engine.config.trigger == "images":
            due = engine.observation_ready() or step.time_s + 1e-9 >= next_tick_s
        else:
            due = step.time_s + 1e-9 >= next_tick_s
        if due and infer_at_s is None:
            # As the worker thread: on a new frame set, else after 1.5 periods without one
            # (timer: every period).
            wait_s = engine.period_s * (1.5 if engine.config.trigger == "images" else 1.0)
            next_tick_s = (
                step.time_s if engine.config.trigger == "images" else next_tick_s
            ) + wait_s
            infer_at_s = step.time_s + inference_delay_s
        if infer_at_s is not None and step.time_s + 1e-9 >= infer_at_s:
            infer_at_s = None
            result = engine.step()
            if result.command is not None:
                for controller, (joints, positions) in result.command.by_controller().items():
                    cell.command(controller, joints, result.command.times_s.tolist(), positions)
                commands += 0 if result.command.hold else 1
                if on_command is not None:
                    on_command(step.time_s, result.command)


def evaluate_in_process(
    policy: Policy | str | Path,
    config: EvaluationConfig | None = None,
    twin_config_path: str | Path = "twin/default.yaml",
    nominal_world_path: str | Path = "world/nominal.yaml",
    inference: InferenceConfig | None = None,
    belt_config_path: str | Path = "nodes/belt_speed.yaml",
    tracker_config_path: str | Path = "nodes/object_tracker.yaml",
    grounding_artifact: str | Path | None = None,
    robot_spec: RobotSpec | None = None,
    progress: Callable[[TrialRecord], None] | None = None,
    on_command: Callable[[TrialSpec, float, ActionCommand], None] | None = None,
    on_step: Callable[[TrialSpec, SimCell, ControlStep], None] | None = None,
    trace_dir: str | Path | None = None,
    trace_images: bool = False,
    trace_extras: Callable[[TrialSpec], dict[str, np.ndarray]] | None = None,
) -> EvaluationReport:
    """Evaluate a policy on the twin's cell in-process (see the module docstring).

    Args:
        policy: A loaded policy, or a checkpoint directory.
        config: Protocol (default: 24 nominal + 26 shifted trials).
        twin_config_path: The twin's world (relative: against ``config/``); any world file
            (e.g. ``world/nominal.yaml`` to evaluate in the nominal simulator).
        nominal_world_path: The published (nominal) world.
        inference: Engine settings (stale limit, rate, velocity scale, execution).
        belt_config_path: ``belt_speed`` parameters.
        tracker_config_path: ``object_tracker`` parameters.
        grounding_artifact: The cell is grounded with this artifact (its perception uses the
            artifact's camera_info, poses and roller radius, as ``real_deploy
            grounding_artifact:=...``); None: a cell before grounding (the published nominal
            world). A twin that is a world file of the simulator (the capacity check in the
            nominal world) is its own knowledge when ``twin_config_path`` equals
            ``nominal_world_path``.
        robot_spec: When given, a checkpoint is refused unless it matches it.
        progress: Called after each trial with its record.
        on_command: Called with (trial, cell time, command) for every command sent.
        on_step: Called with (trial, cell, control step) every control period (diagnostics).
        trace_dir: Write each trial's inference trace there (``trial_NNN.npz``,
            :mod:`r2s2r_policy.inference.trace`).
        trace_images: The traces keep the camera images the policy read.
        trace_extras: Called after each trial; its arrays are saved with the trial's trace
            (:meth:`~r2s2r_policy.inference.trace.InferenceTrace.attach`).

    Returns:
        The report (``mode='in_process'``).

    Raises:
        r2s2r_policy.spec.SpecMismatchError: A checkpoint that does not match ``robot_spec``.
        r2s2r_common.config.ConfigError: A world or belt config that cannot be loaded.

    """
    config = config or EvaluationConfig()
    name = "policy"
    if not isinstance(policy, Policy):
        name = str(policy)
        policy = load_checkpoint(policy, expected=robot_spec).policy
    twin_path = resolve_config_path(twin_config_path)
    cell = SimCell(
        make_backend(),
        load_world(twin_path),
        load_world(resolve_config_path(nominal_world_path)),
        CellConfig(render_depth=policy.spec.uses_object_track),
    )
    if grounding_artifact:
        knowledge = CellKnowledge.from_artifact(grounding_artifact, nominal_world_path)
    elif twin_path.resolve() == resolve_config_path(nominal_world_path).resolve():
        knowledge = CellKnowledge.exact(load_world(twin_path))
    else:
        knowledge = CellKnowledge.ungrounded(nominal_world_path)
    perception = make_perception(knowledge, belt_config_path, tracker_config_path)
    engine = InferenceEngine(policy, inference or InferenceConfig(), clock=lambda: cell.time_s)
    if trace_dir is not None:
        engine.new_trace(keep_images=trace_images)
    report = EvaluationReport(
        policy=name,
        mode="in_process",
        config=config,
        metadata={
            "twin_config": twin_path.name,
            "perception_knowledge": knowledge.source,
            "engine_period_s": engine.period_s,
            "execution": engine.config.execution,
            "executed_steps": engine.config.executed_steps,
        },
    )
    started = time.perf_counter()
    try:
        for trial in trial_plan(config):
            hook = None
            if on_command is not None:
                hook = lambda t, c, trial=trial: on_command(trial, t, c)  # noqa: E731
            step_hook = None
            if on_step is not None:
                step_hook = lambda c, s, trial=trial: on_step(trial, c, s)  # noqa: E731
            record = run_trial(
                cell,
                engine,
                trial,
                perception,
                hook,
                step_hook,
                config.settle_s,
                config.in_process_inference_delay_s,
            )
            if trace_dir is not None and engine.trace is not None:
                for key, values in (trace_extras(trial) if trace_extras else {}).items():
                    engine.trace.attach(key, values)
                engine.trace.save(Path(trace_dir) / trace_file_name(trial.index))
            report.records.append(record)
            if progress is not None:
                progress(record)
    finally:
        cell.close()
    report.wall_s = time.perf_counter() - started
    stats = engine.stats()
    report.metadata["safety_interventions"] = stats.interventions
    report.metadata["inference_latency_p50_ms"] = stats.latency_p50_s * 1e3
    return report
