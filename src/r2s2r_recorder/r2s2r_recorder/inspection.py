"""Look at datasets: an info printout and a contact sheet (frames + joint plots) per episode."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from r2s2r_dataset import CAMERA_KEYS, DatasetInfo, EpisodeDataset, dataset_info


def format_dataset_info(path: str | Path | DatasetInfo) -> str:
    """Readable summary of a dataset: episodes, frames, features, per-source counts.

    A dataset that is not complete (:attr:`DatasetInfo.problems`) gets one ``INCOMPLETE:``
    line per problem at the end.

    Raises:
        DatasetError: If the path holds no readable dataset.

    """
    info = path if isinstance(path, DatasetInfo) else dataset_info(path)
    lines = [
        f"dataset {info.path}",
        f"  files     {len(info.files)}",
        f"  episodes  {info.episodes}",
        f"  frames    {info.frames}",
        "  per source:  " + ", ".join(f"{k}: {v}" for k, v in info.per_source.items()),
        "  per outcome: " + ", ".join(f"{k}: {v}" for k, v in info.per_outcome.items()),
        "  features:",
    ]
    for key, (shape, dtype) in info.features.items():
        lines.append(f"    {key:28s} {dtype:8s} {list(shape)}")
    lines += [f"  INCOMPLETE: {problem}" for problem in info.problems]
    return "\n".join(lines)


def make_contact_sheet(
    dataset_path: str | Path, episode_index: int, out_png: str | Path, columns: int = 8
) -> Path:
    """Write a PNG with evenly spaced frames of both cameras and plots of joints and actions.

    Args:
        dataset_path: Dataset file or shard directory.
        episode_index: Episode to show.
        out_png: Output image path.
        columns: Frames per camera row.

    Returns:
        The PNG path.

    Raises:
        IndexError: If the episode index is out of range.

    """
    with EpisodeDataset(dataset_path) as dataset:
        episode = dataset.episode(episode_index)
    meta = episode.metadata
    frames = np.unique(np.linspace(0, episode.num_frames - 1, columns).round().astype(int))
    cameras = [k for k in CAMERA_KEYS if k in episode.images]
    rows = len(cameras) + 2
    figure = plt.figure(figsize=(2.0 * len(frames), 2.0 * len(cameras) + 5.0))
    grid = figure.add_gridspec(rows, len(frames), height_ratios=[1.0] * len(cameras) + [1.2, 1.2])
    for row, camera in enumerate(cameras):
        for col, frame in enumerate(frames):
            axis = figure.add_subplot(grid[row, col])
            axis.imshow(episode.images[camera][frame])
            axis.set_xticks([])
            axis.set_yticks([])
            if row == 0:
                axis.set_title(f"t={episode.timestamps_s[frame]:.2f}s", fontsize=8)
            if col == 0:
                axis.set_ylabel(camera, fontsize=8)
    times = episode.timestamps_s
    joints = figure.add_subplot(grid[len(cameras), :])
    for j, name in enumerate(meta.joint_names):
        joints.plot(times, episode.joint_pos_rad[:, j], label=name)
    joints.set_ylabel("joint pos (rad)")
    joints.legend(fontsize=6, ncol=min(len(meta.joint_names), 8), loc="upper right")
    actions = figure.add_subplot(grid[len(cameras) + 1, :], sharex=joints)
    for j, name in enumerate(meta.action_names):
        actions.step(times, episode.actions[:, j], where="post", label=name)
    actions.set_ylabel("action target (rad)")
    actions.set_xlabel("time (s)")
    figure.suptitle(
        f"episode {episode_index}: {meta.source}/{meta.behavior_source} {meta.task} "
        f"{meta.object_type} belt {meta.belt_speed_mps:.2f} m/s → {meta.outcome}",
        fontsize=10,
    )
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)
    plt.close(figure)
    return out
