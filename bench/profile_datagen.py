"""Where a successful episode's time goes: the worker's job loop under cProfile, by part.

Run: python bench/profile_datagen.py [--configuration nominal_planner] [--episodes 12]

The configuration's first N jobs (the main job's seeds, demonstrations and artifact, found as
bench/bench_datagen.py finds them) run in this process through the worker's own job function
(``r2s2r_datagen.worker.WorkerState.run``: generate, record, write the shard) under cProfile
timed by the process's CPU clock (``time.process_time``: what the process and its renderer's
threads spent, whatever the machine's load). Printed: CPU seconds per successful episode and
their share of the job loop for each part (indented parts are inside the part above them), and
the functions with the most own time. cProfile's own cost inflates parts made of many small
Python calls (stepping, controllers, the encoder feed) against native ones (rendering): compare
shares of two profiles taken the same way, not absolute times with an unprofiled run.

The last line is one JSON object: {"benchmark": "profile_datagen", "figures": [...]}.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import benchlib

os.environ.setdefault("MUJOCO_GL", "egl")

from bench_datagen import Inputs, _never_run, main_job_config
from r2s2r_datagen.config import bundled_configurations_path
from r2s2r_datagen.configurations import (
    load_datagen_config,
    make_jobs,
    prepare_configurations,
)
from r2s2r_datagen.worker import WorkerSetup, WorkerState, use_one_core

from r2s2r.pipeline.main_job import prepare_prerequisites

Match = Callable[[str, str], bool]


def _in(file_part: str, name: str) -> Match:
    return lambda file, function: function == name and file_part in file


PARTS: list[tuple[str, list[Match]]] = [
    ("job loop (WorkerState.run)", [_in("r2s2r_datagen/worker.py", "run")]),
    ("  simulate + record (recording step)", [_in("r2s2r_datagen/recording.py", "step")]),
    ("    physics + controllers", [_in("mujoco_backend.py", "step")]),
    ("      mj_step", [lambda file, function: "mj_step" in function]),
    ("    encoder feed (belt speed)", [_in("r2s2r_datagen/recording.py", "_encoder_sample")]),
    ("  frames (live or deferred)", [_in("r2s2r_datagen/recording.py", "_take_frame")]),
    ("    render RGB (hand)", [_in("mujoco_backend.py", "render")]),
    ("    render RGB-D (head, one pass)", [_in("mujoco_backend.py", "render_rgbd")]),
    ("    render depth (separate pass)", [_in("mujoco_backend.py", "render_depth")]),
    ("    resize to dataset size", [_in("", "resize")]),
    ("    tracker (detection, tracking)", [_in("r2s2r_belt/perception.py", "add_head_frame")]),
    ("  trial judging (task)", [_in("r2s2r_sim/task.py", "_observe"), _in("task.py", "_judge")]),
    ("  planning, IK (planner)", [_in("r2s2r_planner/pick.py", "plan_pick")]),
    ("  IK (MimicGen segments)", [_in("mimicgen/generator.py", "_joints")]),
    ("  reset (model, perception)", [_in("r2s2r_datagen/recording.py", "reset")]),
    ("  episode assembly (deferred frames in it)", [_in("datagen/recording.py", "to_episode")]),
    ("  shard write (HDF5, gzip)", [_in("r2s2r_datagen/worker.py", "write_episode")]),
]
"""(label, functions whose cumulative time is the part's); the first is the whole."""


def part_seconds(stats: pstats.Stats, matches: list[Match]) -> float:
    """Cumulative seconds of the functions ``matches`` select (the largest per matcher)."""
    total = 0.0
    for match in matches:
        total += max(
            (row[3] for (file, _, name), row in stats.stats.items() if match(file, name)),  # type: ignore[attr-defined]
            default=0.0,
        )
    return total


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--configuration", default="nominal_planner")
    parser.add_argument("--episodes", type=int, default=12, help="jobs (episode indices 0..N-1)")
    parser.add_argument("--top", type=int, default=15, help="functions listed by own time")
    parser.add_argument("--demos", help="MimicGen source demonstrations (as bench_datagen)")
    parser.add_argument("--artifact", help="grounding artifact (as bench_datagen)")
    parser.add_argument("--stats-out", help="also write the cProfile stats (pstats/snakeviz)")
    args = parser.parse_args()
    use_one_core()  # as a pool's worker process runs
    config_path = bundled_configurations_path()
    datagen = load_datagen_config(config_path)
    inputs = Inputs(main_job_config(), datagen, args.demos, args.artifact)
    found = prepare_prerequisites(
        inputs.generate_config(
            configurations_path=str(config_path), configurations=[args.configuration]
        ),
        datagen,
        Path(tempfile.mkdtemp(prefix="profile_datagen_logs_")),
        lambda _text: None,
        _never_run,
    )
    nominal, prepared = prepare_configurations(
        found.datagen, config_path, [args.configuration], inputs.artifact
    )
    (entry,) = prepared
    if entry.unavailable:
        raise SystemExit(f"{args.configuration}: not available: {entry.unavailable}")
    jobs = make_jobs(nominal, prepared, range(args.episodes), 0, found.datagen)
    jobs.sort(key=lambda j: ([o.type_name for o in j.plan.objects], j.episode_index))
    state = WorkerState(
        WorkerSetup(
            "profile", tempfile.mkdtemp(prefix="profile_datagen_"),
            found.datagen.behavior_options, {}, jobs[0],
        )
    )  # fmt: skip
    state.warm_up()
    state.generator(jobs[0].behavior)  # built before the clock starts, as a worker does
    profile = cProfile.Profile(time.process_time)
    wall_started, cpu_started = time.perf_counter(), time.process_time()
    profile.enable()
    reports = [state.run(job) for job in jobs]
    profile.disable()
    wall_s, cpu_s = time.perf_counter() - wall_started, time.process_time() - cpu_started
    successes = sum(r.status == "success" for r in reports)
    rollouts = sum(r.attempts for r in reports)
    stats = pstats.Stats(profile, stream=io.StringIO())
    if args.stats_out:
        stats.dump_stats(args.stats_out)
    per = max(successes, 1)
    whole = part_seconds(stats, PARTS[0][1])
    print(f"\n{args.configuration}: {len(jobs)} jobs, {successes} successes, {rollouts} rollouts;"
          f" {cpu_s:.1f} CPU s in {wall_s:.1f} s wall (profiled; load average "
          f"{os.getloadavg()[0]:.2f})")  # fmt: skip
    print(f"{'part':<42}{'CPU s/success':>14}{'share':>8}")
    figures: list[benchlib.Figure] = []
    for label, matches in PARTS:
        seconds = part_seconds(stats, matches)
        print(f"{label:<42}{seconds / per:>14.3f}{100 * seconds / max(whole, 1e-9):>7.1f}%")
        key = label.strip().split(" (")[0].replace(" + ", "_").replace(", ", "_")
        figures.append(
            benchlib.Figure(
                f"{key.replace(' ', '_')}_cpu_s_per_success", round(seconds / per, 4), "CPU s"
            )
        )
    print(f"\nfunctions by own CPU time (top {args.top}), s per success:")
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
    for (file, line, name), row in rows[: args.top]:
        where = f"{Path(file).name}:{line}" if line else "(native)"
        print(f"  {row[2] / per:8.4f}  {name}  {where}")
    figures += [
        benchlib.Figure("successes", successes, "episodes"),
        benchlib.Figure("rollouts", rollouts, "rollouts"),
        benchlib.Figure("cpu_s_per_success", round(cpu_s / per, 4), "CPU s"),
    ]
    benchlib.print_json_line("profile_datagen", figures)


if __name__ == "__main__":
    main()
