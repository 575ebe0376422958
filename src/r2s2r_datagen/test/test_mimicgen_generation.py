"""MimicGen with moving objects, in the simulator: a grasp at a belt speed the source never saw.

The source demonstration is recorded by running the human-like demonstrator directly on the
MuJoCo backend in the twin's world (the stand-in for the real cell). Its ``obs/object_pose``
is the backend's object pose, STANDING IN for the object tracker's output, which is what the
real pipeline records (the generator only ever reads the dataset, never simulator state of the
source). Generation then runs in the NOMINAL world at other belt speeds, with a fixed seed.
"""

from pathlib import Path

import numpy as np
import pytest
from datagen_support import NOMINAL, REPO, close_recording
from r2s2r_datagen.config import RecordingConfig
from r2s2r_datagen.generator import EpisodeJob, generator_availability, make_generator
from r2s2r_datagen.mimicgen import MimicGenGenerator
from r2s2r_datagen.mimicgen.demos import write_demonstrations
from r2s2r_datagen.worker import WorkerSetup, WorkerState
from r2s2r_sim.backend import ObjectInstance
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.task import ObjectArrival, TrialPlan
from r2s2r_world.world import load_world

from r2s2r_dataset import EpisodeDataset

# MuJoCo generation episodes (1-2 s each): left out of scripts/test.sh --fast.
pytestmark = pytest.mark.slow

TWIN = REPO / "config" / "twin" / "default.yaml"
RECORDING = RecordingConfig(image_width_px=16, image_height_px=16)
SOURCE_SEED = 0  # a cube, grasped and sorted by the demonstrator at the twin's 0.105 m/s


@pytest.fixture(scope="module")
def backend():
    backend = MujocoBackend(enable_rendering=True)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def nominal():
    return load_world(NOMINAL)


@pytest.fixture(scope="module")
def source_dataset(tmp_path_factory, backend, nominal) -> Path:
    path = tmp_path_factory.mktemp("demos") / "demos.hdf5"
    episodes = write_demonstrations(
        path, backend, load_world(TWIN), [SOURCE_SEED], reach_world=nominal, recording=RECORDING
    )
    assert episodes[0].metadata.outcome == "success"
    assert episodes[0].metadata.object_type == "cube"
    return path


def job(nominal, speed_mps: float, seed: int = 11) -> EpisodeJob:
    arrival = ObjectArrival(ObjectInstance("object_0", "cube"), 0.4, 0.04, 0.5)
    plan = TrialPlan(seed=seed, belt_speed_mps=speed_mps, arrivals=(arrival,))
    return EpisodeJob(
        "nominal_mimicgen", "mimicgen", 0, seed, nominal, "nominal", plan, 0, RECORDING
    )


def generator(source_dataset: Path, **options) -> MimicGenGenerator:
    built = make_generator("mimicgen", {"source_dataset": str(source_dataset), **options})
    assert isinstance(built, MimicGenGenerator)
    return built


def lifted_m(episode) -> float:
    z = episode.object_pose[episode.object_pose_valid, 2]
    return float(z.max() - z[0])


def test_moving_frame_grasps_at_an_unseen_faster_belt(tmp_path, backend, nominal, source_dataset):
    mimicgen = generator(source_dataset, max_attempts=1)
    (demo,) = mimicgen.library.demos
    assert demo.belt_speed_mps == pytest.approx(0.105, abs=0.005)  # fitted from the track
    new_speed = 0.13
    assert abs(new_speed - demo.belt_speed_mps) > 0.02  # a speed the source never saw
    worker = WorkerState(
        WorkerSetup(
            worker_id="w0",
            run_dir=str(tmp_path),
            behavior_options={
                "mimicgen": {"source_dataset": str(source_dataset), "max_attempts": 1}
            },
        ),
        backend_factory=lambda: backend,
    )
    report = worker.run(job(nominal, new_speed))
    assert (report.status, report.reason, report.attempts) == ("success", "success", 1)
    with EpisodeDataset(tmp_path / report.shard) as dataset:
        episode = dataset.episode(0)
    assert episode.metadata.behavior_source == "mimicgen"
    assert episode.metadata.belt_speed_mps == pytest.approx(new_speed)
    provenance = episode.metadata.provenance
    assert provenance["source_demo"] == 0 and provenance["attempt"] == 1
    (start, boundary), (boundary2, end) = provenance["subtask_boundaries"]
    assert start < boundary == boundary2 < end == demo.annotation.end
    assert lifted_m(episode) > 0.1  # carried up and over the bin wall


def test_moving_frame_grasps_at_an_unseen_slower_belt(backend, nominal, source_dataset):
    result = generator(source_dataset, max_attempts=1).generate(job(nominal, 0.075), backend)
    assert result.success, result.outcome
    assert result.provenance["reach_wait_s"] > 0.0  # retimed: waits longer for the slow object


def test_static_object_frame_misses_at_the_same_speed(backend, nominal, source_dataset):
    """The ablation: MimicGen's pose-read-once frame, same source, seed and speed."""
    result = generator(source_dataset, max_attempts=1, moving_frame=False).generate(
        job(nominal, 0.13), backend
    )
    assert not result.success
    assert result.outcome in ("missed_grasp", "dropped", "timeout")


def test_unavailable_without_a_readable_source_dataset(tmp_path):
    reason = generator_availability("mimicgen", {"source_dataset": str(tmp_path / "none.hdf5")})
    assert reason is not None and "source dataset" in reason
    assert "no source_dataset configured" in (generator_availability("mimicgen", {}) or "")


def test_action_noise_is_seeded(backend, nominal, source_dataset):
    """Same job and seed → the same generated commands (determinism of a job)."""
    first = generator(source_dataset, max_attempts=1).generate(job(nominal, 0.1, seed=5), backend)
    second = generator(source_dataset, max_attempts=1).generate(job(nominal, 0.1, seed=5), backend)
    assert first.success and second.success
    np.testing.assert_array_equal(first.episode.actions, second.episode.actions)


def test_source_check_passes_a_demo_tracked_by_truth(source_dataset):
    """The source demo's object is the simulator's (a perfect tracker): no offset to name."""
    from r2s2r_datagen.mimicgen import check_configured_sources

    check = check_configured_sources({"source_dataset": str(source_dataset)})
    assert check.verdict == "ok" and len(check.offsets) == 1, check.message
    assert check.mean_horizontal_m < 0.01
    assert 0.03 < -check.mean_offset_m[2] < 0.12  # the palm above the object's centre


class _CountingBackend:
    """The backend, counting the frames rendered through it."""

    def __init__(self, inner: MujocoBackend) -> None:
        self.inner = inner
        self.renders = 0

    def render(self, camera_name: str):
        self.renders += 1
        return self.inner.render(camera_name)

    def render_rgbd(self, camera_name: str):
        self.renders += 1
        return self.inner.render_rgbd(camera_name)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


@pytest.mark.parametrize(
    ("speed_mps", "options"), [(0.1, {}), (0.13, {"moving_frame": False})], ids=["hit", "miss"]
)
def test_deferred_attempts_give_what_recording_every_attempt_live_gives(
    backend, nominal, source_dataset, speed_mps, options
):
    """Attempts recorded deferred, only a success rendered and perceived: the result of
    recording every attempt live, array for array, without rendering the attempts that fail."""
    results, renders = [], []
    for deferred in (True, False):
        mimicgen = generator(source_dataset, max_attempts=2, **options)
        mimicgen.deferred = deferred
        counting = _CountingBackend(backend)
        results.append(mimicgen.generate(job(nominal, speed_mps, seed=5), counting))
        renders.append(counting.renders)
    deferred_result, live = results
    assert deferred_result.success == live.success == (speed_mps == 0.1)
    assert (deferred_result.outcome, deferred_result.attempts, deferred_result.provenance) == (
        live.outcome,
        live.attempts,
        live.provenance,
    )
    if not live.success:
        assert renders == [0, renders[1]] and renders[1] > 0  # a failure costs no frame
        return
    assert renders[0] == renders[1] > 0  # the success was rendered, once
    a, b = deferred_result.episode, live.episode
    assert a.metadata == b.metadata
    for name in ("timestamps_s", "joint_pos_rad", "belt_speed_mps", "actions", "object_pose"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.object_pose_valid, b.object_pose_valid)
    assert a.images.keys() == b.images.keys() and a.extra_obs.keys() == b.extra_obs.keys()
    for key in a.images:
        np.testing.assert_array_equal(a.images[key], b.images[key], err_msg=key)
    for key in a.extra_obs:
        np.testing.assert_array_equal(a.extra_obs[key], b.extra_obs[key], err_msg=key)


def test_a_deferred_recording_renders_only_when_closed(backend, nominal):
    from r2s2r_datagen.recording import RecordingBackend, RecordingError

    counting = _CountingBackend(backend)
    deferred = RecordingBackend(counting, RECORDING, deferred=True)
    deferred.reset(nominal, 0, job(nominal, 0.1).plan.objects)
    deferred.step(100)
    assert deferred.num_frames == 0 and counting.renders == 0
    with pytest.raises(RecordingError, match="deferred"):
        deferred.object_tracked()
    before = backend.scene_snapshot()
    episode = close_recording(deferred, "mimicgen")
    assert episode.num_frames == deferred.num_frames == 3 and counting.renders == 2 * 3
    after = backend.scene_snapshot()  # the scene of now is shown again
    for kept, shown in zip(before.arrays, after.arrays, strict=True):
        np.testing.assert_array_equal(kept, shown)


def test_a_deferred_recording_needs_scene_snapshots(nominal):
    from r2s2r_datagen.recording import RecordingBackend, RecordingError

    class NoSnapshots:
        def step(self, n_steps: int = 1) -> None: ...

    with pytest.raises(RecordingError, match="scene snapshots"):
        RecordingBackend(NoSnapshots(), RECORDING, deferred=True)  # type: ignore[arg-type]
