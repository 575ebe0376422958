"""Generation inputs for tests: a scripted test generator and a tiny configurations file.

The scripted generator (never registered in production) is a "teleport pick": it plays the trial
on the backend through a RecordingBackend, waits for the object to arrive, moves the arm a little
(so the actions change), then teleports the object into its target bin (or, for the seeds chosen
to fail, onto the floor) and lets the task's success predicate judge. Options make chosen
episodes hang, crash their worker, or be unreachable, to test the runner. Generation workers
import it by name (:data:`FACTORY`), in whatever process they run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from r2s2r_datagen.generator import EpisodeJob, GenerationResult
from r2s2r_datagen.recording import RecordingBackend
from r2s2r_description.cell import BIN_WALL_THICKNESS_M
from r2s2r_description.robot import ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_sim.backend import SimBackend
from r2s2r_sim.task import TrialRunner
from r2s2r_world.kinematics import IkError

STEPS_PER_CALL = 25
FACTORY = "r2s2r_testing.generation:make_scripted_generator"
"""The scripted generator as a generator override names it (``behavior=FACTORY``)."""
OVERRIDES = [f"planner={FACTORY}", f"mimicgen={FACTORY}"]
"""Generator overrides that run the scripted generator for both behaviors."""
ARTIFACT_OVERRIDES = {
    "belt": {"speed_mps": 0.104},
    "cameras": {"head": {"fx_px": 123.0, "fy_px": 122.5}},
}
"""World overrides of the grounding artifact that :func:`write_configurations` points to."""


class ScriptedPickGenerator:
    """The scripted teleport pick (options: hang/crash/unreachable episodes, fail_every, slow_s)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.hang_episodes = set(options.get("hang_episodes", []))
        self.crash_episodes = set(options.get("crash_episodes", []))
        self.unreachable_episodes = set(options.get("unreachable_episodes", []))
        self.fail_every = int(options.get("fail_every", 0))  # seed % fail_every == 1 fails
        self.slow_s = float(options.get("slow_s", 0.0))

    def generate(self, job: EpisodeJob, backend: SimBackend) -> GenerationResult:
        """Play one episode's trial on ``backend``; the episode only when it succeeded."""
        started = time.perf_counter()
        if job.episode_index in self.hang_episodes:
            time.sleep(3600.0)
        if job.episode_index in self.crash_episodes:
            os._exit(13)
        if job.episode_index in self.unreachable_episodes:
            raise IkError("scripted: target outside the workspace")
        if self.slow_s:
            time.sleep(self.slow_s)
        recorder = RecordingBackend(backend, job.recording)
        runner = TrialRunner(recorder, job.world, job.plan)
        runner.start()
        arrival = job.plan.arrivals[0]
        name = arrival.instance.name
        while not recorder.object_poses()[name].active:
            runner.step(STEPS_PER_CALL)
        home = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
        recorder.command_trajectory(
            ARM_JOINT_NAMES,
            [0.25, 0.5],
            np.stack([home + 0.05, home + np.array([0.1, 0.05, 0, 0, 0, 0])]),
        )
        for _ in range(10):
            runner.step(STEPS_PER_CALL)
        fail = self.fail_every > 0 and job.seed % self.fail_every == 1
        obj = job.world.objects[arrival.instance.type_name]
        if fail:
            target = np.array([0.9, 0.8, obj.size_m[2] / 2.0 + 0.02])  # on the floor
        else:
            bin_pose = job.world.bins[obj.target_bin].pose.to_pose().matrix()
            local = np.array([0.0, 0.0, BIN_WALL_THICKNESS_M + obj.size_m[2] / 2.0 + 0.003, 1.0])
            target = (bin_pose @ local)[:3]
        recorder.spawn_object(name, target)
        outcome = None
        for _ in range(200):
            outcome = runner.step(STEPS_PER_CALL)
            if outcome is not None:
                break
        outcome = outcome or runner.outcome()
        episode = None
        if outcome.success:
            episode = recorder.to_episode(
                world_config_id=job.world_config_id,
                behavior_source=job.behavior,
                task=job.task,
                object_type=arrival.instance.type_name,
                belt_speed_mps=job.plan.belt_speed_mps,
                success=True,
                provenance={"generator": "scripted_teleport_pick"},
            )
        return GenerationResult(
            episode=episode,
            outcome=outcome.reason,
            attempts=1,
            timings={"sim": time.perf_counter() - started, "render": recorder.render_s},
        )


def make_scripted_generator(options: Mapping[str, Any]) -> ScriptedPickGenerator:
    """Make the scripted generator (the factory that :data:`FACTORY` names)."""
    return ScriptedPickGenerator(options)


def write_configurations(
    path: Path, nominal_world_path: Path, behavior_options: dict[str, Any] | None = None
) -> Path:
    """Write a configurations file of the four configurations at 16 px; return ``path``.

    Its grounding artifact is ``artifact.yaml`` next to it (write :data:`ARTIFACT_OVERRIDES`
    there for the grounded configurations to be available).
    """
    data = {
        "schema_version": 1,
        "task": "pick_sort",
        "nominal_world_path": str(nominal_world_path),
        "grounding_artifact_path": str(path.parent / "artifact.yaml"),
        "recording": {"rate_hz": 10.0, "image_width_px": 16, "image_height_px": 16},
        "configurations": [
            {"name": "grounded_mimicgen", "world": "grounded", "behavior": "mimicgen"},
            {"name": "grounded_planner", "world": "grounded", "behavior": "planner"},
            {"name": "nominal_mimicgen", "world": "nominal", "behavior": "mimicgen"},
            {"name": "nominal_planner", "world": "nominal", "behavior": "planner"},
        ],
        "behavior_options": behavior_options or {},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path
