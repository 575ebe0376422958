"""Generation benchmark: successful episodes/min per configuration, 1 -> 2 worker scaling, overhead.

Run: python bench/bench_datagen.py [--attempts 50] [--workers 2] [--demos D] [--artifact A]

- Per configuration of config/datagen/configurations.yaml whose generator (and, for grounded
  ones, grounding artifact) exists here: yield, successful episodes per minute of the jobs'
  wall time (workers started, merge not counted; goal >= 150 with 2 workers, issue 38) and
  the workers' CPU seconds per successful episode (the load-independent cost) for N attempts
  on the local process pool. Configurations that cannot run are listed with the reason.
- Inputs are found as the main job (`r2s2r launch sim_generate`, parameters in
  config/nodes/sim_generate.yaml) finds them: MimicGen's source demonstrations by
  r2s2r_datagen.prerequisites.mimicgen_source_path (the configurations file, then
  mimicgen.yaml, else the job's demos_dataset_path, runs/demos/dataset.hdf5; --demos replaces
  that last one), the grounding artifact from the job's grounding_artifact_path, else the
  configurations file's (runs/grounding/artifact.yaml; --artifact replaces both). The bench
  never records demonstrations or grounds: missing ones are reported as "not available".
- Overhead: generation throughput (episodes per worker-minute, everything a job does: trial,
  recording, resize, HDF5 write) over the raw simulator's step+render throughput for the same
  episode length (physics steps + both cameras rendered at every frame, nothing else), in
  the measured configuration's world (its cameras: a grounded world's calibrated intrinsics,
  distortion and blur cost more per frame than the nominal ones). Goal >= 0.7. Measured on
  the first available planner configuration (one rollout per episode), else the first
  available one, else on the test-only scripted generator
  (r2s2r_testing.generation), which is labelled as such. A MimicGen
  episode may take up to max_attempts rollouts, each simulated (only the success rendered and
  perceived), so its per-episode ratio also reflects its yield: it is printed beside (1
  worker), without a goal.
- Scaling: successful episodes/min with 2 workers over 1 worker, the same jobs, run in turn
  ``--scaling-pairs`` times (1 worker, then 2) and pooled (goal >= 1.8x),
  on the measured planner configuration and on the first MimicGen one.
- The machine's load average is printed before and after: on a shared machine, wall-clock
  rates fall with the load while CPU seconds per episode do not.

The last line is one JSON object: {"benchmark": "datagen", "figures": [...]}.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib

os.environ.setdefault("MUJOCO_GL", "egl")

REPO = Path(__file__).resolve().parents[1]

from r2s2r_common.config import parse_config, read_yaml, ros_parameters_section  # noqa: E402
from r2s2r_datagen.config import (  # noqa: E402
    DatagenConfig,
    GenerateConfig,
    bundled_configurations_path,
)
from r2s2r_datagen.configurations import (  # noqa: E402
    load_datagen_config,
    make_jobs,
    prepare_configurations,
)
from r2s2r_datagen.ledger import Ledger  # noqa: E402
from r2s2r_datagen.prerequisites import mimicgen_source_path  # noqa: E402
from r2s2r_datagen.worker import use_one_core  # noqa: E402
from r2s2r_sim.backend_config import make_backend  # noqa: E402
from r2s2r_sim.task import TrialRunner  # noqa: E402
from r2s2r_testing.generation import FACTORY as SCRIPTED  # noqa: E402  (test-only generator)

from r2s2r.pipeline.main_job import prepare_prerequisites, run_main_job  # noqa: E402

MAIN_JOB_PARAMS = REPO / "config" / "nodes" / "sim_generate.yaml"
MAIN_JOB_NODE = "sim_generate"


def main_job_config() -> GenerateConfig:
    """The main job's settings (its node parameter file), as `r2s2r launch sim_generate` uses."""
    values = ros_parameters_section(read_yaml(MAIN_JOB_PARAMS), MAIN_JOB_NODE, str(MAIN_JOB_PARAMS))
    return parse_config(GenerateConfig, values, str(MAIN_JOB_PARAMS))


class Inputs:
    """Where the demonstrations and the artifact are (the main job's resolution) and if present."""

    def __init__(self, main_job: GenerateConfig, datagen: DatagenConfig, demos: str | None,
                 artifact: str | None) -> None:  # fmt: skip
        if demos:
            main_job = main_job.model_copy(update={"demos_dataset_path": demos})
        self.demos_dataset_path = main_job.demos_dataset_path
        self.demos, origin = mimicgen_source_path(main_job, datagen)
        self.demos_present = self.demos.exists()
        self.demos_reason = (
            None
            if self.demos_present
            else f"MimicGen source demonstrations {self.demos} not found ({origin} setting; "
            "the main job records them on the twin first, or run `r2s2r record-demos`, or "
            "pass --demos)"
        )
        self.artifact = Path(
            artifact or main_job.grounding_artifact_path or datagen.grounding_artifact_path
        ).resolve()

    def generate_config(self, **fields: object) -> GenerateConfig:
        """Job settings using these inputs; never records demos or grounds (both prepare_*
        steps only find what exists: prepare_demos is on only when the demos are present)."""
        return GenerateConfig(
            demos_dataset_path=self.demos_dataset_path,
            prepare_demos=self.demos_present,
            grounding_artifact_path=str(self.artifact),
            prepare_grounding=False,
            **fields,
        )


def _never_run(command: list[str], _timeout_s: float, _log: Path) -> tuple[int, str]:
    raise RuntimeError(f"the bench does not run prerequisite commands ({command})")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(config_path: Path, names: list[str], attempts: int, workers: int, out: Path,
        overrides: list[str], inputs: Inputs) -> tuple[dict, float, list[dict]]:  # fmt: skip
    """Run the main job's generation; the summary also holds ``end_to_end_s``, ``successes``,
    ``successes_per_min`` (over the jobs' wall time) and ``worker_cpu_s`` (the workers' CPU)."""
    config = inputs.generate_config(
        configurations_path=str(config_path),
        configurations=names,
        episodes_per_configuration=attempts,
        workers=workers,
        output_dir=str(out),
        resume=False,
        generator_overrides=overrides,
        progress=False,
    )
    started = time.perf_counter()
    cpu_before = _children_cpu_s()
    summary = run_main_job(config, log=lambda _text: None, runner=_never_run)
    elapsed = time.perf_counter() - started
    summary_dict = summary.as_dict()
    summary_dict["end_to_end_s"] = elapsed
    summary_dict["worker_cpu_s"] = _children_cpu_s() - cpu_before  # workers are joined at close
    records = Ledger(out / "ledger.jsonl").records()
    successes = sum(r["status"] == "success" for r in records)
    summary_dict["successes"] = successes
    summary_dict["successes_per_min"] = successes / (max(summary.jobs_elapsed_s, 1e-9) / 60.0)
    return summary_dict, summary.jobs_elapsed_s, records


def scaling_pairs(
    config_path: Path,
    names: list[str],
    overrides: list[str],
    inputs: Inputs,
    attempts: int,
    pairs: int,
    out: Path,
) -> tuple[list[tuple[dict, dict]], float]:
    """Run 1 worker then 2 workers on the same jobs, ``pairs`` times in turn; return the runs
    and the scaling of the pooled rates (all successes over all jobs' wall time, per worker
    count), so that a drift of the machine's speed weighs on both sides alike."""
    runs = []
    for index in range(pairs):
        one = run(config_path, names, attempts, 1, out / f"w1_{index}", overrides, inputs)[0]
        two = run(config_path, names, attempts, 2, out / f"w2_{index}", overrides, inputs)[0]
        runs.append((one, two))

    def pooled(side: int) -> float:
        successes = sum(pair[side]["successes"] for pair in runs)
        minutes = sum(pair[side]["jobs_elapsed_s"] for pair in runs) / 60.0
        return successes / max(minutes, 1e-9)

    return runs, pooled(1) / max(pooled(0), 1e-9)


def first_records(out: Path) -> list[dict]:
    """The ledger records of the first 1-worker run of :func:`scaling_pairs` in ``out``."""
    return Ledger(out / "w1_0" / "ledger.jsonl").records()


def scaling_lines(runs: list[tuple[dict, dict]], scaling: float) -> list[str]:
    """The pairs' rates and ratios, then the pooled scaling, as printed."""
    lines = []
    for k, (one, two) in enumerate(runs):
        rate_1, rate_2 = one["successes_per_min"], two["successes_per_min"]
        lines.append(
            f"  pair {k + 1}: successes/min, 1 / 2 workers {rate_1:.1f} / {rate_2:.1f} "
            f"({rate_2 / max(rate_1, 1e-9):.2f}x)"
        )
    return [*lines, f"  scaling 1 -> 2 (goal >= 1.8)   {scaling:8.2f}x (pooled over the pairs)"]


RAW_FRAMES = 150
"""Frames of each raw step+render timing (more than one episode's ~120)."""


def raw_seconds_per_frame(
    config_path: Path, rate_hz: float, configuration: str, artifact: Path, frames: int = 60
) -> float:
    """Physics for one frame period + both cameras rendered, on the episode's scene.

    The simulator is the one the workers build (the configurations file's ``simulator``),
    in a process set up as theirs (:func:`r2s2r_datagen.worker.use_one_core`, at ``main``).

    The scene is episode 0 of ``configuration``, in that configuration's world: a grounded
    world's cameras (calibrated intrinsics and distortion, blur) are the ones its episodes
    render, and they cost more per frame than the nominal ones.
    """
    datagen = load_datagen_config(config_path)
    scripted = {"planner": SCRIPTED, "mimicgen": SCRIPTED}  # only the world is used here
    nominal, prepared = prepare_configurations(
        datagen, config_path, [configuration], artifact, generator_overrides=scripted
    )
    job = make_jobs(nominal, prepared, [0], 0, datagen)[0]
    steps_per_frame = round(1.0 / (rate_hz * job.world.physics.timestep_s))
    backend = make_backend(datagen.simulator)  # the workers' simulator
    runner = TrialRunner(backend, job.world, job.plan)
    runner.start()
    runner.step(steps_per_frame * 10)  # object on the belt
    started = time.perf_counter()
    for _ in range(frames):
        backend.step(steps_per_frame)
        backend.render("head_camera")
        backend.render("hand_camera")
    return (time.perf_counter() - started) / frames


def overhead(records: list[dict], raw_frame_s: float) -> tuple[float, float, float, float, float]:
    """Generation vs raw step+render for a 1-worker run's ledger records.

    Returns:
        Mean frames of the recorded episodes, episodes per worker-minute (every job: its
        worker-side total time), raw step+render episodes/min at that length, their ratio,
        and simulator rollouts per episode.

    """
    frames = [r["frames"] for r in records if r["frames"]]
    worker_s = sum(r["timings"]["total"] for r in records)
    mean_frames = statistics.mean(frames) if frames else 0.0
    gen_rate = len(records) / (worker_s / 60.0)
    raw_rate = 60.0 / (mean_frames * raw_frame_s) if mean_frames else 0.0
    ratio = gen_rate / raw_rate if raw_rate else 0.0
    rollouts = sum(r.get("total_attempts", r["attempts"]) for r in records) / max(len(records), 1)
    return mean_frames, gen_rate, raw_rate, ratio, rollouts


def _load_average() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--attempts", type=int, default=50, help="episodes per configuration")
    parser.add_argument("--workers", type=int, default=2, help="workers for the yield runs")
    parser.add_argument(
        "--scaling-pairs",
        type=int,
        default=2,
        help="1-worker and 2-worker runs, in turn, behind each scaling figure (pooled)",
    )
    parser.add_argument(
        "--configurations",
        nargs="+",
        help="configurations to run (default: all of the configurations file)",
    )
    parser.add_argument(
        "--demos",
        help="MimicGen source demonstrations when the configurations files name none (default: "
        "the main job's demos_dataset_path, config/nodes/sim_generate.yaml)",
    )
    parser.add_argument(
        "--artifact",
        help="grounding artifact (default: the main job's grounding_artifact_path, else the "
        "configurations file's)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the generated runs (removed by default)"
    )
    args = parser.parse_args()
    use_one_core()  # the raw baseline runs here, as in a worker process
    config_path = bundled_configurations_path()
    datagen = load_datagen_config(config_path)
    inputs = Inputs(main_job_config(), datagen, args.demos, args.artifact)
    found = prepare_prerequisites(
        inputs.generate_config(configurations_path=str(config_path)),
        datagen,
        Path(tempfile.mkdtemp(prefix="bench_datagen_logs_")),  # prerequisites' logs (none run)
        lambda _text: None,
        _never_run,
    )
    _, prepared = prepare_configurations(
        found.datagen, config_path, args.configurations or (), inputs.artifact
    )
    print(f"MimicGen source demonstrations: {inputs.demos} "
          f"({'found' if inputs.demos_present else 'missing'})")  # fmt: skip
    print(f"grounding artifact: {inputs.artifact} "
          f"({'found' if inputs.artifact.is_file() else 'missing'})")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="bench_datagen_"))
    try:
        measure(args, config_path, datagen, inputs, prepared, tmp)
    finally:
        if args.keep:
            print(f"runs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)  # ~0.7 GB of generated episodes a run


def measure(
    args: argparse.Namespace,
    config_path: Path,
    datagen: DatagenConfig,
    inputs: Inputs,
    prepared: list[Any],
    tmp: Path,
) -> None:
    """Run the bench's generations (in ``tmp``); print its table and its JSON line."""
    load_before = _load_average()
    figures: list[dict] = []
    rows: list[tuple[str, ...]] = []
    available = [
        p.spec.name
        for p in prepared
        if p.unavailable is None and not (p.spec.behavior == "mimicgen" and inputs.demos_reason)
    ]
    for entry in prepared:
        name = entry.spec.name
        reason = entry.unavailable
        if entry.spec.behavior == "mimicgen" and inputs.demos_reason:
            reason = inputs.demos_reason
        if reason:
            rows.append((name, "-", "-", "-", "-", f"not available: {reason}"))
            continue
        summary, _, _ = run(config_path, [name], args.attempts, args.workers,
                            tmp / name, [], inputs)  # fmt: skip
        (item,) = summary["configurations"]
        successes = summary["successes"]
        cpu_per_success = summary["worker_cpu_s"] / successes if successes else None
        rows.append((
            name, f"{item['attempts']}", f"{item['yield'] or 0:.0%}",
            f"{summary['successes_per_min']:.1f}",
            "-" if cpu_per_success is None else f"{cpu_per_success:.2f}", "",
        ))  # fmt: skip
        goal = 150 if args.workers == 2 else None
        figures += [
            {"name": f"{name}_yield", "value": item["yield"], "unit": "successes/attempt",
             "goal": None},
            {"name": f"{name}_successes_per_min_{args.workers}_workers",
             "value": round(summary["successes_per_min"], 2), "unit": "successes/min",
             "goal": goal},
            {"name": f"{name}_worker_cpu_s_per_success",
             "value": None if cpu_per_success is None else round(cpu_per_success, 3),
             "unit": "CPU s/success", "goal": None},
        ]  # fmt: skip

    # Overhead and scaling: on the first available planner configuration (one rollout per
    # episode), else the first available one, else the scripted test generator. MimicGen may
    # play up to max_attempts rollouts for one episode (recorded deferred: cameras and perception
    # only for the success, see r2s2r_datagen.mimicgen), so its per-episode figure also measures
    # its yield; it is printed beside, without goal, with its own 1 -> 2 worker scaling.
    behavior = {p.spec.name: p.spec.behavior for p in prepared}
    planners = [name for name in available if behavior[name] == "planner"]
    if available:
        label = (planners or available)[0]
        names, overrides = [label], []
    else:
        label, names, overrides = (
            "scripted (test-only)",
            ["nominal_planner"],
            [f"planner={SCRIPTED}"],
        )
    # The raw baseline is timed right before and right after the 1-worker generation run and
    # averaged, so that a change in the machine's load during the run affects both sides.
    raw_before_s = raw_seconds_per_frame(
        config_path, datagen.recording.rate_hz, names[0], inputs.artifact, RAW_FRAMES
    )
    pairs, scaling = scaling_pairs(
        config_path, names, overrides, inputs, args.attempts, args.scaling_pairs, tmp / "scaling"
    )
    records_1 = first_records(tmp / "scaling")
    raw_after_s = raw_seconds_per_frame(
        config_path, datagen.recording.rate_hz, names[0], inputs.artifact, RAW_FRAMES
    )
    raw_frame_s = 0.5 * (raw_before_s + raw_after_s)
    # The baseline before it rendered the measured configuration's cameras: on the nominal
    # world whatever the configuration (printed for comparison with earlier figures).
    raw_nominal_frame_s = raw_seconds_per_frame(
        config_path, datagen.recording.rate_hz, "nominal_planner", inputs.artifact
    )
    mean_frames, gen_rate, raw_rate, ratio, _ = overhead(records_1, raw_frame_s)
    s1, s2 = pairs[0]
    mimicgen = [name for name in available if behavior[name] == "mimicgen"]
    mimicgen_figures = None
    if mimicgen and mimicgen[0] != label:
        m_pairs, m_scaling = scaling_pairs(
            config_path, mimicgen[:1], [], inputs, args.attempts, args.scaling_pairs,
            tmp / "scaling_mimicgen",
        )  # fmt: skip
        records_m = first_records(tmp / "scaling_mimicgen")
        raw_m_frame_s = raw_seconds_per_frame(
            config_path, datagen.recording.rate_hz, mimicgen[0], inputs.artifact
        )
        mimicgen_figures = (mimicgen[0], *overhead(records_m, raw_m_frame_s), m_pairs, m_scaling)
    load_after = _load_average()

    print(f"\nsim_generate benchmark ({args.attempts} attempts per configuration, "
          f"{args.workers} workers, {os.cpu_count()} CPUs; load average {load_before:.2f} "
          f"before, {load_after:.2f} after)")  # fmt: skip
    print(
        f"{'configuration':<22}{'attempts':>9}{'yield':>7}{'succ/min':>9}{'CPU s/succ':>11}  note"
    )
    for name, attempts, yld, rate, cpu, note in rows:
        print(f"{name:<22}{attempts:>9}{yld:>7}{rate:>9}{cpu:>11}  {note}")
    print(
        f"  (succ/min: successful episodes per minute of the jobs' wall time, {args.workers} "
        "workers, goal >= 150 with 2; CPU s/succ: the workers' CPU per successful episode)"
    )
    print(f"\noverhead and scaling measured on: {label}")
    print(f"  mean episode length            {mean_frames:8.1f} frames")
    print(f"  generation, 1 worker           {gen_rate:8.1f} episodes per worker-minute")
    print(f"  raw step+render, same length   {raw_rate:8.1f} episodes/min "
          f"(timed before/after the run: {1000 * raw_before_s:.2f}/{1000 * raw_after_s:.2f} "
          "ms per frame)")  # fmt: skip
    print(f"  ratio (goal >= 0.7)            {ratio:8.2f}")
    if mean_frames:
        raw_nominal_rate = 60.0 / (mean_frames * raw_nominal_frame_s)
        print(f"  (raw on the nominal world's cameras: {raw_nominal_rate:.1f} episodes/min, "
              f"ratio {gen_rate / raw_nominal_rate:.2f})")  # fmt: skip
    for workers, summary in ((1, s1), (2, s2)):
        print(
            f"  successes/min, {workers} worker{'s' if workers > 1 else ' '}      "
            f"{summary['successes_per_min']:8.1f} ({summary['successes']} in "
            f"{summary['jobs_elapsed_s']:.1f} s; {summary['end_to_end_s']:.1f} s with start-up "
            "and merge; pair 1)"
        )
    print("\n".join(scaling_lines(pairs, scaling)))
    if mimicgen_figures is not None:
        name_m, frames_m, gen_m, raw_m, ratio_m, rollouts_m, m_pairs, m_scaling = mimicgen_figures
        print(f"\nMimicGen per episode: {name_m} (no goal: an episode may take several "
              "rollouts, recorded deferred: only the success rendered)")  # fmt: skip
        print(f"  rollouts per episode           {rollouts_m:8.2f}")
        print(f"  mean episode length            {frames_m:8.1f} frames")
        print(f"  generation, 1 worker           {gen_m:8.1f} episodes per worker-minute")
        print(f"  raw step+render, same length   {raw_m:8.1f} episodes/min")
        print(f"  ratio per episode              {ratio_m:8.2f}")
        print("\n".join(scaling_lines(m_pairs, m_scaling)))
        figures += [
            {"name": "mimicgen_generation_vs_raw_sim_ratio", "value": round(ratio_m, 3),
             "unit": "ratio", "goal": None},
            {"name": "mimicgen_rollouts_per_episode", "value": round(rollouts_m, 3),
             "unit": "rollouts/episode", "goal": None},
            {"name": "mimicgen_scaling_1_to_2_workers", "value": round(m_scaling, 3),
             "unit": "x", "goal": 1.8},
            {"name": "mimicgen_scaling_measured_on", "value": name_m, "unit": "", "goal": None},
        ]  # fmt: skip
    figures += [
        {"name": "generation_vs_raw_sim_ratio", "value": round(ratio, 3), "unit": "ratio",
         "goal": 0.7},
        {"name": "successes_per_min_1_worker", "value": round(s1["successes_per_min"], 2),
         "unit": "successes/min", "goal": None},
        {"name": "successes_per_min_2_workers", "value": round(s2["successes_per_min"], 2),
         "unit": "successes/min", "goal": 150},
        {"name": "scaling_1_to_2_workers", "value": round(scaling, 3), "unit": "x", "goal": 1.8},
        {"name": "overhead_measured_on", "value": label, "unit": "", "goal": None},
        {"name": "load_average_before", "value": round(load_before, 2), "unit": "", "goal": None},
        {"name": "load_average_after", "value": round(load_after, 2), "unit": "", "goal": None},
    ]  # fmt: skip
    benchlib.print_json_line("datagen", figures)


if __name__ == "__main__":
    main()
