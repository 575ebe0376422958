"""The time rule of the policy contract, checked with oracle replays on the real twin.

Demonstrations are played on the twin in process (the human-like demonstrator); an oracle
"policy" replays a demonstration's recorded targets through the real :class:`InferenceEngine`
and in-process evaluation loop (the same code that runs a trained policy), on the same trial:

- time-indexed: the chunk of the demo frame at the time since the trial started;
- nearest-state: the chunk of the demo frame whose state (arm joints and the tracked object,
  what a policy reads) is nearest the measured one (the optimum an imitation loss finds for a
  policy that reads the robot state).

With chunks that follow the rule (step k = the target k + 1 steps after the observation), both
replays reproduce the demonstrations. Labelled the old way (step k = the target in force k steps
after the observation, executed one step later), the nearest-state replay stays at home: the
chunk's first target is the one already in force, so the closed loop has nothing to move to.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
from r2s2r_common.config import resolve_config_path
from r2s2r_datagen.config import RecordingConfig
from r2s2r_datagen.recording import RecordingBackend
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_policy.evaluation.in_process import make_perception, run_trial
from r2s2r_policy.evaluation.trials import TrialSpec
from r2s2r_policy.inference.engine import InferenceConfig, InferenceEngine
from r2s2r_policy.spec import ImageSpec, PolicySpec
from r2s2r_sim.cell_runtime import CellConfig, SimCell
from r2s2r_sim.demonstrator import run_demo_on_backend
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import load_world

from r2s2r_dataset import OBJECT_TRACK_KEY

pytestmark = pytest.mark.slow

TRIALS = 8
RATE_HZ = 10.0
CHUNK = 12
ARM = slice(0, 6)
OBJECT_WEIGHT_PER_M = 5.0  # 1 cm of object position counts as 0.05 rad of arm joints


@dataclass
class Demo:
    """A demonstration as a dataset holds it: joints, tracked object, targets in force."""

    joints: np.ndarray  # (T, 18)
    object_track: np.ndarray  # (T, F)
    targets: np.ndarray  # (T, 18): target in force at frame t


@pytest.fixture(scope="module")
def demos() -> dict[int, Demo]:
    twin = load_world(resolve_config_path("twin/default.yaml"))
    nominal = load_world(resolve_config_path("world/nominal.yaml"))
    recorder = RecordingBackend(MujocoBackend(), RecordingConfig(rate_hz=RATE_HZ))
    out = {}
    for seed in range(TRIALS):
        result = run_demo_on_backend(recorder, twin, seed, reach_world=nominal)
        assert result.outcome.success, f"demonstration {seed} failed: {result.outcome.reason}"
        episode = recorder.to_episode(
            world_config_id="twin",
            behavior_source="demo",
            task="pick_sort",
            object_type=result.plan.arrivals[0].instance.type_name,
            belt_speed_mps=result.plan.belt_speed_mps,
            success=True,
            provenance={},
        )
        out[seed] = Demo(
            episode.joint_pos_rad, episode.extra_obs[OBJECT_TRACK_KEY], episode.actions
        )
        fields = episode.metadata.object_track_fields
    recorder.inner.close()
    demos_fields.extend(fields)
    return out


demos_fields: list[str] = []


class OracleReplay:
    """A duck-typed policy that replays one demonstration's targets as chunks."""

    def __init__(
        self, spec: PolicySpec, pick_frame: Callable[[Mapping[str, np.ndarray]], int], offset: int
    ) -> None:
        self.spec = spec
        self.pick_frame = pick_frame
        self.offset = offset  # 1: the contract; 0: the old labels
        self.demo: Demo | None = None

    def predict_chunk(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        assert self.demo is not None
        frame = self.pick_frame(observation)
        targets = self.demo.targets
        rows = np.clip(np.arange(frame + self.offset, frame + self.offset + CHUNK), 0, None)
        return targets[np.minimum(rows, len(targets) - 1)].astype(np.float32)

    def predict_chunk_and_latent(
        self, observation: Mapping[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.predict_chunk(observation), np.zeros(1, dtype=np.float32)


def replay(demos: dict[int, Demo], mode: str, offset: int) -> list[str]:
    """Replay every demonstration; return the trial outcome reasons."""
    twin = load_world(resolve_config_path("twin/default.yaml"))
    nominal = load_world(resolve_config_path("world/nominal.yaml"))
    cell = SimCell(MujocoBackend(), twin, nominal, CellConfig(render_depth=True))
    spec = PolicySpec(
        images=[ImageSpec(key="head_camera_rgb", height_px=16, width_px=16)],
        joint_names=list(ALL_JOINT_NAMES),
        action_names=list(ALL_JOINT_NAMES),
        use_belt_speed=False,
        object_track_fields=demos_fields,
        object_track_source="object_tracker",
        chunk_length=CHUNK,
        control_rate_hz=RATE_HZ,
    )
    holder: dict[str, Demo] = {}

    def time_indexed(_: Mapping[str, np.ndarray]) -> int:
        return round(cell.backend.time_s * RATE_HZ)

    def nearest_state(observation: Mapping[str, np.ndarray]) -> int:
        demo = holder["demo"]
        joints = np.linalg.norm(demo.joints[:, ARM] - observation["joint_pos_rad"][ARM], axis=1)
        track = observation[OBJECT_TRACK_KEY]
        position = np.linalg.norm(demo.object_track[:, :3] - track[:3], axis=1)
        return int(np.argmin(joints + OBJECT_WEIGHT_PER_M * position))

    oracle = OracleReplay(spec, time_indexed if mode == "time" else nearest_state, offset)
    engine = InferenceEngine(oracle, InferenceConfig(), clock=lambda: cell.time_s)  # type: ignore[arg-type]
    perception = make_perception()
    successes = []
    try:
        for seed in range(TRIALS):
            holder["demo"] = oracle.demo = demos[seed]
            record = run_trial(cell, engine, TrialSpec(seed, seed, "nominal"), perception)
            successes.append(record.reason)
    finally:
        cell.close()
    return successes


def test_time_indexed_replay_of_the_demonstrations_succeeds(demos: dict[int, Demo]) -> None:
    reasons = replay(demos, "time", offset=1)
    assert reasons.count("success") >= 7, reasons


def test_nearest_state_replay_succeeds_with_chunks_that_follow_the_rule(
    demos: dict[int, Demo],
) -> None:
    reasons = replay(demos, "nearest", offset=1)
    assert reasons.count("success") >= 7, reasons


def test_nearest_state_replay_of_targets_in_force_stays_at_home(demos: dict[int, Demo]) -> None:
    # The old labels: chunk step 0 is the target already in force at the observation. A state
    # that copies the joints it sees is a fixed point of the closed loop: the arm never leaves.
    reasons = replay(demos, "nearest", offset=0)
    assert reasons.count("success") <= 1, reasons
