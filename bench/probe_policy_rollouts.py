"""Why a policy misses: palm-to-object geometry of its rollouts on the twin (diagnostic).

Runs a checkpoint in process on validation seeds (20000 and up by default) and, from the twin's
truth (never a policy input), reports per trial: the outcome, the closest approach of the palm
to the first object, the object's offset in the palm frame at that moment, and when the hand
closed (hand flexion above half of its range) relative to that moment. A demonstration set can
be summarised the same way (``--dataset``, from its tracked-object input) to compare the
policy's grasps with the demonstrations'.

    python bench/probe_policy_rollouts.py CHECKPOINT [--trials nominal=10] [--dataset D]

Prints one row per trial and a summary, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import torch
from r2s2r_description.robot import ALL_JOINT_NAMES, HAND_JOINT_NAMES, JOINT_LIMITS
from r2s2r_policy.evaluation.in_process import evaluate_in_process
from r2s2r_policy.evaluation.trials import VALIDATION_BASE_SEED, EvaluationConfig, TrialSpec
from r2s2r_policy.inference.engine import InferenceConfig
from r2s2r_policy.models.palm_frame import PalmObjectFeatures
from r2s2r_sim.cell_runtime import ControlStep, SimCell

HAND_COLUMNS = [ALL_JOINT_NAMES.index(n) for n in HAND_JOINT_NAMES]
HAND_LOW = np.array([JOINT_LIMITS[n].lower_rad for n in HAND_JOINT_NAMES])
HAND_HIGH = np.array([JOINT_LIMITS[n].upper_rad for n in HAND_JOINT_NAMES])


def closure(joint_positions: np.ndarray) -> np.ndarray:
    """Hand closure in [0, 1] per row (mean flexion over the hand's joint ranges)."""
    hand = joint_positions[..., HAND_COLUMNS]
    return np.clip((hand - HAND_LOW) / (HAND_HIGH - HAND_LOW), 0.0, 1.0).mean(axis=-1)


def summarise(times: np.ndarray, offsets: np.ndarray, closures: np.ndarray) -> dict[str, Any]:
    """Closest approach, offset there and hand-closing time relative to it."""
    distance = np.linalg.norm(offsets, axis=1)
    k = int(np.argmin(distance))
    closing = np.flatnonzero(closures > 0.5 * (closures.max() + closures.min()))
    closed_at = float(times[closing[0]] - times[k]) if closing.size else float("nan")
    return {
        "closest_m": float(distance[k]),
        "offset_in_palm_m": [round(float(v), 4) for v in offsets[k]],
        "close_minus_closest_s": round(closed_at, 2),
    }


def main() -> int:
    """Run the probe."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--trials", action="append", default=None, help="CONDITION=COUNT")
    parser.add_argument("--base-seed", type=int, default=VALIDATION_BASE_SEED)
    parser.add_argument("--executed-steps", type=int, default=3)
    parser.add_argument("--twin", default="twin/default.yaml")
    parser.add_argument("--dataset", default=None, help="Also summarise these demonstrations.")
    args = parser.parse_args()

    counts = {"nominal": 10}
    if args.trials:
        counts = {c: int(n) for c, _, n in (t.partition("=") for t in args.trials)}
    kinematics = PalmObjectFeatures(ALL_JOINT_NAMES)
    logs: dict[int, dict[str, list[Any]]] = {}

    def on_step(trial: TrialSpec, cell: SimCell, step: ControlStep) -> None:
        objects = cell.object_tracks()
        if not objects:
            return
        track = np.zeros((1, 6))
        track[0, :3] = objects[0].position_m
        joints = torch.tensor(step.joint_positions[None], dtype=torch.float64)
        offset = kinematics(joints, torch.tensor(track))[0, 6:9].numpy()
        log = logs.setdefault(trial.index, {"t": [], "offset": [], "closure": []})
        log["t"].append(step.time_s)
        log["offset"].append(offset)
        log["closure"].append(closure(step.joint_positions))

    report = evaluate_in_process(
        args.checkpoint,
        EvaluationConfig(trials_per_condition=counts, base_seed=args.base_seed),
        twin_config_path=args.twin,
        inference=InferenceConfig(execution="receding", executed_steps=args.executed_steps),
        on_step=on_step,
    )
    rows = []
    for record in report.records:
        log = logs.get(record.index)
        if not log:
            continue
        row = {"seed": record.seed, "condition": record.condition, "reason": record.reason}
        row.update(summarise(np.array(log["t"]), np.array(log["offset"]), np.array(log["closure"])))
        rows.append(row)
        print(
            f"seed {row['seed']} {row['condition']:<10} {row['reason']:<14} closest "
            f"{row['closest_m']:.3f} m offset {row['offset_in_palm_m']} closed "
            f"{row['close_minus_closest_s']:+.2f} s"
        )
    demos = []
    if args.dataset:
        from r2s2r_dataset import EpisodeDataset

        dataset = EpisodeDataset(args.dataset)
        for episode in range(len(dataset)):
            group = dataset._group(episode)
            joints = np.asarray(group["obs"]["joint_pos_rad"], dtype=np.float64)
            track = np.asarray(group["obs"]["object_track"], dtype=np.float64)
            offsets = kinematics(torch.tensor(joints), torch.tensor(track))[:, 6:9].numpy()
            times = np.asarray(group["timestamps_s"], dtype=float)
            demos.append(summarise(times, offsets, closure(joints)))
        closest = [d["closest_m"] for d in demos]
        print(f"demonstrations: closest approach median {np.median(closest):.3f} m")
    closest = [r["closest_m"] for r in rows]
    print(f"rollouts: closest approach median {np.median(closest):.3f} m over {len(rows)} trials")
    print(json.dumps({"benchmark": "probe_policy_rollouts", "rollouts": rows, "demos": demos}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
