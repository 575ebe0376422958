"""Test-only generator: a scripted "teleport pick" (never registered in production).

It plays the trial on the backend through a RecordingBackend: waits for the object to arrive,
moves the arm a little (so the actions change), then teleports the object into its target bin
(or, for the seeds chosen to fail, onto the floor) and lets the task's success predicate judge.
Options make chosen episodes hang, crash their worker, or be unreachable, to test the runner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from r2s2r_datagen.generator import EpisodeJob, GenerationResult
from r2s2r_datagen.recording import RecordingBackend
from r2s2r_description.cell import BIN_WALL_THICKNESS_M
from r2s2r_description.robot import ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_sim.backend import SimBackend
from r2s2r_sim.task import TrialRunner
from r2s2r_world.kinematics import IkError

STEPS_PER_CALL = 25
FACTORY = "datagen_test_generators:make_scripted_generator"


class ScriptedPickGenerator:
    def __init__(self, options: Mapping[str, Any]) -> None:
        self.hang_episodes = set(options.get("hang_episodes", []))
        self.crash_episodes = set(options.get("crash_episodes", []))
        self.unreachable_episodes = set(options.get("unreachable_episodes", []))
        self.fail_every = int(options.get("fail_every", 0))  # seed % fail_every == 1 fails
        self.slow_s = float(options.get("slow_s", 0.0))

    def generate(self, job: EpisodeJob, backend: SimBackend) -> GenerationResult:
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
            ARM_JOINT_NAMES, [0.25, 0.5], [home + 0.05, home + np.array([0.1, 0.05, 0, 0, 0, 0])]
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
    return ScriptedPickGenerator(options)
