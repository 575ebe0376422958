"""The URDF that rviz gets and the MuJoCo model the simulator runs agree on kinematics."""

import mujoco
import numpy as np
import pytest
from r2s2r_description.cameras import CAMERAS, HAND, HEAD, UnknownCameraError
from r2s2r_description.cell import NOMINAL_LAYOUT, CellLayout, build_description
from r2s2r_description.frames import BASE_LINK, PALM_LINK, WORLD_FRAME
from r2s2r_description.mjcf import body_pose, to_mjspec
from r2s2r_description.model import Description, DescriptionError, Joint, Link, forward_kinematics
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HAND_JOINT_NAMES, JOINT_LIMITS
from r2s2r_description.transforms import Pose, matrix_to_quat, quat_to_matrix, rpy_to_matrix
from r2s2r_description.urdf import to_urdf, urdf_forward_kinematics

from r2s2r_description import cameras

CHECKED_FRAMES = (
    "palm_link",
    "flange",
    "hand_camera_link",
    "hand_camera_optical_frame",
    "head_camera_optical_frame",
    "belt_link",
    "index_distal_link",
    "thumb_distal_link",
)


def test_joint_sets() -> None:
    assert len(ARM_JOINT_NAMES) == 6
    assert len(HAND_JOINT_NAMES) == 12
    assert set(JOINT_LIMITS) == set(ALL_JOINT_NAMES)
    description = build_description()
    assert tuple(j.name for j in description.movable_joints) == ALL_JOINT_NAMES


@pytest.mark.parametrize(
    "layout",
    [NOMINAL_LAYOUT, CellLayout(hand_camera_pose=Pose((0.05, 0.01, 0.0), (0.1, -1.4, 0.2)))],
)
def test_urdf_and_mujoco_forward_kinematics_agree(layout: CellLayout) -> None:
    description = build_description(layout)
    urdf_text = to_urdf(description)
    model = to_mjspec(description).compile()
    data = mujoco.MjData(model)
    rng = np.random.default_rng(7)
    for _ in range(20):
        q = {
            name: float(rng.uniform(max(lim.lower_rad, -3.0), min(lim.upper_rad, 3.0)))
            for name, lim in JOINT_LIMITS.items()
        }
        for name, value in q.items():
            data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
        mujoco.mj_kinematics(model, data)
        urdf_poses = urdf_forward_kinematics(urdf_text, q)
        desc_poses = forward_kinematics(description, q)
        for frame in CHECKED_FRAMES:
            sim = body_pose(model, data, frame)
            np.testing.assert_allclose(urdf_poses[frame][:3, 3], sim[:3, 3], atol=1e-6)
            np.testing.assert_allclose(urdf_poses[frame][:3, :3], sim[:3, :3], atol=1e-6)
            np.testing.assert_allclose(desc_poses[frame], sim, atol=1e-6)


def test_mujoco_camera_looks_along_optical_z() -> None:
    model = to_mjspec(build_description()).compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    for camera in ("head_camera", "hand_camera"):
        optical = body_pose(model, data, f"{camera}_optical_frame")
        cam_mat = data.cam_xmat[model.camera(camera).id].reshape(3, 3)
        # MuJoCo cameras look along -z with +y up; the optical frame has z forward, y down.
        np.testing.assert_allclose(-cam_mat[:, 2], optical[:3, 2], atol=1e-9)
        np.testing.assert_allclose(-cam_mat[:, 1], optical[:3, 1], atol=1e-9)


def test_quaternion_round_trip() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        rotation = rpy_to_matrix(rng.uniform(-3, 3, size=3))
        np.testing.assert_allclose(quat_to_matrix(matrix_to_quat(rotation)), rotation, atol=1e-12)


def test_malformed_tree_is_rejected() -> None:
    with pytest.raises(DescriptionError, match="parent 'b'"):
        Description(
            "x",
            "a",
            (Link("a"), Link("b"), Link("c")),
            (Joint("j", "b", "c"), Joint("k", "a", "b")),
        )
    with pytest.raises(DescriptionError, match="unknown joints"):
        forward_kinematics(build_description(), {"no_such_joint": 0.0})


def test_the_cameras_and_frames_are_the_descriptions() -> None:
    # The names are the cell's contract (topics, datasets, world files, tf): pinned here.
    assert [(c.name, c.world_key, c.image_key) for c in CAMERAS] == [
        ("head_camera", "head", "head_camera_rgb"),
        ("hand_camera", "hand", "hand_camera_rgb"),
    ]
    assert (HEAD.link, HEAD.optical_frame, HEAD.mount_frame) == (
        "head_camera_link",
        "head_camera_optical_frame",
        "world",
    )
    assert (HAND.link, HAND.optical_frame, HAND.mount_frame) == (
        "hand_camera_link",
        "hand_camera_optical_frame",
        "palm_link",
    )
    assert (WORLD_FRAME, BASE_LINK, PALM_LINK) == ("world", "base_link", "palm_link")
    description = build_description()
    assert description.root == WORLD_FRAME
    links = {link.name: link for link in description.links}
    parents = {joint.child: joint.parent for joint in description.joints}
    assert {BASE_LINK, PALM_LINK} <= set(links)
    for cell_camera in CAMERAS:
        assert links[cell_camera.optical_frame].camera == cell_camera.name
        assert parents[cell_camera.optical_frame] == cell_camera.link
        assert parents[cell_camera.link] == cell_camera.mount_frame
        assert cameras.camera(cell_camera.name) is cell_camera
    with pytest.raises(UnknownCameraError, match=r"'wrist_camera'.*'head_camera', 'hand_camera'"):
        cameras.camera("wrist_camera")
