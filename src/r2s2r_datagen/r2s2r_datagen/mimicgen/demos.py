"""Source demonstrations without ROS, for tests and benchmarks (a stand-in for recorded demos).

In the pipeline, source demonstrations are recorded on the real cell (the real twin) through
ROS and converted from bags to the dataset, with object poses from the object tracker.
:func:`record_demonstration` produces the same :class:`~r2s2r_dataset.Episode`
directly: it runs the human-like demonstrator on a simulator backend wrapped in a
:class:`~r2s2r_datagen.recording.RecordingBackend`, and the episode's ``obs/object_pose`` is
the backend's object pose, standing in for the tracker's output.
"""

from __future__ import annotations

from pathlib import Path

from r2s2r_sim.backend import SimBackend
from r2s2r_world.world import WorldParams

from r2s2r_datagen.config import RecordingConfig
from r2s2r_datagen.recording import RecordingBackend
from r2s2r_dataset import Episode, EpisodeWriter


def record_demonstration(
    backend: SimBackend,
    world: WorldParams,
    seed: int,
    reach_world: WorldParams | None = None,
    recording: RecordingConfig | None = None,
) -> Episode:
    """Play one human-like demonstration and record it as a real-dataset episode.

    Args:
        backend: Simulator with rendering (the episode has camera images).
        world: The world simulated (e.g. a twin-like world standing in for the real cell).
        seed: Trial and demonstrator seed.
        reach_world: What the demonstrator believes (the NOMINAL world); default ``world``.
        recording: Frame rate and image size.

    Returns:
        The episode (``source = real``, ``behavior_source = demo``), with its outcome.

    """
    from r2s2r_sim.demonstrator import run_demo_on_backend

    recorder = RecordingBackend(backend, recording or RecordingConfig())
    result = run_demo_on_backend(recorder, world, seed, reach_world=reach_world)
    episode = recorder.to_episode(
        world_config_id="real",
        behavior_source="demo",
        task="pick_sort",
        object_type=result.plan.arrivals[0].instance.type_name,
        belt_speed_mps=result.plan.belt_speed_mps,
        success=result.outcome.success,
        provenance={"demonstrator_seed": seed, "outcome_reason": result.outcome.reason},
    )
    episode.metadata = episode.metadata.model_copy(update={"source": "real"})
    return episode


def write_demonstrations(
    path: str | Path,
    backend: SimBackend,
    world: WorldParams,
    seeds: list[int],
    reach_world: WorldParams | None = None,
    recording: RecordingConfig | None = None,
) -> list[Episode]:
    """Record one demonstration per seed into a new dataset file ``path``.

    Returns:
        The episodes written (successful and failed alike, as a recorder would keep them).

    """
    episodes = []
    with EpisodeWriter(path) as writer:
        for seed in seeds:
            episode = record_demonstration(backend, world, seed, reach_world, recording)
            writer.append(episode)
            episodes.append(episode)
    return episodes
