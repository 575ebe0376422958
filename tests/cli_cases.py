"""Bad input and crash cases of the ``r2s2r`` command line, run as a user would (subprocesses).

Each :class:`Case` runs one or more commands in a folder of bad files made by :func:`make_world`
and states what a user must see: the exit code (2 bad input, 1 failed run, 0 done), exactly one
line on stderr naming the problem, no traceback, and nothing written that should not be.
``tests/test_cli_cases.py`` asserts every case; ``python tests/cli_cases.py`` prints the table
(exit code, stderr lines, traceback, seconds) for whichever workspace is sourced.

The kill cases (SIGKILL of ``record-demos``' group, SIGTERM to ``ground --launch`` and to
``experiment``) are in ``tests/test_owned_processes.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Step:
    """One command of a case and what it must give."""

    argv: list[str]
    code: int
    stderr: str = ""
    """Regex the (single) stderr line must match; '' for a success without stderr."""
    stdout: str = ""
    """Regex that must occur in stdout ('' for no check)."""
    timeout_s: float = 60.0


@dataclass
class Case:
    """A case: its steps and the files that must not exist or must not change afterwards."""

    id: str
    what: str
    steps: list[Step]
    absent: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    before: str = "clean"
    """How the case fared before the fix (from the issue): clean, weak or bad."""
    graph: bool = False
    """Starts ROS nodes (marked ``graph``)."""


@dataclass
class Outcome:
    """What one command did."""

    code: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def r2s2r(*args: str) -> list[str]:
    return [sys.executable, "-m", "r2s2r.cli", *args]


def run_step(step: Step, cwd: Path) -> Outcome:
    started = time.monotonic()
    process = subprocess.Popen(
        r2s2r(*step.argv),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "R2S2R_DEBUG": ""},
    )
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=step.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            stdout, stderr = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        # Whatever the command started (nodes in their own groups) must not outlive the case.
        for pid in re.findall(r"\w+ \(pid (\d+)\)", stdout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    return Outcome(process.returncode, stdout, stderr, time.monotonic() - started, timed_out)


# ---- the files -------------------------------------------------------------------------------

TINY_TRAIN = {
    "sim_ratio": 0.0,
    "steps": 10,
    "batch_size": 4,
    "checkpoint_every_steps": 5,
    "keep_last_checkpoints": 3,
    "warmup_steps": 0,
    "num_threads": 1,
    "progress_bar": False,
    "policy": {
        "image_height_px": 32,
        "image_width_px": 32,
        "chunk_length": 4,
        "model": {
            "type": "conv_keypoint",
            "params": {
                "conv_channels": [8, 16],
                "conv_kernels": [3, 3],
                "conv_strides": [2, 2],
                "groupnorm_groups": 4,
                "num_keypoints": 8,
                "hidden_dims": [64, 64],
                "random_shift_px": 0,
            },
        },
    },
}


def write_chunked_bag(bag_dir: Path, outcome: str, outcome_message: str | None) -> Path:
    """A finished episode bag whose MCAP has many chunks (as the recorder flushes them)."""
    from r2s2r_recorder.bag_format import EpisodeInfo
    from r2s2r_recorder.bag_writer import EpisodeBagWriter
    from r2s2r_testing.bags import EpisodeSpec, episode_messages

    info = EpisodeInfo(
        episode_id=bag_dir.name, object_type="cube", belt_speed_mps=0.1, outcome=outcome
    )
    writer = EpisodeBagWriter(bag_dir, info, flush_period_s=3600.0)
    for n, (receive_ns, topic, msgtype, data) in enumerate(
        episode_messages(EpisodeSpec(duration_ns=2_000_000_000, outcome_message=outcome_message))
    ):
        writer.add_topic(topic, msgtype, "sensor_data" if "image" in topic else "default")
        writer.write(topic, data, receive_ns)
        if n % 40 == 39:
            writer.flush()
    writer.close()
    return bag_dir


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def write_artifact(path: Path) -> dict[str, Any]:
    """A complete grounding artifact (as `r2s2r ground` writes it) and its content."""
    from r2s2r_calibration.artifact import (
        BeltRecord,
        CameraPoseRecord,
        CameraRecord,
        GroundingArtifact,
        PoseValue,
        Provenance,
        save_artifact,
    )

    prov = Provenance(source="live", n_samples=12, sample_kind="views", solver="test")
    artifact = GroundingArtifact(
        cameras={
            "head": CameraRecord(
                pose=CameraPoseRecord(
                    pose=PoseValue(
                        parent_frame="world",
                        child_frame="head_camera_link",
                        xyz_m=(1.305, -0.004, 1.747),
                        rpy_rad=(0.012, 0.6922, 3.1329),
                    ),
                    reprojection_rms_px=0.2,
                    translation_std_m=(0.001, 0.001, 0.001),
                    rotation_std_rad=(0.001, 0.001, 0.001),
                    provenance=prov,
                )
            )
        },
        belt=BeltRecord(
            roller_radius_m=0.0252,
            roller_radius_std_m=0.0001,
            speed_mps=0.101,
            residual_rms_mps=0.0003,
            relative_residual=0.003,
            provenance=prov,
        ),
    )
    save_artifact(artifact, path)
    return dict(yaml.safe_load(path.read_text()))


def make_world(root: Path) -> Path:
    """Write every bad (and good) file the cases use into ``root``; return ``root``."""
    from r2s2r_testing.episodes import write_robot_dataset

    root.mkdir(parents=True, exist_ok=True)
    # Datasets.
    real = write_robot_dataset(root / "real.hdf5", "real", seed=0, episodes=3)
    write_robot_dataset(root / "sim.hdf5", "sim", seed=1, episodes=2)
    shutil.copy(real, root / "truncated.hdf5")
    cut_in_half(root / "truncated.hdf5")
    shutil.copy(real, root / "existing.hdf5")
    # Bags: a finished one, one cut in half after it finished, a folder of bags.
    write_chunked_bag(root / "bags/episode_000000", "success", "success")
    write_chunked_bag(root / "complete/episode_000000", "success", "success")
    for folder in ("cut", "cut2"):
        cut = write_chunked_bag(root / folder / "episode_000000", "success", "success")
        cut_in_half(next(cut.glob("*.mcap")))
    (root / "empty").mkdir()
    # Artifacts.
    good = write_artifact(root / "artifact.yaml")
    (root / "artifact_schema99.yaml").write_text(
        yaml.safe_dump({**good, "schema_version": 99}, sort_keys=False)
    )
    text = (root / "artifact.yaml").read_text()
    (root / "artifact_truncated.yaml").write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    nan = yaml.safe_load(text)
    nan["cameras"]["head"]["pose"]["pose"]["xyz_m"][0] = float("nan")
    (root / "artifact_nan.yaml").write_text(yaml.safe_dump(nan, sort_keys=False))
    # Configs.
    (root / "train.yaml").write_text(
        yaml.safe_dump({**TINY_TRAIN, "real_dataset": str(real)}, sort_keys=False)
    )
    (root / "train_typo.yaml").write_text(
        yaml.safe_dump({**TINY_TRAIN, "real_dataset": str(real), "stepz": 3}, sort_keys=False)
    )
    smoke = yaml.safe_load((REPO / "config/experiment/smoke.yaml").read_text())
    smoke["real_dataset"] = str(real)
    nested = yaml.safe_load(yaml.safe_dump(smoke))
    nested["train_overrides"]["polcy"] = nested["train_overrides"].pop("policy")
    (root / "experiment_nested_typo.yaml").write_text(yaml.safe_dump(nested, sort_keys=False))
    condition = yaml.safe_load(yaml.safe_dump(smoke))
    condition["trials_per_condition"]["nominl"] = condition["trials_per_condition"].pop("nominal")
    (root / "experiment_condition_typo.yaml").write_text(yaml.safe_dump(condition, sort_keys=False))
    (root / "experiment_bad_yaml.yaml").write_text("preset: smoke\nreal_demos: [2\n")
    # Someone else's files in a record-demos output folder.
    (root / "foreign/bags").mkdir(parents=True)
    (root / "foreign/bags/notes.txt").write_text("not ours\n")
    (root / "not_a_session").mkdir()
    return root


def make_checkpoints(root: Path) -> None:
    """Train the tiny policy (10 steps, checkpoints at 5 and 10) and derive bad checkpoints."""
    outcome = run_step(
        Step(["train", "--config", "train.yaml", "--run-dir", "run"], 0, timeout_s=300), root
    )
    if outcome.code != 0:
        raise RuntimeError(f"training the case checkpoint failed: {outcome.stderr[-2000:]}")
    checkpoints = root / "run/checkpoints"
    shutil.copytree(checkpoints / "step_00000010", root / "garbage_ckpt")
    (root / "garbage_ckpt/model.safetensors").write_bytes(b"not a safetensors file" * 8)
    shutil.copytree(root / "run", root / "corrupt_run")
    (root / "corrupt_run/checkpoints/step_00000010/model.safetensors").write_bytes(b"\0" * 64)


# ---- the cases -------------------------------------------------------------------------------


def cases() -> list[Case]:
    """All bad-input and crash cases that run as plain commands (ids c01..c32)."""
    exp = ["experiment", "--no-progress"]
    return [
        # Already clean before (kept so they stay clean).
        Case("c01", "unknown verb", [Step(["nosuchverb"], 2, r"No such command 'nosuchverb'")]),
        Case(
            "c02",
            "launch: unknown graph",
            [Step(["launch", "no_such_graph"], 2, r"no_such_graph")],
            absent=["runs"],
        ),
        Case(
            "c03",
            "launch: unknown launch argument",
            [Step(["launch", "real_deploy", "bogus:=1"], 2, r"bogus")],
            absent=["runs"],
        ),
        Case(
            "c04",
            "launch: argument without :=",
            [Step(["launch", "real_deploy", "twin_config"], 2, r"twin_config")],
            absent=["runs"],
        ),
        Case(
            "c05",
            "train: config file missing",
            [Step(["train", "--config", "missing.yaml", "--run-dir", "r5"], 2, r"missing\.yaml")],
            absent=["r5"],
        ),
        Case(
            "c06",
            "train: unknown key in the config",
            [Step(["train", "--config", "train_typo.yaml", "--run-dir", "r6"], 2, r"stepz")],
            absent=["r6"],
        ),
        Case(
            "c07",
            "generate: unknown configuration",
            [
                Step(
                    ["generate", "-c", "nosuch", "-n", "1", "-o", "g7", "--no-progress"],
                    2,
                    "nosuch",
                )
            ],
            absent=["g7"],
        ),
        Case(
            "c08",
            "record-demos: output folder holds files it did not write",
            [Step(["record-demos", "-n", "1", "--out", "foreign"], 2, r"not empty.*force")],
            unchanged=["foreign/bags/notes.txt"],
            absent=["foreign/record_demos.json"],
        ),
        Case(
            "c09",
            "ground: unknown step",
            [Step(["ground", "-o", "g9/a.yaml", "--steps", "bogus"], 2, r"bogus")],
            absent=["g9"],
        ),
        Case(
            "c10",
            "evaluate: checkpoint path missing",
            [Step(["evaluate", "no_such_ckpt", "--out", "e10"], 2, r"no_such_ckpt")],
            absent=["e10"],
        ),
        Case(
            "c11",
            "experiment: config not valid YAML",
            [Step([*exp, "--config", "experiment_bad_yaml.yaml", "--out", "x11"], 2, "YAML")],
            absent=["x11"],
        ),
        Case(
            "c12",
            "bag2dataset: bag missing",
            [Step(["bag2dataset", "no_such_bag", "-o", "o12.hdf5"], 2, r"no_such_bag")],
            absent=["o12.hdf5"],
        ),
        Case(
            "c13",
            "ground --from-bag: not a session bag",
            [Step(["ground", "-o", "g13/a.yaml", "--from-bag", "not_a_session"], 2, "session")],
            absent=["g13"],
        ),
        # The cases of the issue.
        Case(
            "c14",
            "dataset info: truncated HDF5",
            [Step(["dataset", "info", "truncated.hdf5"], 2, r"truncated\.hdf5.*write it again")],
            before="bad",
        ),
        Case(
            "c15",
            "bag inspect: an .mcap file",
            [
                Step(
                    ["bag", "inspect", "bags/episode_000000/episode_000000.mcap"],
                    2,
                    r"a file, expected an episode bag directory.*give its folder",
                )
            ],
            before="bad",
        ),
        Case(
            "c16",
            "bag inspect: an empty folder",
            [Step(["bag", "inspect", "empty"], 2, r"empty: no \.mcap file")],
            before="bad",
        ),
        Case(
            "c17",
            "evaluate: an empty folder",
            [
                Step(
                    ["evaluate", "empty", "--in-process", "--out", "e17"],
                    2,
                    r"empty: not a policy checkpoint \(missing model\.safetensors\)",
                )
            ],
            absent=["e17"],
            before="bad",
        ),
        Case(
            "c18",
            "evaluate: garbage model.safetensors",
            [
                Step(
                    ["evaluate", "garbage_ckpt", "--in-process", "--out", "e18"],
                    2,
                    r"model\.safetensors: not a readable safetensors file",
                )
            ],
            absent=["e18"],
            before="bad",
        ),
        Case(
            "c19",
            "evaluate (ROS graph): checkpoint of another image size than the node's default",
            [
                Step(
                    [
                        "evaluate",
                        "run/checkpoints/step_00000010",
                        "--trials",
                        "nominal=1",
                        "--real-time-factor",
                        "3",
                        "--out",
                        "e19",
                    ],
                    0,
                    stdout=r"wrote .*evaluation\.json",
                    timeout_s=300.0,
                )
            ],
            before="bad",
            graph=True,
        ),
        Case(
            "c20",
            "generate --artifact: schema_version 99",
            [
                Step(
                    [
                        "generate",
                        "-c",
                        "grounded_planner",
                        "-n",
                        "1",
                        "--artifact",
                        "artifact_schema99.yaml",
                        "-o",
                        "g20",
                        "--no-progress",
                    ],
                    2,
                    r"schema_version = 99; .*schema_version 1; re-run grounding",
                )
            ],
            absent=["g20"],
            before="bad",
        ),
        Case(
            "c21",
            "train --real missing.hdf5 --sim-ratio 0",
            [
                Step(
                    [
                        "train",
                        "--config",
                        "train.yaml",
                        "--run-dir",
                        "r21",
                        "--real",
                        "missing.hdf5",
                        "--sim-ratio",
                        "0",
                    ],
                    2,
                    r"missing\.hdf5: dataset path not found",
                )
            ],
            absent=["r21"],
            before="bad",
        ),
        Case(
            "c22",
            "bag2dataset onto an existing output",
            [Step(["bag2dataset", "bags", "-o", "existing.hdf5"], 2, r"--output existing\.hdf5")],
            unchanged=["existing.hdf5"],
            before="bad",
        ),
        Case(
            "c23",
            "launch real_deploy with NaN in cameras.head.pose.pose.xyz_m[0] of the artifact",
            [
                Step(
                    ["launch", "real_deploy", "grounding_artifact:=artifact_nan.yaml"],
                    2,
                    r"cameras\.head\.pose\.pose\.xyz_m\[0\] = nan: expected finite numbers",
                    timeout_s=30.0,
                )
            ],
            absent=["runs"],
            before="bad",
        ),
        Case(
            "c24",
            "generate --artifact: truncated artifact",
            [
                Step(
                    [
                        "generate",
                        "-c",
                        "grounded_planner",
                        "-n",
                        "1",
                        "--artifact",
                        "artifact_truncated.yaml",
                        "-o",
                        "g24",
                        "--no-progress",
                    ],
                    2,
                    r"lacks world_overrides .*cut short",
                )
            ],
            absent=["g24"],
            before="weak",
        ),
        Case(
            "c25",
            "bag repair of a finished bag cut in half, then bag2dataset",
            [
                Step(
                    ["bag", "repair", "cut/episode_000000"],
                    0,
                    stdout=r"repaired into .*outcome unknown; its metadata said 'success'",
                ),
                Step(
                    ["bag2dataset", "cut/episode_000000.recovered", "-o", "o25.hdf5"],
                    1,
                    r"0 of 1 bags converted \(1 skipped \{'lost_outcome': 1\}",
                    stdout=r"lost_outcome: repaired bag without its /trial/outcome",
                ),
            ],
            absent=["o25.hdf5"],
            before="bad",
        ),
        Case(
            "c26",
            "bag repair of a complete bag",
            [
                Step(
                    ["bag", "repair", "complete/episode_000000"],
                    0,
                    stdout=r"complete, nothing to repair",
                )
            ],
            absent=["complete/episode_000000.recovered"],
            unchanged=["complete/episode_000000/metadata.yaml"],
            before="weak",
        ),
        Case(
            "c27",
            "bag repair twice",
            [
                Step(["bag", "repair", "cut2/episode_000000"], 0, stdout="repaired into"),
                Step(
                    ["bag", "repair", "cut2/episode_000000"],
                    0,
                    stdout=r"already repaired as .*episode_000000\.recovered \(nothing written\)",
                ),
            ],
            before="bad",
        ),
        Case(
            "c28",
            "experiment: typo in a nested key (train_overrides.polcy)",
            [
                Step(
                    [*exp, "--config", "experiment_nested_typo.yaml", "--out", "x28"],
                    2,
                    r"train_overrides: polcy: unknown key",
                )
            ],
            absent=["x28"],
            before="weak",
        ),
        Case(
            "c29",
            "experiment: unknown condition (nominl)",
            [
                Step(
                    [*exp, "--config", "experiment_condition_typo.yaml", "--out", "x29"],
                    2,
                    r"unknown condition\(s\) \['nominl'\]; the twin .* has \['nominal'",
                )
            ],
            absent=["x29"],
            before="weak",
        ),
        Case(
            "c30",
            "train: newest checkpoint damaged",
            [
                Step(
                    ["train", "--config", "train.yaml", "--run-dir", "corrupt_run"],
                    0,
                    stdout=r"resuming from step_00000005; skipped 1 damaged newer checkpoint",
                    timeout_s=300.0,
                )
            ],
            before="bad",
        ),
        Case(
            "c31",
            "ground with no cell",
            [
                Step(
                    ["ground", "-o", "g31/artifact.yaml", "--timeout-s", "2"],
                    1,
                    r"waited 2 s for /joint_states; is the cell running",
                    stdout=r"waiting up to 2 s for the cell",
                )
            ],
            absent=["g31/artifact.yaml"],
            before="weak",
        ),
        Case(
            "c32",
            "evaluate --no-launch with no graph",
            [
                Step(
                    [
                        "evaluate",
                        "run/checkpoints/step_00000010",
                        "--no-launch",
                        "--graph-timeout-s",
                        "2",
                        "--out",
                        "e32",
                    ],
                    1,
                    r"graph not ready after 2 s: no /trial/start, /trial/reset",
                    stdout=r"waiting up to 2 s for the running graph",
                )
            ],
            absent=["e32"],
            before="weak",
        ),
        Case(
            "c33",
            "dataset export-lerobot into a folder that is not empty",
            [
                Step(
                    ["dataset", "export-lerobot", "real.hdf5", "bags"],
                    2,
                    r"bags: folder is not empty \(nothing written\)",
                )
            ],
            absent=[".bags.partial"],
            unchanged=["bags/episode_000000/metadata.yaml"],
        ),
        Case(
            "c34",
            "dataset export-lerobot of a file that is not a dataset",
            [
                Step(
                    ["dataset", "export-lerobot", "artifact.yaml", "lr34"],
                    2,
                    r"artifact\.yaml: cannot read HDF5 file",
                )
            ],
            absent=["lr34", ".lr34.partial"],
        ),
        Case(
            "c35",
            "translate train: a simulated dataset as the real one",
            [
                Step(
                    ["translate", "train", "sim.hdf5", "--model", "structure", "--out", "t35"],
                    2,
                    r"sim\.hdf5: episodes of source \['sim'\]; a sim-to-real translator is "
                    r"trained on real frames only",
                )
            ],
            absent=["t35", ".t35.partial"],
        ),
        Case(
            "c36",
            "translate train: too few real episodes",
            [
                Step(
                    ["translate", "train", "real.hdf5", "--model", "structure", "--out", "t36"],
                    2,
                    r"3 episodes: a translator needs at least 4 real episodes",
                )
            ],
            absent=["t36", ".t36.partial"],
        ),
        Case(
            "c37",
            "translate dataset: a translator folder that is not one",
            [
                Step(
                    ["translate", "dataset", "sim.hdf5", "o37.hdf5", "--translator", "empty"],
                    2,
                    r"empty: not a translator checkpoint",
                )
            ],
            absent=["o37.hdf5", ".o37.hdf5.partial"],
        ),
        Case(
            "c38",
            "ground: a blank cell name",
            [Step(["ground", "-o", "g38/a.yaml", "--cell-name", "  "], 2, r"--cell-name")],
            absent=["g38"],
        ),
    ]


def snapshot(root: Path, paths: list[str]) -> dict[str, bytes | None]:
    return {p: (root / p).read_bytes() if (root / p).is_file() else None for p in paths}


def check_case(case: Case, root: Path) -> list[str]:
    """Run a case in ``root``; return what is wrong (empty: the case holds)."""
    before = snapshot(root, case.unchanged)
    problems = []
    for index, step in enumerate(case.steps):
        out = run_step(step, root)
        where = f"step {index + 1} ({' '.join(step.argv)})"
        if out.timed_out:
            problems.append(f"{where}: ran past {step.timeout_s:.0f} s")
        if out.code != step.code:
            problems.append(
                f"{where}: exit code {out.code}, expected {step.code}; stderr: "
                f"{out.stderr_lines[-3:]}"
            )
        if TRACEBACK in out.stderr or TRACEBACK in out.stdout:
            problems.append(f"{where}: traceback printed")
        lines = out.stderr_lines
        if step.stderr:
            if len(lines) != 1:
                problems.append(f"{where}: {len(lines)} stderr lines, expected 1: {lines[:6]}")
            elif not re.search(step.stderr, lines[0]):
                problems.append(f"{where}: stderr {lines[0]!r} does not match {step.stderr!r}")
        elif step.code == 0 and lines and not step.stdout:
            problems.append(f"{where}: unexpected stderr {lines[:3]}")
        if step.stdout and not re.search(step.stdout, out.stdout):
            problems.append(f"{where}: stdout does not match {step.stdout!r}: {out.stdout[-800:]}")
    for path in case.absent:
        if (root / path).exists():
            problems.append(f"{path} was written")
    after = snapshot(root, case.unchanged)
    problems += [f"{path} changed" for path in case.unchanged if before[path] != after[path]]
    return problems


def table(root: Path, select: Callable[[Case], bool] = lambda case: True) -> str:
    """Run the cases and return a table: id, before, exit codes, stderr lines, traceback, s."""
    rows = ["| case | what | before (issue) | exit | stderr lines | traceback | s | holds |"]
    rows.append("|---|---|---|---|---|---|---|---|")
    for case in cases():
        if not select(case):
            continue
        codes, counts, traces, wall = [], [], False, 0.0
        snap = snapshot(root, case.unchanged)
        problems = []
        for step in case.steps:
            out = run_step(step, root)
            codes.append("T" if out.timed_out else str(out.code))
            counts.append(str(len(out.stderr_lines)))
            traces = traces or TRACEBACK in out.stderr
            wall += out.wall_s
        problems = [p for p in case.absent if (root / p).exists()]
        problems += [p for p in case.unchanged if snapshot(root, [p])[p] != snap[p]]
        expected = "/".join(str(s.code) for s in case.steps)
        rows.append(
            f"| {case.id} | {case.what} | {case.before} | {'/'.join(codes)} (want {expected}) "
            f"| {'/'.join(counts)} | {'yes' if traces else 'no'} | {wall:.0f} "
            f"| {'written: ' + ', '.join(problems) if problems else ''} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        world = make_world(Path(folder) / "world")
        make_checkpoints(world)
        graphs = "--graph" in sys.argv
        print(table(world, lambda case: graphs or not case.graph))
