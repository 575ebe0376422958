"""Live real/sim monitor benchmark: what the latent index adds to each inference.

The policy_inference node judges every inference's latent with the checkpoint's latent index
(r2s2r_policy.analysis.index) on the engine's worker thread, after the command was sent: it
never delays a command, but it is time the worker spends before it can start the next
inference. Measured here, on the reduced experiment's policy size (64 px images,
config/policy/cotrain.yaml with hidden_dims [512, 512, 512], untrained weights: the cost does
not depend on their values), temporal ensembling (the deployed execution), a stepped clock and
fresh observations so that every step infers:

1. side by side, interleaved (the order alternating): InferenceEngine.step without and with the
   monitor (LiveLikenessMonitor over an index of 2 x 2048 latents, as the node attaches it),
   p50/p99 of each and their differences;
2. the monitor call alone, timed inside those engine steps (the added latency itself, free of
   the model's jitter): p50/p99 of its wall time (which on a loaded machine includes the
   time other processes held the core) and of the thread's CPU time (the work it adds);
3. the index query alone at the width of the reduced preset's deployed policy (its latent
   also holds the tracked object and the palm features; this benchmark's policy has neither).

Run: source scripts/env.sh && python bench/bench_monitor.py [--inferences 2000]
The last line is one JSON object: {"benchmark": "monitor", "figures": [...]}.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import benchlib
import numpy as np
import torch
import yaml
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.analysis.index import LatentIndex, LiveLikenessMonitor
from r2s2r_policy.evaluation.baseline import robot_policy_spec, untrained_policy
from r2s2r_policy.inference.engine import InferenceConfig, InferenceEngine, StepStatus
from r2s2r_policy.models import Policy
from r2s2r_policy.spec import PolicySpec

from r2s2r_dataset import TRACKER_SOURCE, object_track_fields

HOME = np.array([HOME_POSITIONS[name] for name in ALL_JOINT_NAMES])
COTRAIN = benchlib.REPO / "config" / "policy" / "cotrain.yaml"
PER_DOMAIN = 2048
IMAGE_SETS = 8


def reduced_spec() -> PolicySpec:
    """The reduced preset's model on the robot's cameras and joints (no tracked object)."""
    params = yaml.safe_load(Path(COTRAIN).read_text())["policy"]["model"]["params"]
    params["hidden_dims"] = [512, 512, 512]
    return robot_policy_spec(64, 12, 10.0, params)


def deployed_latent_width(spec: PolicySpec) -> int:
    """Latent width of the reduced preset's policy with its tracked object and palm features."""
    full = spec.model_copy(
        update={
            "object_track_fields": object_track_fields(["cube", "cylinder", "block", "sphere"]),
            "object_track_source": TRACKER_SOURCE,
            "palm_object_features": True,
        }
    )
    params = full.model.params
    return 2 * int(params["num_keypoints"]) * len(full.images) + full.state_dim


class TimedMonitor:
    """Times each real_likeness call of the monitor it wraps (the engine's added work)."""

    def __init__(self, monitor: LiveLikenessMonitor) -> None:
        self.monitor = monitor
        self.durations_s: list[float] = []
        self.cpu_s: list[float] = []

    def real_likeness(self, latent: np.ndarray) -> float:
        started, cpu = time.perf_counter(), time.thread_time()
        value = self.monitor.real_likeness(latent)
        self.durations_s.append(time.perf_counter() - started)
        self.cpu_s.append(time.thread_time() - cpu)
        return value


def side_by_side(policy: Policy, index: LatentIndex, inferences: int) -> dict[str, np.ndarray]:
    """Engine steps without and with the monitor, interleaved; durations in ms."""
    now = [0.0]
    engine = InferenceEngine(
        policy, InferenceConfig(execution="temporal_ensemble"), clock=lambda: now[0]
    )
    monitor = TimedMonitor(LiveLikenessMonitor(index, notify=lambda: None))
    rng = np.random.default_rng(0)
    image_sets = [
        {
            key: rng.integers(0, 255, engine.spec.image_shape(key), dtype=np.uint8)
            for key in engine.spec.image_keys
        }
        for _ in range(IMAGE_SETS)
    ]
    times: dict[str, list[float]] = {"without": [], "with": []}
    warm_up = 20
    for step in range(2 * (inferences + warm_up)):
        pair, second = divmod(step, 2)
        # Alternate which of the pair goes first, so that drift and caches favour neither.
        with_monitor = (pair % 2 == 0) == (second == 1)
        engine.monitor = monitor if with_monitor else None
        now[0] += engine.dt_s
        for key, image in image_sets[step % IMAGE_SETS].items():
            engine.observe_image(key, image)
        engine.observe_joints(list(ALL_JOINT_NAMES), HOME + 0.01 * np.sin(step))
        engine.observe_belt_speed(0.1)
        started = time.perf_counter()
        result = engine.step()
        elapsed = time.perf_counter() - started
        if result.status != StepStatus.COMMANDED:
            raise RuntimeError(f"engine step did not command: {result.status} {result.detail}")
        if pair >= warm_up:
            times["with" if with_monitor else "without"].append(elapsed)
        if with_monitor:
            monitor.monitor.take()  # the node's executor drains it; not on the engine's thread
    # One call per warm-up pair, left out.
    return {
        "without": np.array(times["without"]) * 1e3,
        "with": np.array(times["with"]) * 1e3,
        "monitor": np.array(monitor.durations_s[warm_up:]) * 1e3,
        "monitor_cpu": np.array(monitor.cpu_s[warm_up:]) * 1e3,
    }


def query_alone(width: int, queries: int) -> np.ndarray:
    """Index query durations (ms) on 2 x 2048 latents of ``width``."""
    rng = np.random.default_rng(1)
    index = LatentIndex(
        rng.normal(size=(PER_DOMAIN, width)), rng.normal(0.3, 1.0, size=(PER_DOMAIN, width))
    )
    points = rng.normal(size=(64, width)).astype(np.float32)
    durations = []
    for step in range(queries + 20):
        started = time.perf_counter()
        index.query(points[step % len(points)])
        if step >= 20:
            durations.append(time.perf_counter() - started)
    return np.array(durations) * 1e3


def main() -> None:
    """Measure and print the table and the JSON line."""
    parser = benchlib.parser(__doc__)
    parser.add_argument(
        "--inferences", type=int, default=2000, help="Inferences timed with and without."
    )
    benchlib.add_threads(parser)
    args = parser.parse_args()
    if args.inferences < 100:
        parser.error(f"--inferences {args.inferences}: expected >= 100 for a p99")
    torch.set_num_threads(args.threads)
    spec = reduced_spec()
    policy = untrained_policy(spec, seed=0)
    rng = np.random.default_rng(2)
    width = policy.latent_dim
    index = LatentIndex(
        rng.normal(size=(PER_DOMAIN, width)), rng.normal(0.3, 1.0, size=(PER_DOMAIN, width))
    )
    measured = side_by_side(policy, index, args.inferences)
    deployed_width = deployed_latent_width(spec)
    alone = query_alone(deployed_width, args.inferences)

    def pct(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q))

    without, with_, call = measured["without"], measured["with"], measured["monitor"]
    cpu = measured["monitor_cpu"]
    note = f"{len(without)} inferences each, 64 px, [512]x3, {args.threads} thr, width {width}"
    rows = [
        ("step_without_p50", pct(without, 50), "ms", None, note),
        ("step_without_p99", pct(without, 99), "ms", None, "engine step, no monitor"),
        ("step_with_p50", pct(with_, 50), "ms", None, "engine step, monitor attached"),
        ("step_with_p99", pct(with_, 99), "ms", None, "interleaved with the above"),
        ("added_p50", pct(with_, 50) - pct(without, 50), "ms", None, "p50 with - p50 without"),
        ("added_p99", pct(with_, 99) - pct(without, 99), "ms", "<= 2", "p99 with - p99 without"),
        ("monitor_call_p50", pct(call, 50), "ms", None, f"inside the steps, {len(call)} calls"),
        ("monitor_call_p99", pct(call, 99), "ms", None, "wall time: with preemption by others"),
        ("monitor_calls_over_2ms", float(np.mean(call > 2.0)), "fraction", None, "wall time"),
        ("monitor_call_cpu_p50", pct(cpu, 50), "ms", None, "thread CPU time of the call"),
        ("monitor_call_cpu_p99", pct(cpu, 99), "ms", "<= 2", "the added work itself"),
        (
            "query_deployed_width_p99",
            pct(alone, 99),
            "ms",
            "<= 2",
            f"index query alone, width {deployed_width} (tracked object + palm features)",
        ),
        ("index_latents", 2 * PER_DOMAIN, "latents", None, "2 x 2048, float32"),
        ("load_average_1min", os.getloadavg()[0], "procs", None, "during the run (2 cores)"),
    ]
    figures = [
        benchlib.Figure(name, round(float(value), 4), unit, goal, note)
        for name, value, unit, goal, note in rows
    ]
    benchlib.report("monitor", figures)


if __name__ == "__main__":
    main()
