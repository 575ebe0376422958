"""Tiny robot datasets for the experiment tests (light imports: also run as a demos command)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS

JOINTS = list(ALL_JOINT_NAMES)


def write_robot_dataset(path: Path, source: str, seed: int, episodes: int = 2) -> Path:
    """Tiny dataset with the robot's 18 joints and both cameras at 32 px (EpisodeWriter)."""
    from r2s2r_recorder.dataset import (
        OBJECT_TRACK_KEY,
        TRACKER_SOURCE,
        Episode,
        EpisodeMetadata,
        EpisodeWriter,
        object_track_fields,
    )

    fields = object_track_fields(["cube", "cylinder", "block", "sphere"])

    rng = np.random.default_rng(seed)
    home = np.array([HOME_POSITIONS[j] for j in JOINTS], dtype=np.float32)
    frames = 10
    with EpisodeWriter(path) as writer:
        for _ in range(episodes):
            drift = np.cumsum(rng.normal(0.0, 0.01, (frames + 1, len(JOINTS))), axis=0)
            trajectory = (home + drift).astype(np.float32)
            images = {
                key: rng.integers(0, 255, (frames, 32, 32, 3), dtype=np.uint8)
                for key in ("head_camera_rgb", "hand_camera_rgb")
            }
            writer.append(
                Episode(
                    metadata=EpisodeMetadata(
                        source=source,  # type: ignore[arg-type]
                        world_config_id="test",
                        behavior_source="demo" if source == "real" else "planner",
                        task="pick_sort",
                        object_type="cube",
                        belt_speed_mps=0.1,
                        outcome="success",
                        joint_names=JOINTS,
                        action_names=JOINTS,
                        control_rate_hz=10.0,
                        belt_speed_source="belt_speed",
                        object_track_source=TRACKER_SOURCE,
                        object_track_fields=fields,
                    ),
                    timestamps_s=np.arange(frames) * 0.1,
                    images=images,
                    joint_pos_rad=trajectory[:-1],
                    belt_speed_mps=np.full(frames, 0.1, dtype=np.float32),
                    actions=trajectory[1:],
                    extra_obs={
                        OBJECT_TRACK_KEY: rng.normal(0.0, 0.1, (frames, len(fields))).astype(
                            np.float32
                        )
                    },
                )
            )
    return path
