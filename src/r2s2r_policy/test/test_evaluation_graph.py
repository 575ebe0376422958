"""The policy_inference node drives the real twin; the ROS harness scores trials.

In-process nodes (twin, belt_speed, policy_inference on one executor thread): the ROS harness
runs two trials and the in-process evaluator, on the same trials, agrees: same outcomes and the
same first action chunk within tolerance. The same through the ``evaluate`` graph's processes,
started by the bring-up's supervisor, is ``tests/test_evaluate_graph.py``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

import torch  # noqa: E402
from r2s2r_belt.nodes.belt_speed import BeltSpeedNode  # noqa: E402
from r2s2r_common.ros.qos import RELIABLE_QOS  # noqa: E402
from r2s2r_description.robot import ARM_JOINT_NAMES  # noqa: E402
from r2s2r_policy.checkpoint import save_checkpoint  # noqa: E402
from r2s2r_policy.evaluation import EvaluationConfig, evaluate_in_process  # noqa: E402
from r2s2r_policy.evaluation.baseline import (  # noqa: E402
    TINY_MODEL_PARAMS,
    robot_policy_spec,
    untrained_policy,
)
from r2s2r_policy.evaluation.ros import evaluate_ros  # noqa: E402
from r2s2r_policy.inference.trace import load_trace  # noqa: E402
from r2s2r_policy.nodes.policy_inference import PolicyInferenceNode  # noqa: E402
from r2s2r_sim.nodes.real_twin import RealTwinNode  # noqa: E402
from r2s2r_testing.ros import ros_context_of  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from test_evaluation_core import short_twin  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

# An own DDS domain: keep this graph apart from other tests on the machine.
DOMAIN_IN_PROCESS = 1 + os.getpid() % 100

TRIALS = EvaluationConfig(
    trials_per_condition={"nominal": 1, "lighting": 1}, trial_wall_timeout_s=30.0
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("graph")
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=4)
    return save_checkpoint(tmp / "ckpt", policy), short_twin(tmp, 2.0)


class GraphThread:
    """Twin, belt_speed and policy_inference in this process, spun on their own thread."""

    def __init__(self, context: object, checkpoint: Path, twin: Path) -> None:
        self.context = context
        self.checkpoint, self.twin = checkpoint, twin
        self.traces = checkpoint.parent / "traces"  # the node's traces, images kept
        self.chunks: list[JointTrajectory] = []
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # Nodes are built on this thread: the twin's EGL context must stay on one thread.
        context = self.context
        try:
            nodes = [
                RealTwinNode(
                    context=context,
                    parameter_overrides=[
                        Parameter("twin_config_path", value=str(self.twin)),
                        Parameter("publish_depth", value=False),
                    ],
                ),
                BeltSpeedNode(context=context),
                PolicyInferenceNode(
                    context=context,
                    parameter_overrides=[
                        Parameter("checkpoint_path", value=str(self.checkpoint)),
                        Parameter("image_height_px", value=32),
                        Parameter("image_width_px", value=32),
                        Parameter("trace_dir", value=str(self.traces)),
                        Parameter("trace_images", value=True),
                    ],
                ),
                Node("chunk_probe", context=context),
            ]
            nodes[3].create_subscription(
                JointTrajectory,
                "/arm_controller/joint_trajectory",
                lambda msg: self.chunks.append(msg) if len(msg.points) > 1 else None,
                RELIABLE_QOS,
            )
            executor = SingleThreadedExecutor(context=context)
            for node in nodes:
                executor.add_node(node)
            assert nodes[0].autostart()
            assert nodes[2].trigger_configure().value == 0 or nodes[2].engine is not None
            self.ready.set()
            while not self.stop.is_set():
                executor.spin_once(timeout_sec=0.01)
            executor.shutdown()
            nodes[0].trigger_shutdown()  # frees the renderers on the thread that made them
            for node in nodes:
                node.destroy_node()
        except BaseException as error:
            self.error = error
            self.ready.set()


@pytest.fixture(scope="module")
def in_process_graph(files: tuple[Path, Path]) -> Iterator[GraphThread]:
    with ros_context_of(DOMAIN_IN_PROCESS) as context:
        graph = GraphThread(context, *files)
        assert graph.ready.wait(30.0) and graph.error is None, graph.error
        yield graph
        graph.stop.set()
        graph.thread.join(10.0)


def test_ros_harness_agrees_with_in_process(
    in_process_graph: GraphThread, files: tuple[Path, Path]
) -> None:
    checkpoint, twin = files
    ros = evaluate_ros(checkpoint, TRIALS, context=in_process_graph.context)
    assert [r.reason for r in ros.records] != ["harness_timeout"] * 2
    assert all(r.object_type for r in ros.records)  # outcomes came from the twin
    first_ros = in_process_graph.chunks[0]
    assert list(first_ros.joint_names) == list(ARM_JOINT_NAMES)

    firsts: dict[int, np.ndarray] = {}
    local = evaluate_in_process(
        checkpoint,
        TRIALS,
        twin_config_path=twin,
        on_command=lambda trial, t, c: firsts.setdefault(trial.index, c.positions_rad),
    )
    for a, b in zip(ros.records, local.records, strict=True):
        assert (a.seed, a.condition, a.success, a.reason, a.object_type) == (
            b.seed,
            b.condition,
            b.success,
            b.reason,
            b.object_type,
        )
        assert a.duration_s == pytest.approx(b.duration_s, abs=0.05)
    # The node's trace of each trial keeps the images it read and the latents it computed
    # (what `r2s2r analyze` re-runs policies on, opt-in on the graph: trace_images).
    trace = load_trace(sorted(in_process_graph.traces.glob("activation_*.npz"))[0])
    ran = trace.commanded()
    assert ran.sum() >= 3 and trace.images("head_camera_rgb").shape[1:] == (32, 32, 3)
    assert np.isfinite(trace.arrays["latent"][ran]).all()
    ros_chunk = np.array([p.positions for p in first_ros.points])
    # Same policy, same pipeline; the inputs differ only by capture timing (a frame, a few ms
    # of belt motion, the belt-speed estimate's history), so the first chunks agree closely.
    np.testing.assert_allclose(ros_chunk, firsts[0][:, :6], atol=2e-3)
