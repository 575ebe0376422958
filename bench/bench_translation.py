"""Sim-to-real translation: speed and closeness on frames of the same states (issue 50).

The "real" camera is a family twin sampled with its appearance (``--appearance``); the
"rendered" frames are, at the same arm poses (random reachable poses, held for 0.4 s, the belt
empty), the twin's own world without its cameras' look (``--rendered grounded``, default: what a
perfect world grounding renders, so the gap is the look alone) or the nominal world's. The
structure translator is trained on the twin's frames of training poses only and scored on held-
out poses: the paired error (mean |translated - real|, 0..255), KID on ImageNet features and a
linear real-vs-sim probe's held-out accuracy on them, against the rendered frames' own; KID of
real training vs held-out frames is the floor. Frames are rendered in process (MuJoCo), not
through the cell's ROS interfaces: a measurement of the translator, not of a pipeline. Figures:
one table, then one JSON line.

    python bench/bench_translation.py [--poses 240] [--steps 3000] [--twin-seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from benchlib import print_json_line
from r2s2r_common.config import resolve_config_path
from r2s2r_description.robot import ARM_JOINT_NAMES, HOME_POSITIONS, JOINT_LIMITS
from r2s2r_policy.analysis.domain import fit_probe
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_translation.metrics import ImageNetFeatures, kernel_inception_distance
from r2s2r_translation.network import StructureToReal, channels_last
from r2s2r_translation.structure import STRUCTURE_CHANNELS, structure_statistics
from r2s2r_translation.structure_translator import (
    StructureTrainConfig,
    train_structure_translator,
    translate_frames,
)
from r2s2r_world.world import CameraAppearance, load_world

from r2s2r_sim import twin_family

CAMERAS = ("head_camera", "hand_camera")


def render_poses(world, poses: np.ndarray, px: int) -> dict[str, np.ndarray]:
    import cv2

    backend = MujocoBackend()
    out: dict[str, list[np.ndarray]] = {c: [] for c in CAMERAS}
    for index, pose in enumerate(poses):
        backend.reset(world, index)
        backend.set_joint_targets(ARM_JOINT_NAMES, pose)
        backend.step(200)
        for camera in CAMERAS:
            image = backend.render(camera)
            out[camera].append(cv2.resize(image, (px, px), interpolation=cv2.INTER_AREA))
    backend.close()
    return {c: np.stack(v) for c, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=240)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--twin-seed", type=int, default=1)
    parser.add_argument("--image-px", type=int, default=64)
    parser.add_argument(
        "--record",
        default=None,
        help="also write the figures with this command and its commit to this JSON file "
        "(e.g. results/translation_bench.json)",
    )
    parser.add_argument(
        "--rendered",
        choices=["grounded", "nominal"],
        default="grounded",
        help="grounded: the twin's own world without its cameras' look (what perfect world "
        "grounding renders: the gap is the look alone); nominal: the nominal world",
    )
    args = parser.parse_args()
    nominal = load_world(resolve_config_path("world/nominal.yaml"))
    family = twin_family.load_family(resolve_config_path(twin_family.FAMILY_PATH))
    twin = twin_family.sample_twin(
        nominal, family, args.twin_seed, twin_family.OUTER_FIFTH, appearance=True
    )
    rng = np.random.default_rng(0)
    home = np.array([HOME_POSITIONS[j] for j in ARM_JOINT_NAMES])
    spread = np.array(
        [0.5 * (JOINT_LIMITS[j].upper_rad - JOINT_LIMITS[j].lower_rad) for j in ARM_JOINT_NAMES]
    )
    poses = home + rng.uniform(-0.15, 0.15, (args.poses, len(home))) * spread
    started = time.monotonic()
    real = render_poses(twin, poses, args.image_px)
    plain = twin.model_copy(deep=True)
    plain.cameras.head.appearance = CameraAppearance()
    plain.cameras.hand.appearance = CameraAppearance()
    rendered = render_poses(plain if args.rendered == "grounded" else nominal, poses, args.image_px)
    render_s = time.monotonic() - started
    held = args.poses // 5
    features = ImageNetFeatures()
    rows, figures = [], []
    for camera in CAMERAS:
        config = StructureTrainConfig(steps=args.steps, eval_every=max(1, args.steps // 10))
        network, log = train_structure_translator(real[camera][held:], real[camera][:held], config)
        sim_stats = structure_statistics(rendered[camera])
        translated = translate_frames(network, rendered[camera][:held], sim_stats)
        truth = real[camera][:held].astype(float)
        err_r = float(np.abs(rendered[camera][:held] - truth).mean())
        err_t = float(np.abs(translated - truth).mean())
        f_real = features(real[camera][held:])
        f_rendered, f_translated = features(rendered[camera][:held]), features(translated)
        kid_t = kernel_inception_distance(f_real, f_translated, 50, held)
        kid_floor = kernel_inception_distance(f_real, features(real[camera][:held]), 50, held)
        probe_r = fit_probe(f_real, f_rendered).accuracy
        probe_t = fit_probe(f_real, f_translated).accuracy
        kid_r = kernel_inception_distance(f_real, f_rendered, 50, held)
        rows.append(
            (camera, err_r, err_t, kid_r.value, kid_t.value, kid_floor.value, probe_r, probe_t,
             log.wall_s)
        )  # fmt: skip
        figures += [
            {
                "name": f"{camera}_paired_error_rendered",
                "value": round(err_r, 2),
                "unit": "0..255",
                "goal": None,
            },
            {
                "name": f"{camera}_paired_error_translated",
                "value": round(err_t, 2),
                "unit": "0..255",
                "goal": f"< {err_r:.2f}",
            },
            {
                "name": f"{camera}_kid_rendered",
                "value": round(kid_r.value, 4),
                "unit": "KID",
                "goal": None,
            },
            {
                "name": f"{camera}_kid_translated",
                "value": round(kid_t.value, 4),
                "unit": "KID",
                "goal": f"< {kid_r.value:.4f}",
            },
            {
                "name": f"{camera}_kid_real_vs_real",
                "value": round(kid_floor.value, 4),
                "unit": "KID",
                "goal": None,
            },
            {
                "name": f"{camera}_probe_rendered",
                "value": round(probe_r, 3),
                "unit": "accuracy",
                "goal": None,
            },
            {
                "name": f"{camera}_probe_translated",
                "value": round(probe_t, 3),
                "unit": "accuracy",
                "goal": f"< {probe_r:.3f}",
            },
            {
                "name": f"{camera}_training_wall",
                "value": round(log.wall_s / 60, 1),
                "unit": "min",
                "goal": "<= 30",
            },
        ]
    # Translation speed at the working size, the network as trained, batch 256.
    network = channels_last(
        StructureToReal(STRUCTURE_CHANNELS, StructureTrainConfig().width)
    ).eval()
    frames = np.repeat(
        rendered["head_camera"], max(1, 2048 // len(rendered["head_camera"])), axis=0
    )[:2048]
    stats = structure_statistics(frames)
    translate_frames(network, frames[:256], stats)
    started = time.monotonic()
    translate_frames(network, frames, stats)
    fps = len(frames) / (time.monotonic() - started)
    figures.append(
        {"name": "translation_speed", "value": round(fps), "unit": "frames/s", "goal": ">= 500"}
    )
    print(
        f"{args.poses} poses ({held} held out), twin outer fifth seed {args.twin_seed} with "
        f"appearance, {args.image_px} px, rendered: {args.rendered} world, in {render_s:.0f} s, "
        f"torch threads {torch.get_num_threads()}"
    )
    print(
        f"{'camera':<12} {'err rend.':>9} {'err transl.':>11} {'KID rend.':>9} "
        f"{'KID transl.':>11} {'KID real':>8} {'probe rend.':>11} {'probe transl.':>13} "
        f"{'train min':>9}"
    )
    for camera, er, et, kr, kt, kf, pr, pt, wall in rows:
        print(
            f"{camera:<12} {er:9.2f} {et:11.2f} {kr:9.4f} {kt:11.4f} {kf:8.4f} {pr:11.2f} "
            f"{pt:13.2f} {wall / 60:9.1f}"
        )
    print(f"translation: {fps:.0f} frames/s at {args.image_px} px (goal >= 500)")
    if args.record:
        from r2s2r.pipeline.cache import current_commit

        record = {
            "benchmark": "translation",
            "command": " ".join(["python", "bench/bench_translation.py", *sys.argv[1:]]),
            "commit": current_commit(Path(__file__).parent),
            "settings": vars(args),
            "figures": figures,
        }
        Path(args.record).write_text(json.dumps(record, indent=2, default=float) + "\n")
    print_json_line(
        "translation",
        figures,
        poses=args.poses,
        twin_seed=args.twin_seed,
        steps=args.steps,
        rendered=args.rendered,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
