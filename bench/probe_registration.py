"""Scene-registration probe: the registration step against an in-process twin, scored.

Runs :func:`r2s2r_calibration.procedure.run_grounding` with only the ``registration`` step
(head camera from ``camera_info`` / ``/tf_static``: nominal, uncalibrated), then again with the
twin's *true* head camera intrinsics and pose served in place of the published ones (to see the
registration's own accuracy), and, when ``--artifact`` names a grounding artifact with a head
camera record (default ``runs/g2/artifact.yaml``, a calibration of the default twin), with that
calibrated head camera put into the run's artifact, as :func:`run_grounding` does after the board
steps. Only this probe reads the twin truth, to score the artifact. Errors are given in the
element frame (belt: x = travel, unobservable, held at nominal); the rotation error is also split
into roll/pitch/yaw about the element axes.

Run: ``MUJOCO_GL=egl python bench/probe_registration.py [--twin default] [--artifact PATH]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")


class TrueHeadCameraClient:
    """A cell client that publishes the twin's true head camera (probe only)."""

    def __init__(self, client: Any, truth: Any):
        from r2s2r_calibration.geometry import pose_from_xyz_rpy
        from r2s2r_common.camera_model import CameraModel
        from r2s2r_description.transforms import invert_transform as invert_pose

        self._client = client
        head = truth.cameras.head
        d = head.distortion
        self._camera = CameraModel(
            width_px=head.width_px,
            height_px=head.height_px,
            camera_matrix=np.array(
                [[head.fx_px, 0, head.cx_px], [0, head.fy_px, head.cy_px], [0, 0, 1.0]]
            ),
            distortion=np.array([d.k1, d.k2, d.p1, d.p2, d.k3]),
        )
        # The procedure works in base_link; keep the true camera-to-base transform under the
        # published (nominal) base pose.
        T_true_base = truth.robot.base_pose.to_pose().matrix()
        T_link_optical = pose_from_xyz_rpy((0, 0, 0), (-np.pi / 2, 0.0, -np.pi / 2))
        T_base_optical = invert_pose(T_true_base) @ head.pose.to_pose().matrix() @ T_link_optical
        self._T_world_optical = client.frame_pose("base_link") @ T_base_optical

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def camera_model(self, camera: str) -> Any:
        """Return the true head camera model."""
        return self._camera if camera == "head_camera" else self._client.camera_model(camera)

    def frame_pose(self, frame: str) -> Any:
        """Return the true head optical frame, else the published pose."""
        if frame == "head_camera_optical_frame":
            return self._T_world_optical
        return self._client.frame_pose(frame)


def score(label: str, artifact: Any, truth: Any, nominal: Any) -> list[dict[str, Any]]:
    """Pose errors of the registered elements in base_link, split along the element axes."""
    from r2s2r_calibration.geometry import pose_error
    from r2s2r_description.transforms import invert_transform as invert_pose

    T_nominal_base = nominal.robot.base_pose.to_pose().matrix()
    T_true_base = truth.robot.base_pose.to_pose().matrix()
    rows = []
    for name in ("belt", "bin_0", "bin_1", "bin_2"):
        record = artifact.scene.get(name)
        if record is None:
            print(f"[{label}] {name:6s} not registered")
            continue
        world = truth.belt.pose if name == "belt" else truth.bins[name].pose
        true_pose = invert_pose(T_true_base) @ world.to_pose().matrix()
        estimate = invert_pose(T_nominal_base) @ record.pose.matrix()
        local = true_pose[:3, :3].T @ (estimate[:3, 3] - true_pose[:3, 3])
        _, rotation = pose_error(estimate, true_pose)
        rotvec = Rotation.from_matrix(true_pose[:3, :3].T @ estimate[:3, :3]).as_rotvec()
        observed = float(np.linalg.norm(local[1:] if name == "belt" else local))
        rows.append(
            {
                "run": label,
                "element": name,
                "error_xyz_mm": [float(v) for v in 1000 * local],
                "observed_position_error_mm": 1000 * observed,
                "rotation_error_deg": math.degrees(rotation),
                "rotation_error_rpy_deg": [math.degrees(v) for v in rotvec],
                "held_at_nominal": list(record.held_at_nominal),
            }
        )
        print(
            f"[{label}] {name:6s} error x/y/z {1000 * local[0]:+6.2f} {1000 * local[1]:+6.2f} "
            f"{1000 * local[2]:+6.2f} mm, observed part {1000 * observed:5.2f} mm (target 3), "
            f"rotation {math.degrees(rotation):.3f} deg (target 0.5; r/p/y "
            f"{' '.join(f'{math.degrees(v):+.2f}' for v in rotvec)}), fitness "
            f"{record.fitness:.2f}, rmse {1000 * record.inlier_rmse_m:.2f} mm, held "
            f"{record.held_at_nominal}"
        )
    return rows


def main() -> int:
    """Run the probe; prints one line per element and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twin", default="default")
    parser.add_argument(
        "--artifact",
        default=None,
        help="grounding artifact whose head camera record is used for a third run ('' = none; "
        "default: runs/g2/artifact.yaml, a calibration of the default twin, with --twin default)",
    )
    args = parser.parse_args()
    if args.artifact is None:
        args.artifact = str(ROOT / "runs/g2/artifact.yaml") if args.twin == "default" else ""
    from r2s2r_calibration.artifact import GroundingArtifact, load_artifact
    from r2s2r_calibration.procedure import GroundingRun, ProcedureConfig, run_grounding
    from r2s2r_calibration.sim_cell_client import SimCellClient
    from r2s2r_calibration.steps.scene import run_registration
    from r2s2r_sim.cell_runtime import SimCell
    from r2s2r_sim.mujoco_backend import MujocoBackend
    from r2s2r_world.world import load_world

    nominal = load_world(ROOT / "config/world/nominal.yaml")
    path = ROOT / "config" / "twin" / f"{args.twin}.yaml"
    truth = load_world(path)  # probe only: score against the hidden truth
    cell = SimCell(MujocoBackend(), load_world(path), nominal)
    try:
        client = SimCellClient(cell)
        for label, cell_client in (
            ("published camera", client),
            ("true camera", TrueHeadCameraClient(client, truth)),
        ):
            run = run_grounding(cell_client, nominal, ["registration"], progress=print)
            for step, message in run.failures.items():
                print(f"[{label}] FAILED {step}: {message}")
            score(label, run.artifact, truth, nominal)
        if args.artifact and Path(args.artifact).is_file():
            cameras = load_artifact(args.artifact).cameras
            if "head" in cameras:
                label = f"calibrated camera ({Path(args.artifact).parent.name})"
                run = GroundingRun(artifact=GroundingArtifact(cameras=dict(cameras)))
                try:
                    run_registration(client, nominal, ProcedureConfig(), run, print)
                except Exception as error:  # report it and score what was kept
                    print(f"[{label}] FAILED registration: {error}")
                score(label, run.artifact, truth, nominal)
    finally:
        cell.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
