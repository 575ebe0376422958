"""Motion-style metrics of a joint trajectory, and a planner-style reference to compare with.

The metrics separate a human's style from a motion planner's:

* ``normalized_jerk``: dimensionless jerk of the palm path per movement,
  ``sqrt(½ ∫|d³x/dt³|² dt · D⁵ / L²)`` (≈ 19 for an ideal minimum-jerk reach; larger for
  trapezoidal timing, whose acceleration steps).
* ``speed_peak_to_mean``: palm peak speed / mean speed per movement (1.875 for minimum jerk,
  ≤ 1.5 for a trapezoid that spends a third of its time accelerating; → 1 for time-optimal
  bang-coast-bang with short ramps).
* ``plateau_fraction``: share of movement time above 90 % of the peak speed (a bell spends
  ~ 20 % there; a trapezoid's cruise much more).
* ``joint_straightness`` / ``cartesian_straightness``: path length / chord length per
  movement, in joint space and for the palm in Cartesian space. A planner interpolating
  straight in joint space has joint straightness 1 and curved palm paths; a human has nearly
  straight (or deliberately arced) palm paths and curved joint paths.
* ``hand_closure_fraction``: share of the 11 flexion joints (all hand joints but the thumb's
  rotation) whose range of motion exceeds :data:`FLEXED_RAD` (they open and curl around the
  object): 1 for a whole-hand grasp, 5/11 for a thumb-index pinch.

:func:`planner_style_reference` is **only a reference for these metrics** (the real planner
lives in ``r2s2r_planner``): straight joint-space segments with trapezoidal timing and a
two-finger pinch for the same pick.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np
from r2s2r_description.robot import (
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
    JOINT_LIMITS,
)
from r2s2r_description.transforms import wrap_angle
from r2s2r_world.kinematics import PalmIk, top_down_palm_pose
from scipy.signal import savgol_filter

from r2s2r_sim.demonstrator.motion import FloatArray

N_ARM = len(ARM_JOINT_NAMES)
FLEXED_RAD = 0.3
"""A flexion joint whose range of motion exceeds this takes part in the grasp."""
FLEXION_INDICES = tuple(i for i, n in enumerate(HAND_JOINT_NAMES) if n != "thumb_rot_joint")
"""Hand joints that curl a finger or the thumb (all but the thumb's rotation)."""


class StyleError(ValueError):
    """A trajectory is too short or malformed for style metrics."""


@dataclass(frozen=True)
class StyleMetrics:
    """Style of one trajectory (see the module docstring for each metric).

    Attributes:
        normalized_jerk: Median over movements of the palm's dimensionless jerk.
        speed_peak_to_mean: Median over movements of palm peak / mean speed.
        plateau_fraction: Median over movements of the time share above 90 % of peak speed.
        joint_straightness: Duration-weighted mean joint path length / chord.
        cartesian_straightness: Duration-weighted mean palm path length / chord.
        hand_closure_fraction: Share of flexion joints that take part in grasping.
        movements: Number of movements found.

    """

    normalized_jerk: float
    speed_peak_to_mean: float
    plateau_fraction: float
    joint_straightness: float
    cartesian_straightness: float
    hand_closure_fraction: float
    movements: int

    def as_dict(self) -> dict[str, float]:
        """Metrics by name."""
        return {k: float(v) for k, v in asdict(self).items()}


def _movements(speed: FloatArray, dt: float, min_duration_s: float) -> list[tuple[int, int]]:
    """Index ranges ``[start, end)`` where the speed exceeds 10 % of its peak."""
    moving = speed > 0.1 * float(speed.max())
    segments = []
    start = None
    for i, flag in enumerate(np.append(moving, False)):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if (i - start) * dt >= min_duration_s:
                segments.append((start, i))
            start = None
    return segments


def style_metrics(
    times_s: FloatArray,
    joint_positions: FloatArray,
    ik: PalmIk,
    smoothing_window_s: float = 0.15,
    min_movement_s: float = 0.3,
) -> StyleMetrics:
    """Compute the style metrics of a uniformly sampled joint trajectory.

    Args:
        times_s: (K,) uniformly spaced sample times.
        joint_positions: (K, 18) positions, :data:`ALL_JOINT_NAMES` order (arm then hand).
        ik: Kinematics of the palm (any base pose: only relative motion matters).
        smoothing_window_s: Savitzky-Golay window for the derivatives.
        min_movement_s: Shortest movement kept.

    Raises:
        StyleError: If the shapes disagree, sampling is not uniform or no movement is found.

    """
    times = np.asarray(times_s, dtype=float)
    q = np.asarray(joint_positions, dtype=float)
    if q.ndim != 2 or q.shape[0] != times.size or q.shape[1] != N_ARM + len(HAND_JOINT_NAMES):
        raise StyleError(f"joint_positions shape {q.shape}: expected ({times.size}, 18)")
    if times.size < 10:
        raise StyleError(f"{times.size} samples: expected at least 10")
    steps = np.diff(times)
    dt = float(np.median(steps))
    if dt <= 0.0 or np.max(np.abs(steps - dt)) > 0.25 * dt:
        raise StyleError("times_s: expected uniform, increasing sampling")
    window = max(5, round(smoothing_window_s / dt) | 1)
    if window >= times.size:
        raise StyleError(f"{times.size} samples: too few for a {window}-sample window")
    arm = q[:, :N_ARM]
    palm = np.array([ik.forward(a)[:3, 3] for a in arm])
    palm_velocity = savgol_filter(palm, window, 4, deriv=1, delta=dt, axis=0)
    palm_jerk = savgol_filter(palm, window, 4, deriv=3, delta=dt, axis=0)
    joint_velocity = savgol_filter(arm, window, 4, deriv=1, delta=dt, axis=0)
    palm_speed = np.linalg.norm(palm_velocity, axis=1)
    joint_speed = np.linalg.norm(joint_velocity, axis=1)
    segments = _movements(joint_speed, dt, min_movement_s)
    if not segments:
        raise StyleError("no movement found in the trajectory")
    jerks, ratios, plateaus, joint_ratio, cart_ratio, weights = [], [], [], [], [], []
    for start, end in segments:
        duration = (end - start) * dt
        speed = palm_speed[start:end]
        length = float(np.sum(speed) * dt)
        if length < 1e-3:
            continue
        jerk_sq = float(np.sum(np.sum(palm_jerk[start:end] ** 2, axis=1)) * dt)
        jerks.append(math.sqrt(0.5 * jerk_sq * duration**5 / length**2))
        ratios.append(float(speed.max() / speed.mean()))
        plateaus.append(float(np.mean(speed > 0.9 * speed.max())))
        joint_length = float(np.sum(np.linalg.norm(np.diff(arm[start:end], axis=0), axis=1)))
        joint_chord = float(np.linalg.norm(arm[end - 1] - arm[start]))
        palm_length = float(np.sum(np.linalg.norm(np.diff(palm[start:end], axis=0), axis=1)))
        palm_chord = float(np.linalg.norm(palm[end - 1] - palm[start]))
        if joint_chord > 1e-3 and palm_chord > 1e-3:
            joint_ratio.append(joint_length / joint_chord)
            cart_ratio.append(palm_length / palm_chord)
            weights.append(duration)
    if not jerks:
        raise StyleError("no movement of the palm found in the trajectory")
    hand = q[:, N_ARM:][:, list(FLEXION_INDICES)]
    closure = float(np.mean(np.ptp(hand, axis=0) >= FLEXED_RAD))
    w = np.asarray(weights) if weights else np.ones(1)
    return StyleMetrics(
        normalized_jerk=float(np.median(jerks)),
        speed_peak_to_mean=float(np.median(ratios)),
        plateau_fraction=float(np.median(plateaus)),
        joint_straightness=float(np.average(joint_ratio, weights=w)) if joint_ratio else 1.0,
        cartesian_straightness=float(np.average(cart_ratio, weights=w)) if cart_ratio else 1.0,
        hand_closure_fraction=closure,
        movements=len(jerks),
    )


# -- planner-style reference (ONLY for comparing metrics) -----------------------------------
PINCH_CLOSED = {
    "thumb_mcp_joint": 0.9,
    "thumb_ip_joint": 0.6,
    "index_mcp_joint": 0.9,
    "index_pip_joint": 0.6,
    "index_dip_joint": 0.4,
}
"""Two-finger pinch: thumb and index close; middle and ring stay open."""


def trapezoid_profile(
    duration_s: float, t_s: FloatArray, accel_fraction: float = 0.25
) -> FloatArray:
    """Return the normalised progress 0 → 1 of a trapezoidal velocity profile.

    Each ramp lasts ``accel_fraction`` of the duration.
    """
    tau = np.clip(np.asarray(t_s, dtype=float) / duration_s, 0.0, 1.0)
    a = accel_fraction
    peak = 1.0 / (1.0 - a)  # normalised cruise speed
    ramp_up = 0.5 * peak / a * tau**2
    cruise = 0.5 * peak * a + peak * (tau - a)
    ramp_down = 1.0 - 0.5 * peak / a * (1.0 - tau) ** 2
    return np.where(tau < a, ramp_up, np.where(tau <= 1.0 - a, cruise, ramp_down))  # type: ignore[no-any-return]


def trapezoid_duration(
    delta: FloatArray, max_velocity: float, max_accel: float, accel_fraction: float = 0.25
) -> float:
    """Shortest duration of a synchronised trapezoid over joint displacements ``delta``."""
    distance = float(np.max(np.abs(delta)))
    if distance < 1e-9:
        return 0.2
    a = accel_fraction
    by_velocity = distance / ((1.0 - a) * max_velocity)
    by_accel = math.sqrt(distance / (a * (1.0 - a) * max_accel))
    return max(by_velocity, by_accel, 0.2)


def planner_style_reference(
    ik: PalmIk,
    object_position_m: FloatArray,
    object_velocity_mps: FloatArray,
    object_height_m: float,
    grasp_yaw_rad: float,
    bin_position_m: FloatArray,
    start_arm: FloatArray | None = None,
    dt_s: float = 0.01,
    max_velocity_radps: float = 1.0,
    max_accel_radps2: float = 2.0,
) -> tuple[FloatArray, FloatArray]:
    """Return a planner-STYLE pick, for comparing style metrics only (not the project's planner).

    Straight joint-space segments (ready → pre-grasp → grasp → lift → over the bin → ready),
    each with a synchronised trapezoidal velocity profile, and a thumb-index pinch. The grasp
    is timed at the object's predicted position (constant velocity).

    Args:
        ik: Palm kinematics in the frame of the positions (e.g. ``base_link``).
        object_position_m: (3,) object centre at time 0.
        object_velocity_mps: (3,) its velocity.
        object_height_m: Object height.
        grasp_yaw_rad: Palm yaw at the grasp.
        bin_position_m: (3,) bin bottom centre.
        start_arm: (6,) start configuration (the ready pose by default).
        dt_s: Output sample period.
        max_velocity_radps: Joint speed limit of the timing.
        max_accel_radps2: Joint acceleration limit of the timing.

    Returns:
        ``(times_s, positions)`` with positions (K, 18), arm then hand, from time 0.

    """
    home = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
    start = home if start_arm is None else np.asarray(start_arm, dtype=float)
    hand_open = np.array([HOME_POSITIONS[n] for n in HAND_JOINT_NAMES])
    hand_pinch = hand_open.copy()
    for name, value in PINCH_CLOSED.items():
        hand_pinch[HAND_JOINT_NAMES.index(name)] = value
    obj = np.asarray(object_position_m, dtype=float)
    velocity = np.asarray(object_velocity_mps, dtype=float) * np.array([1.0, 1.0, 0.0])
    top = obj[2] + object_height_m / 2.0
    pinch_depth = 0.09  # fingertips at about mid-height of the object

    def solve(position: FloatArray, seed: FloatArray) -> FloatArray:
        # Continuation along a Cartesian line from the seed's palm keeps IK in one branch.
        start_pose = ik.forward(seed)
        start_yaw = math.atan2(start_pose[1, 0], start_pose[0, 0])
        turn = wrap_angle(grasp_yaw_rad - start_yaw, upper_closed=True)
        # (The continuation sweeps round the base in cylindrical coordinates; only the end
        # configuration is used: the reference then moves straight in joint space.)
        p0 = start_pose[:3, 3]
        r0, r1 = math.hypot(p0[0], p0[1]), math.hypot(position[0], position[1])
        a0 = math.atan2(p0[1], p0[0])
        da = math.atan2(
            math.sin(math.atan2(position[1], position[0]) - a0),
            math.cos(math.atan2(position[1], position[0]) - a0),
        )
        q = np.asarray(seed, dtype=float)
        for s in np.linspace(0.05, 1.0, 20):
            r, a = r0 + s * (r1 - r0), a0 + s * da
            point = np.array([r * math.cos(a), r * math.sin(a), p0[2] + s * (position[2] - p0[2])])
            q = ik.solve(
                top_down_palm_pose(point, start_yaw + s * (turn + da)), q, max_iterations=500
            )
        return q

    # Plan once with a guessed grasp time, then re-time to the intercept (two passes).
    grasp_time = 2.5
    for _ in range(2):
        target = obj + velocity * grasp_time
        grasp_palm = np.array([target[0], target[1], top + pinch_depth - object_height_m / 2.0])
        pre = solve(grasp_palm + np.array([0.0, 0.0, 0.1]), start)
        grasp = solve(grasp_palm, pre)
        t_pre = trapezoid_duration(pre - start, max_velocity_radps, max_accel_radps2)
        t_down = trapezoid_duration(grasp - pre, max_velocity_radps, max_accel_radps2)
        grasp_time = t_pre + t_down
    lift = solve(grasp_palm + np.array([0.0, 0.0, 0.2]), grasp)
    over_bin = np.asarray(bin_position_m, dtype=float) + np.array([0.0, 0.0, 0.12 + 0.15])
    place = solve(over_bin + np.array([0.0, 0.0, pinch_depth]), lift)
    waypoints = [
        (start, hand_open),
        (pre, hand_open),
        (grasp, hand_open),
        (grasp, hand_pinch),
        (lift, hand_pinch),
        (place, hand_pinch),
        (place, hand_open),
        (home, hand_open),
    ]
    times: list[FloatArray] = []
    positions: list[FloatArray] = []
    t0 = 0.0
    for (q0, h0), (q1, h1) in itertools.pairwise(waypoints):
        delta = np.concatenate([q1 - q0, h1 - h0])
        duration = trapezoid_duration(delta, max_velocity_radps, max_accel_radps2)
        local = np.arange(0.0, duration, dt_s)
        s = trapezoid_profile(duration, local)[:, None]
        times.append(t0 + local)
        positions.append(np.hstack([q0 + s * (q1 - q0), h0 + s * (h1 - h0)]))
        t0 += float(local[-1]) + dt_s
    times.append(np.array([t0]))
    positions.append(np.concatenate([home, hand_open])[None, :])
    out = np.vstack(positions)
    lower = np.array([JOINT_LIMITS[n].lower_rad for n in ARM_JOINT_NAMES + HAND_JOINT_NAMES])
    upper = np.array([JOINT_LIMITS[n].upper_rad for n in ARM_JOINT_NAMES + HAND_JOINT_NAMES])
    return np.concatenate(times), np.clip(out, lower, upper)
