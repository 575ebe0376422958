"""Rollouts for analysis: what the policy saw, what it did and what happened, per trial.

:func:`record_rollouts` runs the evaluation protocol in process (the same trials, seeds and
engine as :func:`~r2s2r_policy.evaluation.in_process.evaluate_in_process`) and writes per trial
one inference trace (:mod:`r2s2r_policy.inference.trace`) that keeps the camera images and the
policy's latent of every step, plus two arrays from the twin's truth, read only for analysis
(never a policy input):

- ``extra_cell_time_s`` / ``extra_cell_joint_pos``: the arm and hand at the control rate (the
  style metrics' trajectory);
- ``extra_events_s``: the times of the trial's events (:data:`EVENTS`, NaN when it never
  happened) for the first object: first touch by the hand, grasp (two or more hand parts in
  contact), lift (above the task's lift height), release (no hand contact after the lift) and
  in a bin; ``extra_fingers_at_grasp``: the most of thumb, index, middle and ring touching the
  object at once while the hand closes on it (:data:`CONTACT_COUNT_WINDOW_S` from the grasp, or
  until the lift).

:func:`load_rollout` reads one back with those arrays named.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from r2s2r_sim.cell_runtime import ControlStep, SimCell
from r2s2r_sim.task import bin_containing, world_to_frame

from ..analysis.embeddings import AnalysisInputError
from ..inference.engine import InferenceConfig
from ..inference.trace import LoadedTrace, load_trace
from ..models import Policy
from ..models.base import policy_fingerprint
from .in_process import evaluate_in_process
from .report import EvaluationReport
from .trials import EvaluationConfig, TrialRecord, TrialSpec, trace_file_name

EVENTS = ("touch", "grasp", "lift", "release", "bin")
"""Events of a trial, in the order they happen in a successful pick."""
FINGERS = ("thumb", "index", "middle", "ring")
"""Hand parts counted as fingers (body names contain them)."""
HAND_PARTS = ("palm", *FINGERS)
CONTACT_COUNT_WINDOW_S = 0.5
"""Seconds after the grasp event over which the fingers in contact are counted: the grasp
event is the first instant two hand parts touch, before the other fingers have closed.

Not the style analysis' :data:`~r2s2r_policy.analysis.style.CLOSURE_SEARCH_WINDOW_S` (1 s),
though both start at the grasp event: this one bounds a contact count taken while the twin
runs (stored in each trace as ``extra_fingers_at_grasp``; the count also stops at the lift),
that one bounds a search of the recorded joints for the most closed hand afterwards, and the
joints keep flexing after the fingers have reached the object. Two measurements, two windows;
changing either would change recorded rollouts or reported styles."""


def _hand_part(body: str) -> str | None:
    for part in HAND_PARTS:
        if part in body:
            return part
    return None


@dataclass
class TrialEventRecorder:
    """Collects one trial's joint trajectory and events from the twin's truth (``on_step``)."""

    times_s: list[float] = field(default_factory=list)
    joint_positions: list[np.ndarray] = field(default_factory=list)
    events_s: dict[str, float] = field(default_factory=dict)
    fingers_at_grasp: int = 0
    _first: str | None = None

    def clear(self) -> None:
        """Start a new trial."""
        self.times_s, self.joint_positions, self.events_s = [], [], {}
        self.fingers_at_grasp, self._first = 0, None

    def __call__(self, cell: SimCell, step: ControlStep) -> None:
        """Record a control step (an ``on_step`` hook of the in-process evaluator)."""
        self.times_s.append(step.time_s)
        self.joint_positions.append(np.asarray(step.joint_positions, dtype=np.float32))
        poses = {n: p for n, p in cell.backend.object_poses().items() if p.active}
        if self._first is None and poses:
            self._first = min(poses)  # objects are named in arrival order
        if self._first is None or self._first not in poses:
            return
        name, pose, now = self._first, poses[self._first], step.time_s
        parts = set()
        for contact in cell.backend.contacts():
            if name in (contact.body1, contact.body2):
                other = contact.body2 if contact.body1 == name else contact.body1
                part = _hand_part(other)
                if part is not None:
                    parts.add(part)
        events = self.events_s
        if parts and "touch" not in events:
            events["touch"] = now
        if len(parts) >= 2 and "grasp" not in events:
            events["grasp"] = now
        if (
            "grasp" in events
            and now - events["grasp"] <= CONTACT_COUNT_WINDOW_S
            and "lift" not in events
        ):
            self.fingers_at_grasp = max(self.fingers_at_grasp, len(parts & set(FINGERS)))
        world = cell.world
        belt = world.belt.pose.to_pose().matrix()
        height = world.objects[pose.type_name].size_m[2] / 2.0
        above = world_to_frame(belt, pose.position_m)[2] - height
        if above > world.task.lift_height_m and "lift" not in events:
            events["lift"] = now
        if "lift" in events and not parts and "release" not in events:
            events["release"] = now
        if "bin" not in events and bin_containing(world, pose.position_m) is not None:
            events["bin"] = now

    def arrays(self) -> dict[str, np.ndarray]:
        """Return the trial's arrays to attach to its trace."""
        return {
            "cell_time_s": np.asarray(self.times_s, dtype=np.float64),
            "cell_joint_pos": np.asarray(self.joint_positions, dtype=np.float32),
            "events_s": np.array([self.events_s.get(e, math.nan) for e in EVENTS]),
            "fingers_at_grasp": np.array(self.fingers_at_grasp),
        }


def record_rollouts(
    policy: Policy,
    out_dir: str | Path,
    config: EvaluationConfig,
    twin_config_path: str | Path,
    inference: InferenceConfig | None = None,
    grounding_artifact: str | Path | None = None,
    nominal_world_path: str | Path = "world/nominal.yaml",
    progress: Callable[[TrialRecord], None] | None = None,
) -> EvaluationReport:
    """Run the protocol in process and keep every trial's rollout in ``out_dir``.

    Files: ``trial_NNN.npz`` (see the module docstring). Returns the evaluation report (the
    same outcomes the in-process evaluator gives for these trials).
    """
    recorder = TrialEventRecorder()

    def on_step(trial: TrialSpec, cell: SimCell, step: ControlStep) -> None:
        if not recorder.times_s or step.time_s < recorder.times_s[-1]:
            recorder.clear()
        recorder(cell, step)

    identity = np.array(policy_fingerprint(policy))

    def extras(trial: TrialSpec) -> dict[str, np.ndarray]:
        arrays = recorder.arrays()
        recorder.clear()
        return {**arrays, "policy_fingerprint": identity}

    return evaluate_in_process(
        policy,
        config,
        twin_config_path=twin_config_path,
        nominal_world_path=nominal_world_path,
        inference=inference,
        grounding_artifact=grounding_artifact,
        progress=progress,
        on_step=on_step,
        trace_dir=out_dir,
        trace_images=True,
        trace_extras=extras,
    )


@dataclass(frozen=True)
class Rollout:
    """One recorded trial: its trace, with the observations of the steps the policy ran."""

    trace: LoadedTrace
    path: Path

    @property
    def trial_index(self) -> int:
        """The protocol's trial index."""
        return int(self.trace.metadata["trial_index"])

    def ran(self) -> np.ndarray:
        """Return the indices of the steps where the policy ran (it sent a chunk)."""
        return np.flatnonzero(self.trace.commanded())

    def observations(self, keys: list[str]) -> dict[str, np.ndarray]:
        """Return the observations of :meth:`ran` steps, as batch arrays of ``keys``.

        Raises:
            AnalysisInputError: The trace lacks an input (e.g. kept no images).

        """
        steps = self.ran()
        arrays = self.trace.arrays
        out: dict[str, np.ndarray] = {}
        for key in keys:
            if key in self.trace.image_keys:
                out[key] = self.trace.images(key)[steps]
            elif key == "joint_pos_rad":
                out[key] = arrays["joint_pos"][steps]
            elif key == "belt_speed_mps":
                out[key] = arrays["belt_speed"][steps].reshape(-1, 1)
            elif key == "object_track":
                out[key] = arrays["object_track"][steps]
            else:
                raise AnalysisInputError(f"{self.path}: the rollout did not keep {key!r}")
        return out

    def events(self) -> dict[str, float]:
        """Event times (cell seconds; NaN: never happened)."""
        values = self.trace.extra("events_s")
        return {name: float(v) for name, v in zip(EVENTS, values, strict=True)}


def load_rollout(path: str | Path, policy: Policy | None = None) -> Rollout:
    """Read a rollout written by :func:`record_rollouts`.

    Args:
        path: The trial file.
        policy: When given, the rollout must have been recorded with a policy of the same
            inputs and latent width (a rollout of another policy is refused).

    Raises:
        AnalysisInputError: Not a rollout (no images or events) or of another policy.

    """
    trace = load_trace(path)
    rollout = Rollout(trace, Path(path))
    if "extra_events_s" not in trace.arrays or not trace.image_keys:
        raise AnalysisInputError(f"{path}: an inference trace, not an analysis rollout")
    if policy is not None:
        recorded = str(trace.extra("policy_fingerprint"))
        if recorded != policy_fingerprint(policy):
            raise AnalysisInputError(
                f"{path}: a rollout of another policy (weights {recorded}, this policy's "
                f"{policy_fingerprint(policy)})"
            )
    return rollout


def rollout_paths(directory: str | Path, count: int) -> list[Path]:
    """Return the trial files of a rollout folder, in trial order."""
    return [Path(directory) / trace_file_name(index) for index in range(count)]
