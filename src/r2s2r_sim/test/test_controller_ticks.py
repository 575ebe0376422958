"""update_ticks (the simulator's batched control ticks) equals one update per tick, bit for bit."""

import copy

import numpy as np
import pytest
from r2s2r_sim.controllers import JointTrajectoryController

TIMESTEP_S = 0.002


@pytest.mark.parametrize("seed", range(200))
def test_update_ticks_matches_updates_one_by_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    joints = [f"j{i}" for i in range(int(rng.integers(1, 7)))]
    n = len(joints)
    controller = JointTrajectoryController(
        joints, -1.5 * np.ones(n), 1.5 * np.ones(n), latency_s=float(rng.choice([0.0, 0.0105]))
    )
    controller.reset(rng.uniform(-1.0, 1.0, n))
    now = float(rng.uniform(0.0, 3.0))
    for _ in range(int(rng.integers(1, 4))):  # queued commands, some replacing others mid-way
        points = int(rng.integers(1, 6))
        times = np.cumsum(rng.uniform(0.001, 0.05, points))
        if rng.random() < 0.2:
            times -= times[0]  # a first point at 0 s (zero-length first segment)
        velocities = rng.uniform(-2.0, 2.0, (points, n)) if rng.random() < 0.6 else None
        positions = rng.uniform(-2.0, 2.0, (points, n))  # some beyond the limits (clipped)
        controller.command(
            now + float(rng.uniform(0.0, 0.02)), joints, times, positions, velocities
        )
    reference = copy.deepcopy(controller)
    ticks = now + TIMESTEP_S * np.arange(int(rng.integers(1, 200)))
    rows = controller.update_ticks(ticks)
    expected = []
    for tick in ticks:
        if not reference.busy:
            break
        expected.append(reference.update(float(tick)).copy())
    assert rows.shape == (len(expected), n)
    assert rows.tobytes() == np.asarray(expected).reshape(-1, n).tobytes()
    assert controller.busy == reference.busy
    assert controller.desired.tobytes() == reference.desired.tobytes()
