import cv2
import numpy as np
import pytest
from datagen_support import NOMINAL, close_recording
from r2s2r_datagen.config import RecordingConfig
from r2s2r_datagen.recording import RecordingBackend, RecordingError
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_sim.backend import ObjectInstance
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import load_world

HOME = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])
ARM = len(ARM_JOINT_NAMES)


@pytest.fixture(scope="module")
def backend() -> MujocoBackend:
    return MujocoBackend(enable_rendering=True)


class _WithoutSnapshots:
    """The backend without scene snapshots: every camera drawn while the recording runs."""

    def __init__(self, inner: MujocoBackend) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        if name in ("scene_snapshot", "show_scene_snapshot"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def _script(backend: MujocoBackend):
    world = load_world(NOMINAL)
    recorder = RecordingBackend(backend, RecordingConfig(image_width_px=16, image_height_px=16))
    recorder.reset(world, seed=3, objects=[ObjectInstance("object_0", "cube")])
    recorder.set_belt_speed(0.0)
    recorder.step(100)  # 0.2 s: frames at 0.0, 0.1 (0.2 is taken when stepping on)
    first = HOME[:ARM] + 0.05
    second = HOME[:ARM] + np.array([0.1, 0.05, 0.0, 0.0, 0.0, 0.0])
    recorder.command_trajectory(ARM_JOINT_NAMES, [0.15, 0.3], [first, second])  # at t = 0.2
    recorder.step(150)  # to 0.5 s
    recorder.spawn_object("object_0", (0.55, 0.05, 0.826))  # at t = 0.5
    recorder.step(150)  # to 0.8 s
    episode = recorder.to_episode(
        world_config_id="nominal",
        behavior_source="planner",
        task="pick_sort",
        object_type="cube",
        belt_speed_mps=0.0,
        success=True,
        provenance={"test": True},
    )
    return episode, first, second


def test_frames_sampled_like_the_dataset(backend: MujocoBackend) -> None:
    episode, first, second = _script(backend)
    assert episode.num_frames == 9  # 0.0 .. 0.8 s at 10 Hz, the last one taken on close
    np.testing.assert_allclose(episode.timestamps_s, np.arange(9) * 0.1, atol=1e-12)
    assert episode.images["head_camera_rgb"].shape == (9, 16, 16, 3)
    # Actions: the controller's reference. Home until the command arrives at 0.2 s, then
    # linear from home to the first point (at 0.35 s), on to the second (at 0.5 s), then held.
    arm = episode.actions[:, :ARM]
    for k in (0, 1, 2):
        np.testing.assert_allclose(arm[k], HOME[:ARM], atol=1e-6)
    np.testing.assert_allclose(arm[3], HOME[:ARM] + (first - HOME[:ARM]) * (0.1 / 0.15), atol=1e-6)
    np.testing.assert_allclose(arm[4], first + (second - first) * (0.05 / 0.15), atol=1e-6)
    for k in (5, 6, 7, 8):
        np.testing.assert_allclose(arm[k], second, atol=1e-6)
    np.testing.assert_allclose(episode.actions[:, ARM:], np.tile(HOME[ARM:], (9, 1)), atol=1e-6)
    # Joint positions follow the command (measured, so they lag it).
    assert abs(episode.joint_pos_rad[-1, 0] - second[0]) < 0.02
    assert abs(episode.joint_pos_rad[0, 0] - HOME[0]) < 1e-6
    # The object: not valid before it is spawned at 0.5 s (frame 5 sees it); pose in base_link
    # (base at z = 0.75, yawed by pi: x and y flip).
    assert episode.object_pose_valid.tolist() == [False] * 5 + [True] * 4
    np.testing.assert_allclose(episode.object_pose[5, :3], [-0.55, -0.05, 0.076], atol=2e-3)
    np.testing.assert_allclose(np.abs(episode.object_pose[5, 3:]), [0, 0, 1, 0], atol=1e-3)
    np.testing.assert_allclose(episode.belt_speed_mps, 0.0)
    # The last frame is what the cameras see at the end, resized with INTER_AREA.
    expected = cv2.resize(backend.render("head_camera"), (16, 16), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(episode.images["head_camera_rgb"][-1], expected)
    assert episode.metadata.source == "sim" and episode.metadata.control_rate_hz == 10.0


def test_cameras_drawn_when_closed_are_the_ones_drawn_live(backend: MujocoBackend) -> None:
    """A live recording draws the cameras its perception does not read (the hand camera) from
    snapshots when closed: the same arrays as drawing every camera while it runs."""
    later, _, _ = _script(backend)
    live, _, _ = _script(_WithoutSnapshots(backend))  # type: ignore[arg-type]
    assert later.images.keys() == live.images.keys() == {"head_camera_rgb", "hand_camera_rgb"}
    for key in live.images:
        assert np.ptp(live.images[key]) > 0
        np.testing.assert_array_equal(later.images[key], live.images[key], err_msg=key)
    np.testing.assert_array_equal(later.joint_pos_rad, live.joint_pos_rad)


def test_recording_is_deterministic_on_a_reused_backend(backend: MujocoBackend) -> None:
    first, _, _ = _script(backend)
    again, _, _ = _script(backend)
    for key in first.images:
        np.testing.assert_array_equal(first.images[key], again.images[key])
    np.testing.assert_array_equal(first.joint_pos_rad, again.joint_pos_rad)
    np.testing.assert_array_equal(first.object_pose, again.object_pose)


def test_bad_rate(backend: MujocoBackend) -> None:
    with pytest.raises(RecordingError, match="rate_hz"):
        RecordingBackend(backend, RecordingConfig(rate_hz=7.0)).reset(load_world(NOMINAL), 0)


def test_belt_speed_and_tracked_object_come_from_the_cells_perception(
    backend: MujocoBackend,
) -> None:
    episode, _, _ = _script(backend)
    meta = episode.metadata
    assert meta.belt_speed_source == "belt_speed" and meta.object_track_source == "object_tracker"
    track = episode.extra_obs["object_track"]
    assert track.shape == (9, len(meta.object_track_fields))
    visible = meta.object_track_fields.index("visible")
    assert track[:5, visible].tolist() == [0.0] * 5  # nothing on the belt before 0.5 s
    # The belt stands still (speed 0): the estimator, warmed up on the set speed, says so.
    np.testing.assert_allclose(episode.belt_speed_mps, 0.0, atol=1e-6)
    off = RecordingBackend(backend, RecordingConfig(image_width_px=16, perception=False))
    off.reset(load_world(NOMINAL), seed=3, objects=[ObjectInstance("object_0", "cube")])
    off.step(60)
    plain = close_recording(off, "planner")
    assert plain.metadata.belt_speed_source == "commanded" and "object_track" not in plain.extra_obs
