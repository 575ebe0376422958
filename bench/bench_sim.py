"""Simulator benchmark: physics rate, camera rates, and pipeline vs raw MuJoCo.

Run: python bench/bench_sim.py [--world config/twin/default.yaml]
The last line is one JSON object: {"benchmark": "sim", "figures": [...]}.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import benchlib
import mujoco
import numpy as np
from r2s2r_description.cameras import CAMERA_NAMES
from r2s2r_sim.backend import ObjectInstance
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import load_world

REPO = Path(__file__).resolve().parents[1]


def timed(fn, repeats: int) -> float:
    """Calls per second of fn over repeats (after one warm-up call)."""
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return repeats / (time.perf_counter() - start)


def scene(world_path: Path) -> MujocoBackend:
    world = load_world(world_path)
    backend = MujocoBackend()
    objects = [ObjectInstance("object_0", "cube"), ObjectInstance("object_1", "cylinder")]
    backend.reset(world, seed=0, objects=objects)
    belt = world.belt.pose.to_pose().matrix()
    for index, obj in enumerate(objects):
        height = world.objects[obj.type_name].size_m[2]
        backend.spawn_object(
            obj.name, (belt @ np.array([-0.3 + 0.2 * index, 0.0, height / 2, 1]))[:3]
        )
    backend.step(100)
    return backend


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--world", type=Path, default=REPO / "config" / "twin" / "default.yaml")
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated time per ratio run")
    args = parser.parse_args()
    backend = scene(args.world)
    model, data = backend.model, backend.data
    world = backend.world
    steps_per_frame = round(1.0 / (world.cameras.head.rate_hz * world.physics.timestep_s))

    figures = []
    physics_sps = timed(lambda: backend.step(100), 30) * 100
    raw_sps = timed(lambda: mujoco.mj_step(model, data, nstep=100), 30) * 100
    figures.append(
        {
            "name": "physics_steps_per_s",
            "value": round(physics_sps),
            "unit": "steps/s",
            "goal": None,
        }
    )
    figures.append(
        {"name": "raw_mj_step_per_s", "value": round(raw_sps), "unit": "steps/s", "goal": None}
    )
    for camera in CAMERA_NAMES:
        rgb = timed(lambda c=camera: backend.render(c), 60)
        depth = timed(lambda c=camera: backend.render_depth(c), 60)
        figures.append(
            {"name": f"{camera}_rgb_fps", "value": round(rgb, 1), "unit": "frames/s", "goal": 150}
        )
        figures.append(
            {
                "name": f"{camera}_depth_fps",
                "value": round(depth, 1),
                "unit": "frames/s",
                "goal": None,
            }
        )

    frames = int(args.seconds * world.cameras.head.rate_hz)

    def pipeline() -> None:
        for _ in range(frames):
            backend.step(steps_per_frame)
            for camera in CAMERA_NAMES:
                backend.render(camera)

    # Raw MuJoCo on the same model: same renderer settings (no shadows/reflections), no
    # controllers, no distortion, no blur.
    raw_renderers = {}
    for camera in CAMERA_NAMES:
        params = world.cameras.head if camera == "head_camera" else world.cameras.hand
        renderer = mujoco.Renderer(model, params.height_px, params.width_px)
        for flag in (
            mujoco.mjtRndFlag.mjRND_SHADOW,
            mujoco.mjtRndFlag.mjRND_REFLECTION,
            mujoco.mjtRndFlag.mjRND_SKYBOX,
        ):
            renderer.scene.flags[flag] = 0
        raw_renderers[camera] = renderer

    def raw() -> None:
        for _ in range(frames):
            mujoco.mj_step(model, data, nstep=steps_per_frame)
            for camera, renderer in raw_renderers.items():
                renderer.update_scene(data, camera=camera)
                renderer.render()

    pipeline_rate = timed(pipeline, 3)
    raw_rate = timed(raw, 3)
    ratio = pipeline_rate / raw_rate
    figures.append(
        {
            "name": "pipeline_over_raw_step_render_ratio",
            "value": round(ratio, 3),
            "unit": "ratio",
            "goal": 0.8,
        }
    )
    figures.append(
        {
            "name": "pipeline_real_time_factor_cameras_10hz",
            "value": round(pipeline_rate * args.seconds, 2),
            "unit": "x real time",
            "goal": 1.0,
        }
    )

    print(
        f"world: {args.world}  (MuJoCo {mujoco.__version__}, MUJOCO_GL={os.environ['MUJOCO_GL']})"
    )
    benchlib.report("sim", figures)


if __name__ == "__main__":
    main()
