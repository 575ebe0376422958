"""Replay an episode bag (the recorder's MCAP bags) into the view, at the stamps it recorded.

Every message the view draws is decoded with the recorder's reader
(:func:`r2s2r_recorder.bag_reading.opened_bag`: CRCs checked first, a damaged bag refused with
one line) and logged through :class:`~r2s2r_view.rerun_log.CellLogger`; the whole episode is on
the ``ros_time`` timeline, to scrub. Camera frames and joint states closer together than
their periods are skipped undecoded, as the live node does (a browser ingests a few thousand
rows a second in software rendering: a 500 Hz joint stream would stall it). A bag records no
``/robot_description``: the robot is drawn from the workspace's nominal description, posed by
the bag's own ``/tf_static`` and ``/tf`` (grounded mounts included). A stream the view draws
that the bag lacks (a camera, the tracks) is named in one line, printed and shown in the
view's status panel. ROS-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from r2s2r_common.topics import (
    BELT_SPEED,
    DIAGNOSTICS,
    HAND_CAMERA,
    HEAD_CAMERA,
    JOINT_STATES,
    OBJECT_TRACKS,
    ROBOT_DESCRIPTION,
    TF,
    TF_STATIC,
    camera_image,
    joint_trajectory,
)
from r2s2r_description.cell import build_description
from r2s2r_description.controllers import CONTROLLER_JOINTS, controller_name
from r2s2r_description.urdf import to_urdf
from r2s2r_recorder.bag_reading import BagReadError, opened_bag
from r2s2r_recorder.msg_types import deserialize, make_typestore
from tqdm import tqdm

from r2s2r_view.rerun_log import CellLogger

CAMERA_TOPICS: dict[str, str] = {camera_image(c): c for c in (HEAD_CAMERA, HAND_CAMERA)}
"""Image topic -> camera name, for both cameras."""
CONTROLLER_TOPICS: dict[str, str] = {
    joint_trajectory(controller_name(key)): key for key in CONTROLLER_JOINTS
}
"""Command topic -> controller key."""
DRAWN_TOPICS: tuple[str, ...] = (
    ROBOT_DESCRIPTION,
    TF_STATIC,
    TF,
    JOINT_STATES,
    BELT_SPEED,
    OBJECT_TRACKS,
    DIAGNOSTICS,
    *CAMERA_TOPICS,
    *CONTROLLER_TOPICS,
)
"""Every topic the view draws."""
EXPECTED_TOPICS: tuple[str, ...] = (TF, JOINT_STATES, OBJECT_TRACKS, *CAMERA_TOPICS)
"""Topics a recorder's episode bag should hold; a missing one is named."""


class BagReplayError(BagReadError):
    """A bag holds nothing the view can draw."""


@dataclass
class ReplaySummary:
    """What a replay drew.

    Attributes:
        bag_dir: The bag.
        logged: Messages logged per topic.
        thinned: Camera frames and joint states skipped undecoded (closer than their
            period to the last drawn one) per topic.
        undecodable: Messages that could not be drawn per topic (bad encoding, size).
        missing: Expected topics the bag lacks.

    """

    bag_dir: Path
    logged: dict[str, int] = field(default_factory=dict)
    thinned: dict[str, int] = field(default_factory=dict)
    undecodable: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def missing_line(self) -> str | None:
        """One line naming what the bag lacks, or None when it has everything."""
        if not self.missing:
            return None
        cameras = [t for t in self.missing if t in CAMERA_TOPICS]
        what = ", ".join(self.missing)
        hint = " (the view shows the rest; its camera panels stay empty)" if cameras else ""
        return f"{self.bag_dir}: the bag has no {what}{hint}"


def replay_bag(
    bag_dir: str | Path,
    logger: CellLogger,
    image_period_s: float = 0.0,
    progress: bool = False,
    on_missing: Callable[[str], None] | None = None,
    until_s: float = 0.0,
    joint_state_period_s: float = 0.0,
) -> ReplaySummary:
    """Log a bag's messages into the view; return what was drawn.

    Args:
        bag_dir: An episode bag directory (``episode_NNNNNN/``).
        logger: The view's logger (its recording gets the messages).
        image_period_s: Shortest stamp distance between two drawn frames of one camera (s).
        progress: Show a progress bar.
        on_missing: Called once with :meth:`ReplaySummary.missing_line` before the replay
            when the bag lacks an expected stream (the line also goes to the status panel).
        until_s: Replay only the bag's first ``until_s`` seconds (0: all of it).
        joint_state_period_s: Shortest distance between two drawn joint states (s), as the
            live node draws one per period (0: every one).

    Raises:
        BagReadError: The bag cannot be read (damaged, unfinished, no MCAP file): one line.
        BagReplayError: The bag holds no topic the view draws.

    """
    root = Path(bag_dir)
    summary = ReplaySummary(bag_dir=root)
    typestore = make_typestore()
    periods_ns = {topic: int(image_period_s * 1e9) for topic in CAMERA_TOPICS}
    periods_ns[JOINT_STATES] = int(joint_state_period_s * 1e9)
    last_drawn_ns: dict[str, int] = {}
    with opened_bag(root) as reader:
        present = {c.topic for c in reader.connections}
        drawn = [c for c in reader.connections if c.topic in DRAWN_TOPICS]
        if not drawn:
            raise BagReplayError(
                f"{root}: no topic the view draws (found {sorted(present) or 'none'}; "
                f"expected some of {', '.join(EXPECTED_TOPICS)})"
            )
        summary.missing = [t for t in EXPECTED_TOPICS if t not in present]
        line = summary.missing_line()
        if line is not None:
            logger.note(line, level="WARN")
            if on_missing is not None:
                on_missing(line)
        if ROBOT_DESCRIPTION not in present:
            logger.log_robot(to_urdf(build_description()))
            logger.note(
                "robot drawn from the nominal description (the bag has no "
                "/robot_description), posed by the bag's /tf_static and /tf"
            )
        end_ns = reader.start_time + int(until_s * 1e9) if until_s > 0 else None
        total = sum(c.msgcount for c in drawn)
        with tqdm(total=total, unit="msg", disable=not progress, desc="replay") as bar:
            for connection, receive_ns, raw in reader.messages(connections=drawn):
                bar.update(1)
                if end_ns is not None and receive_ns > end_ns:
                    break
                topic = connection.topic
                if topic in periods_ns:
                    last = last_drawn_ns.get(topic)
                    if last is not None and 0 <= receive_ns - last < periods_ns[topic]:
                        summary.thinned[topic] = summary.thinned.get(topic, 0) + 1
                        continue
                    last_drawn_ns[topic] = receive_ns
                try:
                    msg = deserialize(typestore, raw, connection.msgtype)
                except ValueError:
                    summary.undecodable[topic] = summary.undecodable.get(topic, 0) + 1
                    continue
                if _log(logger, topic, msg, receive_ns):
                    summary.logged[topic] = summary.logged.get(topic, 0) + 1
                else:
                    summary.undecodable[topic] = summary.undecodable.get(topic, 0) + 1
    logger.recording.flush()
    return summary


def _log(logger: CellLogger, topic: str, msg: object, receive_ns: int) -> bool:
    """Dispatch one decoded message; False when it could not be drawn."""
    if topic in CAMERA_TOPICS:
        return logger.log_image(CAMERA_TOPICS[topic], msg)
    if topic in CONTROLLER_TOPICS:
        logger.log_trajectory(CONTROLLER_TOPICS[topic], msg, receive_ns)
    elif topic == TF_STATIC:
        logger.log_transforms(msg, static=True)
    elif topic == TF:
        logger.log_transforms(msg, static=False)
    elif topic == JOINT_STATES:
        logger.log_joint_state(msg)
    elif topic == OBJECT_TRACKS:
        logger.log_tracks(msg)
    elif topic == BELT_SPEED:
        logger.log_belt_speed(msg)
    elif topic == DIAGNOSTICS:
        logger.log_diagnostics(msg)
    elif topic == ROBOT_DESCRIPTION:
        logger.log_robot(str(getattr(msg, "data", "")))
    return True
