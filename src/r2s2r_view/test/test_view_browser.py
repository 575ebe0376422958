"""The view in headless Chromium: the arm, both images and a tracked object on screen.

What is sent is known: images in colours nothing else in the view has (head: magenta left of
cyan; hand: yellow above blue), a cube track on the belt (red, a colour no URDF material is
near) and the robot from the workspace's URDF posed by its TF (every joint: a frame without a
transform is not drawn). The screenshot, taken once the viewer has drawn (WebGL through
SwiftShader), is searched for each of them where its panel is.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from types import SimpleNamespace as NS  # noqa: N814 (short: messages are nested)

import numpy as np
import pytest
import rerun as rr
from r2s2r_description.cell import build_description
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.tf_tree import fixed_transforms, moving_transforms
from r2s2r_description.urdf import parse_urdf_visuals, to_urdf
from r2s2r_view.config import ServerConfig
from r2s2r_view.rerun_log import OBJECT_COLORS, CellLogger
from r2s2r_view.server import RerunServer
from r2s2r_view.snapshot import decode_png, screenshot

pytestmark = [
    pytest.mark.graph,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None,
        reason="Debian's chromium is not installed (apt-get install -y chromium)",
    ),
]

WIDTH_PX, HEIGHT_PX = 1600, 900


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tf_message(transforms: list[object], stamp_ns: int) -> NS:
    return NS(
        transforms=[
            NS(
                header=NS(stamp=NS(sec=stamp_ns // 10**9, nanosec=0), frame_id=t.parent),
                child_frame_id=t.child,
                transform=NS(
                    translation=NS(
                        x=t.translation_m[0], y=t.translation_m[1], z=t.translation_m[2]
                    ),
                    rotation=NS(
                        w=t.quat_wxyz[0], x=t.quat_wxyz[1], y=t.quat_wxyz[2], z=t.quat_wxyz[3]
                    ),
                ),
            )
            for t in transforms  # type: ignore[attr-defined]
        ]
    )


def image(pixels: np.ndarray) -> NS:
    return NS(
        header=NS(stamp=NS(sec=1, nanosec=0)),
        height=pixels.shape[0],
        width=pixels.shape[1],
        encoding="rgb8",
        is_bigendian=0,
        step=pixels.shape[1] * 3,
        data=pixels.tobytes(),
    )


def mask(pixels: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 40) -> np.ndarray:
    return np.all(np.abs(pixels.astype(int) - np.asarray(rgb)) <= tolerance, axis=-1)


def test_screenshot_shows_arm_images_and_track(tmp_path: Path) -> None:
    description = build_description()
    urdf = to_urdf(description)
    red = OBJECT_COLORS["cube"]
    for visual in parse_urdf_visuals(urdf):  # the cube's red is the track's alone
        assert np.abs(np.asarray(visual.rgba[:3]) * 255 - red).max() > 80, visual.link
    head = np.zeros((120, 160, 3), np.uint8)
    head[:, :80], head[:, 80:] = (255, 0, 255), (0, 255, 255)
    hand = np.zeros((120, 160, 3), np.uint8)
    hand[:60], hand[60:] = (255, 255, 0), (0, 0, 255)
    with RerunServer(ServerConfig(web_port=free_port(), grpc_port=free_port())) as server:
        recording = rr.RecordingStream("r2s2r_view_test", send_properties=False)
        recording.connect_grpc(server.grpc_uri)
        logger = CellLogger(recording)
        logger.send_layout()
        logger.log_robot(urdf)
        logger.log_transforms(tf_message(fixed_transforms(description), 1), static=True)
        # Every revolute joint (a frame with no transform is not drawn), the arm raised.
        pose = dict.fromkeys(ALL_JOINT_NAMES, 0.0) | {"shoulder_lift_joint": -1.0}
        logger.log_transforms(
            tf_message(moving_transforms(description, pose).transforms, 1), static=False
        )
        logger.log_image("head_camera", image(head))
        logger.log_image("hand_camera", image(hand))
        track = NS(
            id=3,
            object_type="cube",
            pose=NS(position=NS(x=-0.63, y=0.2, z=0.08), orientation=NS(x=0, y=0, z=0, w=1)),
        )
        logger.log_tracks(
            NS(header=NS(stamp=NS(sec=1, nanosec=0), frame_id="base_link"), tracks=[track])
        )
        recording.flush()
        png = screenshot(server.url, size_px=(WIDTH_PX, HEIGHT_PX), timeout_s=240.0)
        recording.disconnect()
    (tmp_path / "view.png").write_bytes(png)
    pixels = decode_png(png)
    assert pixels.shape == (HEIGHT_PX, WIDTH_PX, 3)
    left, right = pixels[:, : int(WIDTH_PX * 0.58)], pixels[:, int(WIDTH_PX * 0.62) :]
    # Both images, in the right-hand column, each the way round it was sent.
    magenta, cyan = mask(right, (255, 0, 255), 10), mask(right, (0, 255, 255), 10)
    yellow, blue = mask(right, (255, 255, 0), 10), mask(right, (0, 0, 255), 10)
    for colour in (magenta, cyan, yellow, blue):
        assert colour.sum() > 5000
    assert np.nonzero(magenta)[1].mean() < np.nonzero(cyan)[1].mean()  # magenta left
    assert np.nonzero(yellow)[0].mean() < np.nonzero(blue)[0].mean()  # yellow above
    assert np.nonzero(magenta)[0].mean() < np.nonzero(yellow)[0].mean()  # head above hand
    assert not mask(left, (255, 0, 255), 10).any()  # images only in their panels
    # The arm (its blue links, shaded) and the tracked cube (red) in the 3D panel.
    bluish = (left[..., 2].astype(int) - left[..., 0] > 60) & (
        left[..., 2].astype(int) - left[..., 1] > 30
    )
    assert bluish.sum() > 2000
    reddish = (left[..., 0].astype(int) > 150) & (left[..., 1] < 90) & (left[..., 2] < 90)
    assert reddish.sum() > 30
