"""Subtask annotation on synthetic episodes: boundaries, skip reasons, manual-override sidecar."""

from pathlib import Path

import numpy as np
import pytest
from datagen_support import NOMINAL
from r2s2r_datagen.mimicgen.annotation import (
    AnnotationError,
    DemoSignals,
    SubtaskAnnotation,
    SubtaskOverride,
    SubtaskSidecar,
    annotate,
    bin_poses_in_base,
    load_sidecar,
    save_sidecar,
    sidecar_path,
)
from r2s2r_datagen.mimicgen.config import AnnotationConfig, GenerationParams
from r2s2r_datagen.mimicgen.source import SourceLibrary, SourceLibraryError
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_testing.pick_demo import (
    DT_S,
    FRAMES,
    GRASP_CLOSED,
    GRASP_END,
    REACH_START,
    RELEASE,
    pick_demonstration,
)
from r2s2r_world.world import load_world

from r2s2r_dataset import Episode, EpisodeWriter


@pytest.fixture(scope="module")
def nominal():
    return load_world(NOMINAL)


def signals(episode: Episode) -> DemoSignals:
    return DemoSignals(
        times_s=episode.timestamps_s,
        actions=episode.actions.astype(float),
        action_names=tuple(episode.metadata.action_names),
        object_pose=episode.object_pose.astype(float),
        object_valid=episode.object_pose_valid,
        object_type="cube",
    )


def test_annotation_finds_the_boundaries(nominal):
    annotation = annotate(signals(pick_demonstration(nominal)), nominal, AnnotationConfig())
    assert (annotation.reach_start, annotation.grasp_closed) == (REACH_START, GRASP_CLOSED)
    assert (annotation.grasp_end, annotation.release, annotation.end) == (GRASP_END, RELEASE, 120)
    assert annotation.boundaries == [(REACH_START, GRASP_END), (GRASP_END, FRAMES)]


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"grasp": False}, "no_detectable_grasp"),
        ({"lift": False}, "no_detectable_grasp"),
        ({"release_over_bin": False}, "released_outside_bin"),
    ],
)
def test_bad_demonstrations_raise_a_reason(nominal, kwargs, reason):
    with pytest.raises(AnnotationError) as error:
        annotate(signals(pick_demonstration(nominal, **kwargs)), nominal, AnnotationConfig())
    assert error.value.reason == reason


def test_library_skips_a_demo_without_grasp_with_a_counted_reason(nominal):
    episodes = [
        pick_demonstration(nominal),
        pick_demonstration(nominal, grasp=False),
        pick_demonstration(nominal, lift=False),
    ]
    library = SourceLibrary.from_episodes(episodes, nominal, AnnotationConfig())
    assert [d.index for d in library.demos] == [0]
    assert dict(library.skipped) == {"no_detectable_grasp": 2}
    assert library.skipped_detail[1].startswith("no_detectable_grasp")
    demo = library.demos[0]
    assert demo.belt_speed_mps == pytest.approx(0.1, abs=1e-4)  # fitted from the track
    with pytest.raises(SourceLibraryError, match="cylinder"):
        library.choose(
            np.random.default_rng(0),
            "cylinder",
            -0.55,
            0.0,
            0.1,
            nominal,
            GenerationParams(same_object_type_only=True),
        )


def test_offsets_are_random_but_keep_the_subtasks_meaningful():
    base = SubtaskAnnotation(30, 64, 69, 100, 120)
    rng = np.random.default_rng(0)
    shifted = [base.with_offsets(rng, (-2, 0), (-10, 3)) for _ in range(200)]
    starts = {a.reach_start for a in shifted}
    grasps = {a.grasp_end for a in shifted}
    assert starts == {28, 29, 30}
    assert min(grasps) == 65 and max(grasps) == 72  # clamped after the hand has closed


def test_sidecar_overrides_and_skips(tmp_path: Path, nominal):
    dataset = tmp_path / "demos.hdf5"
    with EpisodeWriter(dataset) as writer:
        writer.append(pick_demonstration(nominal))
        writer.append(pick_demonstration(nominal, grasp=False))
        writer.append(pick_demonstration(nominal))
    assert sidecar_path(dataset) == tmp_path / "demos.subtasks.yaml"
    sidecar = SubtaskSidecar(
        episodes={
            0: SubtaskOverride(skip="operator bumped the belt"),
            1: SubtaskOverride(reach_start=30, grasp_closed=50, grasp_end=60, release=100),
            2: SubtaskOverride(grasp_end=70),
        }
    )
    save_sidecar(dataset, sidecar)
    assert load_sidecar(dataset) == sidecar
    library = SourceLibrary.from_dataset(dataset, nominal, AnnotationConfig())
    assert dict(library.skipped) == {"manual_skip": 1}
    by_index = {d.index: d.annotation for d in library.demos}
    assert by_index[1] == SubtaskAnnotation(30, 50, 60, 100, FRAMES, "manual")
    assert by_index[2] == SubtaskAnnotation(
        REACH_START, GRASP_CLOSED, 70, RELEASE, FRAMES, "manual"
    )


# -- the real tracker's episodes: the object track ends at the grasp ----------------------------

TRACK_END = 61  # last valid tracker frame: the hand covers the object as it closes (60-64)
GRASP_Z_M = 0.075 + 0.07  # palm height over the cube on the belt


def _palm_path(nominal, lift: bool, drop_bin: str) -> np.ndarray:
    """(T, 3) palm positions (base_link): rest, reach onto the moving cube (frames 30-55),
    follow it while the hand closes, lift 2 cm per frame from frame 68, carry over
    ``drop_bin`` (frames 75-95), hold; hand opens at frame 100."""
    times = np.arange(FRAMES) * DT_S
    cube_xy = np.stack([np.full(FRAMES, -0.55), 0.75 - 0.1 * times], axis=1)
    path = np.zeros((FRAMES, 3))
    start = np.array([-0.40, -0.10, 0.35])
    path[:30] = start
    grasp_55 = np.array([*cube_xy[55], GRASP_Z_M])
    for k in range(30, 56):
        path[k] = start + (k - 29) / 26.0 * (grasp_55 - start)
    path[55:68, :2] = cube_xy[55:68]
    path[55:, 2] = GRASP_Z_M
    path[68:, :2] = cube_xy[67]
    if lift:
        path[68:, 2] = GRASP_Z_M + 0.02 * np.minimum(np.arange(68, FRAMES) - 67, 8)
    bin_xy = bin_poses_in_base(nominal)[drop_bin][:2, 3]
    for k in range(75, FRAMES):
        s = min((k - 74) / 21.0, 1.0)
        path[k, :2] = cube_xy[67] + s * (bin_xy - cube_xy[67])
    return path


def tracked_episode(nominal, lift: bool = True, drop_bin: str = "bin_0") -> Episode:
    """A cube demo as the real cell records it: arm commands from IK of a palm path, the
    object track valid from frame 5 to TRACK_END only (zeros after, like the tracker)."""
    from r2s2r_datagen.mimicgen.kinematics import BaseLinkArm
    from r2s2r_description.robot import ARM_JOINT_NAMES
    from r2s2r_world.kinematics import top_down_palm_pose

    episode = pick_demonstration(nominal)
    arm = BaseLinkArm(nominal)
    actions = episode.actions.astype(float)
    columns = [ALL_JOINT_NAMES.index(j) for j in ARM_JOINT_NAMES]
    q, previous = actions[0, columns], None
    for k, position in enumerate(_palm_path(nominal, lift, drop_bin)):
        if previous is None or not np.array_equal(position, previous):  # held: same command
            q = arm.solve(top_down_palm_pose(position, 0.0), q, 1e-5, 1e-4)
        actions[k, columns], previous = q, position
    times = episode.timestamps_s
    pose = np.zeros((FRAMES, 7))
    pose[:, 0], pose[:, 1], pose[:, 2], pose[:, 6] = -0.55, 0.75 - 0.1 * times, 0.075, 1.0
    valid = (np.arange(FRAMES) >= 5) & (np.arange(FRAMES) <= TRACK_END)
    pose[~valid] = 0.0
    return Episode(
        metadata=episode.metadata,
        timestamps_s=times,
        images=episode.images,
        joint_pos_rad=actions.astype(np.float32),
        belt_speed_mps=episode.belt_speed_mps,
        actions=actions.astype(np.float32),
        object_pose=pose.astype(np.float32),
        object_pose_valid=valid,
    )


@pytest.fixture(scope="module")
def tracked(nominal):
    return {
        "ok": tracked_episode(nominal),
        "no_lift": tracked_episode(nominal, lift=False),
        "wrong_bin": tracked_episode(nominal, drop_bin="bin_2"),
    }


def test_track_ending_at_the_grasp_annotates_from_the_palm(nominal, tracked):
    episode = tracked["ok"]
    assert not episode.object_pose_valid[TRACK_END + 1 :].any()  # as the tracker gives it
    annotation = annotate(signals(episode), nominal, AnnotationConfig())
    assert annotation.reach_start == REACH_START
    assert annotation.grasp_closed == GRASP_CLOSED
    # palm 2 cm above its closing height at 68, 4 cm (> lift_margin_m 3 cm) at 69
    assert annotation.grasp_end == GRASP_END
    assert annotation.release == RELEASE  # hand opens with the palm over bin_0
    assert annotation.end == FRAMES
    library = SourceLibrary.from_episodes([episode], nominal, AnnotationConfig())
    assert dict(library.skipped) == {}
    demo = library.demos[0]
    assert demo.annotation == annotation  # palm from the library's FK gives the same
    # object motion from the track before the grasp only
    assert demo.belt_speed_mps == pytest.approx(0.1, abs=1e-3)
    expected = np.array([-0.55, 0.75 - 0.1 * REACH_START * DT_S])
    np.testing.assert_allclose(demo.motion.position_m[:2], expected, atol=1e-4)
    np.testing.assert_allclose(demo.palm_poses[RELEASE, :2, 3], [0.4, 0.32], atol=0.03)


@pytest.mark.parametrize(
    ("case", "reason"),
    [("no_lift", "no_detectable_grasp"), ("wrong_bin", "released_outside_bin")],
)
def test_track_ending_at_the_grasp_still_rejects_bad_demos(nominal, tracked, case, reason):
    with pytest.raises(AnnotationError) as error:
        annotate(signals(tracked[case]), nominal, AnnotationConfig())
    assert error.value.reason == reason
    assert "palm" in error.value.detail
