"""The ROS cell client against the real twin node (separate executors, fresh context)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

from r2s2r_calibration.intrinsics import ChessboardConfig, detect_board  # noqa: E402
from r2s2r_calibration.nodes.ros_client import CellTimeoutError, RosCellClient  # noqa: E402
from r2s2r_description.robot import ARM_JOINT_NAMES  # noqa: E402
from r2s2r_sim.nodes import real_twin  # noqa: E402
from r2s2r_testing.ros import ros_context_of  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402

NOMINAL = Path(__file__).resolve().parents[3] / "config" / "world" / "nominal.yaml"


@pytest.fixture(scope="module")
def cell():
    with ros_context_of() as context:
        # A "twin" whose hidden world is the nominal one: this test checks plumbing, not truth.
        twin = real_twin.RealTwinNode(
            context=context,
            parameter_overrides=[
                rclpy.parameter.Parameter("twin_config_path", value=str(NOMINAL)),
                rclpy.parameter.Parameter("real_time_factor", value=1.0),
            ],
        )
        node = Node("calibration_client_test", context=context)
        # Twin and client share one process (and the GIL) here; the limit allows a loaded machine.
        client = RosCellClient(node, board_operator=True, timeout_s=60.0)
        twin_executor = SingleThreadedExecutor(context=context)  # EGL: render on one thread
        twin_executor.add_node(twin)
        # As in `r2s2r ground`: one thread (rclpy's MultiThreadedExecutor busy-waits at 500 Hz
        # and its spinning thread starves the twin of the GIL: 2 s of cell time took 56 s).
        client_executor = SingleThreadedExecutor(context=context)
        client_executor.add_node(node)
        started = threading.Event()

        def run_twin() -> None:
            # EGL contexts belong to the thread that made them: configure and spin on one thread.
            started.ok = twin.autostart()  # type: ignore[attr-defined]
            started.set()
            twin_executor.spin()
            twin.destroy_node()  # frees the renderers on the thread that owns their EGL context

        twin_thread = threading.Thread(target=run_twin, daemon=True)
        twin_thread.start()
        threading.Thread(target=client_executor.spin, daemon=True).start()
        assert started.wait(30.0) and started.ok  # type: ignore[attr-defined]
        # Refuses a second /joint_states publisher (another run's twin on this ROS_DOMAIN_ID), whose
        # clock would mix into cell time and the joint log.
        client.wait_for_cell()
        yield client
        twin_executor.shutdown()
        twin_thread.join(10.0)
        client_executor.shutdown()
        node.destroy_node()


def test_cell_time_static_frames_and_camera_info(cell):
    cell.wait_for_cell()
    assert cell.now_s() > 0.0
    base = cell.frame_pose("base_link")
    np.testing.assert_allclose(base[:3, 3], (0.0, 0.0, 0.75), atol=1e-6)
    camera = cell.camera_model("head_camera")
    assert camera.width_px == 128 and camera.camera_matrix[0, 0] == pytest.approx(120.0)


def test_board_placed_over_ros_is_seen_by_the_camera(cell):
    board = ChessboardConfig()
    pose = np.eye(4)
    middle = np.array([*np.array(board.getChessboardSize()) * board.square_length_m / 2, 0.0])
    pose[:3, 3] = np.array([0.0, 0.0, 0.6]) - middle
    cell.board_operator.place_board("head_camera_optical_frame", pose)
    _, image = cell.capture_image("head_camera", cell.now_s() + 0.5)
    assert image.shape == (128, 128, 3)
    assert detect_board(board, image) is not None
    cell.board_operator.remove_board()
    _, image = cell.capture_image("head_camera", cell.now_s() + 0.5)
    assert detect_board(board, image) is None


def test_trajectory_moves_the_arm_and_the_joint_log_has_no_gaps(cell):
    start_q = cell.joint_positions()[:6]
    target = start_q.copy()
    target[5] += 0.2
    start = cell.now_s() + 0.3
    cell.start_joint_log()
    cell.send_trajectory(
        "arm", ARM_JOINT_NAMES, np.array([0.0, 0.4]), np.vstack([start_q, target]), start
    )
    cell.wait_until(start + 1.5)
    log = cell.stop_joint_log()
    assert log.positions[-1, 5] == pytest.approx(target[5], abs=0.02)
    # The 2 ms control periods arrive (a loaded machine may drop a few samples of the stream).
    gaps = np.diff(log.stamps_s)
    assert np.median(gaps) < 0.0025
    assert np.mean(gaps > 0.0025) < 0.05 and np.max(gaps) < 0.05
    times, angles = cell.encoder_samples(0.2)
    assert times.size > 10 and np.all(np.diff(angles) > 0.0)  # the belt runs


def test_streams_released_from_a_worker_thread_while_spinning_can_be_taken_again(cell):
    for _ in range(3):  # each release destroys the subscriptions on the executor's thread
        stamp, image = cell.capture_image("head_camera", cell.now_s())
        assert image.ndim == 3 and stamp > 0.0
        _, depth = cell.capture_depth()
        assert depth.dtype == np.float32
        cell.release_streams()
        topics = [subscription.topic_name for subscription in cell.node.subscriptions]
        assert not [topic for topic in topics if "camera" in topic], topics


def test_a_second_cell_on_the_domain_is_refused(cell):
    from r2s2r_calibration.nodes.ros_client import SecondCellError
    from sensor_msgs.msg import JointState

    other = Node("another_cell", context=cell.node.context)
    publisher = other.create_publisher(JointState, "/joint_states", 10)
    try:
        deadline = time.monotonic() + 10.0
        while cell.node.count_publishers("/joint_states") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(SecondCellError, match="2 publishers of /joint_states"):
            cell.wait_for_cell()
    finally:
        other.destroy_publisher(publisher)
        other.destroy_node()


def test_waiting_for_a_far_cell_time_times_out_only_when_the_clock_stalls(cell):
    """A slow cell (real-time factor < 1, a loaded machine) is waited for while time moves."""
    limit = cell.timeout_s
    cell.timeout_s = 1.0
    try:
        start = cell.now_s()
        started_wall = time.monotonic()
        cell.wait_until(start + 2.5)  # longer than the limit, but the clock keeps moving
        assert cell.now_s() >= start + 2.5 - 1e-6
        assert time.monotonic() - started_wall > 1.0
    finally:
        cell.timeout_s = limit
    # A client on a domain without a cell: its clock never moves, the wait ends at the limit.
    with ros_context_of((int(os.environ.get("ROS_DOMAIN_ID", "0")) + 1) % 230) as context:
        node = Node("stalled_client_test", context=context)
        lonely = RosCellClient(node, timeout_s=0.5)
        with pytest.raises(CellTimeoutError, match="did not advance"):
            lonely.wait_until(10.0)
        node.destroy_node()
