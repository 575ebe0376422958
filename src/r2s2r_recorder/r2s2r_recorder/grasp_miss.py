"""How far a failed take's grasp was from its object: the palm against the object at closure.

A take that ends ``missed_grasp`` (or ``dropped``) says nothing about *why* by itself (issue
34: 0 of 40 takes, each ``missed_grasp``). What the bag holds answers it: at the moment the
hand closed (measured hand joints on ``/joint_states``: the mean flexion of the MCP joints
reaching :data:`CLOSED_FRACTION` of its rise, as MimicGen's annotation reads a grasp), the palm
(forward kinematics of the measured arm joints, :class:`r2s2r_world.kinematics.PalmIk`) against
the object's position at that moment:

- the tracked object, ``/objects/tracks`` (the cell's perception: the figure then holds the
  tracker's error too, 3-4 mm grounded, 17-26 mm before grounding, and says so);
- or, where a bag holds one (a benchmark that recorded a simulator's truth), another
  ``ObjectTrackArray`` topic given as ``object_topic`` with ``reference="truth"``.

The object sample is the latest one at or before closure of the take's object type (the one
nearest the palm if several), moved on by its velocity to the closure time (the tracker loses
the object under the hand).

The miss is ``object − palm`` in ``base_link``; its horizontal part is the miss distance (a
grasp centres the palm over the object; the vertical part is the palm's height above the
object's centre, 6-8 cm by design, reported not judged).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from r2s2r_common.stamps import stamp_to_s
from r2s2r_common.topics import JOINT_STATES, OBJECT_TRACKS
from r2s2r_description.robot import ARM_JOINT_NAMES
from rosbags.rosbag2.errors import ReaderError
from rosbags.typesys.store import Typestore

from .bag_reading import BagReadError, describe_read_failure, open_reader
from .msg_types import deserialize, make_typestore

FloatArray = NDArray[np.float64]


CLOSURE_JOINTS: tuple[str, ...] = (
    "thumb_mcp_joint",
    "index_mcp_joint",
    "middle_mcp_joint",
    "ring_mcp_joint",
)
"""Hand joints whose mean flexion is the closure signal (MimicGen's annotation default)."""

NEAR_TRACKED_M = 0.015
"""Failed takes whose median miss from the *tracked* object is within this closed as near it as
successful takes do (0.8-1.3 cm on 11 successful takes through ROS on the family's edge twins:
the arm trails the moving object): the hand went where the tracker put the object, so the
tracker, not the reach, is the suspect (3-4 mm error grounded, 17-26 mm before grounding)."""

MIN_CLOSURE_RISE_RAD = 0.3
"""Smallest rise of the closure signal that counts as the hand closing."""

CLOSED_FRACTION = 0.8
"""Fraction of the closure rise at which the hand counts as closed."""

Reference = Literal["truth", "tracked"]


@dataclass(frozen=True)
class GraspMiss:
    """Where the object was relative to the palm when a take's hand closed.

    Attributes:
        closure_time_s: Cell time of the closure (None: the hand never closed).
        offset_m: ``(3,)`` object − palm in base_link at closure (None: no figure).
        reference: ``truth`` (the twin's operator view) or ``tracked`` (the object tracker).
        sample_age_s: How old the object sample was at closure (extrapolated over it).
        detail: Why there is no figure ('' when there is one).

    """

    closure_time_s: float | None
    offset_m: FloatArray | None
    reference: Reference | None
    sample_age_s: float = 0.0
    detail: str = ""

    @property
    def horizontal_m(self) -> float | None:
        """The miss distance: the offset's horizontal (base_link xy) length."""
        if self.offset_m is None:
            return None
        return float(np.linalg.norm(self.offset_m[:2]))

    def describe(self) -> str:
        """One phrase: the distance and direction, or why there is none."""
        if self.offset_m is None or self.horizontal_m is None:
            return self.detail or "no miss distance"
        dx, dy, dz = (100.0 * float(v) for v in self.offset_m)
        what = "true object" if self.reference == "truth" else "tracked object"
        text = (
            f"at hand closure the palm was {100.0 * self.horizontal_m:.1f} cm from the {what} "
            f"(object − palm dx {dx:+.1f}, dy {dy:+.1f} cm; palm {-dz:.1f} cm above it"
        )
        if self.sample_age_s > 0.5:
            text += f"; object seen {self.sample_age_s:.1f} s before"
        if self.reference == "tracked":
            text += "; tracked pose, not the truth: includes the tracker's error"
        return text + ")"

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (manifest)."""
        return {
            "closure_time_s": (
                None if self.closure_time_s is None else round(self.closure_time_s, 3)
            ),
            "offset_m": (
                None if self.offset_m is None else [round(float(v), 4) for v in self.offset_m]
            ),
            "miss_m": None if self.horizontal_m is None else round(self.horizontal_m, 4),
            "reference": self.reference,
            "sample_age_s": round(self.sample_age_s, 3),
            "detail": self.detail,
        }


def closure_index(
    signal: Sequence[float] | FloatArray,
    min_rise_rad: float = MIN_CLOSURE_RISE_RAD,
    closed_fraction: float = CLOSED_FRACTION,
) -> int | None:
    """Index at which the closure signal first reaches ``closed_fraction`` of its rise.

    The rise is from the lowest value before the signal's peak to the peak; None when it is
    under ``min_rise_rad`` (the hand never closed).
    """
    values = np.asarray(signal, dtype=float)
    if values.size == 0:
        return None
    peak = int(np.argmax(values))
    low = float(values[: peak + 1].min())
    rise = float(values[peak]) - low
    if rise < min_rise_rad:
        return None
    return int(np.argmax(values >= low + closed_fraction * rise))


def object_at(
    time_s: float,
    sample_times_s: FloatArray,
    positions_m: FloatArray,
    velocities_mps: FloatArray,
    near_m: FloatArray | None = None,
) -> tuple[FloatArray, float] | None:
    """Return the object's position at ``time_s`` and the age of the sample it comes from.

    The latest sample at or before ``time_s`` (of several at that time, the one horizontally
    nearest ``near_m``), moved on by its velocity; None when no sample precedes ``time_s``.
    """
    times = np.asarray(sample_times_s, dtype=float)
    before = np.flatnonzero(times <= time_s)
    if before.size == 0:
        return None
    latest = float(times[before].max())
    rows = np.flatnonzero(times == latest)
    if near_m is not None and rows.size > 1:
        gaps = np.linalg.norm(np.asarray(positions_m)[rows, :2] - np.asarray(near_m)[:2], axis=1)
        rows = rows[np.argsort(gaps, kind="stable")]
    index = int(rows[0])
    age = time_s - latest
    position = np.asarray(positions_m[index], float) + np.asarray(velocities_mps[index]) * age
    return position, age


def grasp_miss(
    joint_times_s: FloatArray,
    arm_q: FloatArray,
    closure_signal: FloatArray,
    palm_position: Callable[[FloatArray], FloatArray],
    sample_times_s: FloatArray,
    positions_m: FloatArray,
    velocities_mps: FloatArray,
    reference: Reference,
) -> GraspMiss:
    """Compute the miss of one take from its arrays (plain NumPy; see the module docstring).

    Args:
        joint_times_s: ``(T,)`` joint-state times.
        arm_q: ``(T, 6)`` measured arm joints.
        closure_signal: ``(T,)`` mean flexion of :data:`CLOSURE_JOINTS`.
        palm_position: Arm joints → palm position in base_link (forward kinematics).
        sample_times_s: ``(N,)`` times of the object samples (several objects may share one).
        positions_m: ``(N, 3)`` object positions in base_link.
        velocities_mps: ``(N, 3)`` object velocities.
        reference: What the samples are.

    """
    closed = closure_index(closure_signal)
    if closed is None:
        return GraspMiss(None, None, None, detail="the hand never closed")
    time_s = float(joint_times_s[closed])
    palm = np.asarray(palm_position(np.asarray(arm_q[closed], dtype=float)), dtype=float)
    found = object_at(time_s, sample_times_s, positions_m, velocities_mps, palm)
    if found is None:
        return GraspMiss(
            time_s, None, None, detail=f"no {reference} object pose before the hand closed"
        )
    position, age = found
    return GraspMiss(time_s, position - palm, reference, age)


class PalmInBase:
    """Palm position in base_link from arm joints (the description's FK, nominal layout).

    The arm's kinematics relative to its base do not depend on where the base stands, so the
    nominal world's layout serves any cell. The model is compiled on the first call.
    """

    def __init__(self) -> None:
        self._ik: Any = None
        self._base_inverse: FloatArray = np.eye(4)

    def __call__(self, arm_q: FloatArray) -> FloatArray:
        """Palm position (3,) in base_link at arm joints ``arm_q`` (6,)."""
        if self._ik is None:
            from r2s2r_common.config import resolve_config_path
            from r2s2r_world.kinematics import PalmIk
            from r2s2r_world.world import load_world

            world = load_world(resolve_config_path("world/nominal.yaml"))
            self._ik = PalmIk(world.layout())
            base = world.robot.base_pose.to_pose().matrix()
            self._base_inverse = np.asarray(np.linalg.inv(base), dtype=float)
        pose = self._base_inverse @ self._ik.forward(np.asarray(arm_q, dtype=float))
        return np.asarray(pose[:3, 3], dtype=float)


def _object_samples(
    messages: list[tuple[float, Any]], object_type: str
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Return times, positions, velocities of every track of the take's object type.

    Every object's when no track has that type. Track ids are not followed: a tracker may
    re-number an object (the one nearest the palm at closure is taken, :func:`object_at`).
    """
    typed = any(str(t.object_type) == object_type for _, msg in messages for t in msg.tracks)
    times, positions, velocities = [], [], []
    for stamp_s, msg in messages:
        for track in msg.tracks:
            if typed and str(track.object_type) != object_type:
                continue
            p, v = track.pose.position, track.twist.linear
            times.append(stamp_s)
            positions.append([p.x, p.y, p.z])
            velocities.append([v.x, v.y, v.z])
    return (
        np.asarray(times, dtype=float),
        np.asarray(positions, dtype=float).reshape(-1, 3),
        np.asarray(velocities, dtype=float).reshape(-1, 3),
    )


def read_grasp_miss(
    bag_dir: str | Path,
    object_type: str,
    palm_position: Callable[[FloatArray], FloatArray] | None = None,
    typestore: Typestore | None = None,
    object_topic: str = OBJECT_TRACKS,
    reference: Reference = "tracked",
) -> GraspMiss:
    """Read the miss of one recorded take from its bag (see the module docstring).

    Args:
        bag_dir: The take's episode bag.
        object_type: The trial's object type (selects the track).
        palm_position: Forward kinematics (default: a new :class:`PalmInBase`).
        typestore: Message types (default: :func:`make_typestore`).
        object_topic: The ``ObjectTrackArray`` topic the object is read from.
        reference: What that topic is (``tracked``: the cell's perception).

    Raises:
        BagReadError: The bag cannot be read.

    """
    store = typestore or make_typestore()
    reader = open_reader(bag_dir)
    joint_times: list[float] = []
    arm_rows: list[list[float]] = []
    closure: list[float] = []
    objects: dict[str, list[tuple[float, Any]]] = {object_topic: []}
    try:
        wanted = [c for c in reader.connections if c.topic in (JOINT_STATES, object_topic)]
        for connection, _receive_ns, raw in reader.messages(connections=wanted):
            msg = deserialize(store, raw, connection.msgtype)
            stamp_s = stamp_to_s(msg.header.stamp)
            if connection.topic != JOINT_STATES:
                objects[connection.topic].append((stamp_s, msg))
                continue
            names = list(msg.name)
            if not all(n in names for n in (*ARM_JOINT_NAMES, *CLOSURE_JOINTS)):
                continue
            position = np.asarray(msg.position, dtype=float)
            joint_times.append(stamp_s)
            arm_rows.append([float(position[names.index(n)]) for n in ARM_JOINT_NAMES])
            closure.append(float(np.mean([position[names.index(n)] for n in CLOSURE_JOINTS])))
    except ReaderError as error:
        raise BagReadError(describe_read_failure(Path(bag_dir), error)) from None
    except (ValueError, KeyError) as error:
        raise BagReadError(f"{bag_dir}: cannot read the grasp's topics: {error}") from None
    finally:
        reader.close()
    if not joint_times:
        return GraspMiss(None, None, None, detail=f"no {JOINT_STATES} with arm and hand")
    samples = _object_samples(objects[object_topic], object_type)
    order = np.argsort(np.asarray(joint_times), kind="stable")
    return grasp_miss(
        np.asarray(joint_times, dtype=float)[order],
        np.asarray(arm_rows, dtype=float)[order],
        np.asarray(closure, dtype=float)[order],
        palm_position or PalmInBase(),
        *samples,
        reference,
    )


def miss_lines(takes: Sequence[dict[str, Any]]) -> list[str]:
    """Lines for record-demos' output: one per failed take with a miss, then the median.

    Args:
        takes: The manifest's takes (``bag``, ``seed``, ``reason``, ``object_type`` and,
            for failed takes, ``grasp_miss``: :meth:`GraspMiss.as_dict`).

    """
    lines = []
    distances: list[float] = []
    references: set[str] = set()
    for take in takes:
        miss = take.get("grasp_miss")
        if not isinstance(miss, dict):
            continue
        head = (
            f"  failed take {take.get('bag')} (seed {take.get('seed')}, "
            f"{take.get('object_type')}): {take.get('reason') or take.get('outcome')}: "
        )
        if miss.get("miss_m") is None:
            lines.append(head + str(miss.get("detail") or "no miss distance"))
            continue
        distances.append(float(miss["miss_m"]))
        references.add(str(miss.get("reference")))
        lines.append(head + _describe_dict(miss))
    if distances:
        median = statistics.median(distances)
        what = "true object" if references == {"truth"} else "tracked object"
        line = (
            f"record-demos: failed takes: median miss {100.0 * median:.1f} cm over "
            f"{len(distances)} (horizontal, palm vs the {what} at hand closure)"
        )
        if what == "tracked object" and median <= NEAR_TRACKED_M:
            line += (
                ": as near as successful grasps close, so the hand went where the tracker put "
                "the object and the object was likely elsewhere (an ungrounded tracker? a "
                "demonstrator steering by /objects/tracks?)"
            )
        lines.append(line)
    return lines


def _describe_dict(miss: dict[str, Any]) -> str:
    offset = miss.get("offset_m")
    return GraspMiss(
        miss.get("closure_time_s"),
        None if offset is None else np.asarray(offset, dtype=float),
        miss.get("reference"),
        float(miss.get("sample_age_s") or 0.0),
        str(miss.get("detail") or ""),
    ).describe()
