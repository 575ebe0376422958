"""The generation job runner: configurations → seeded episode jobs → workers → datasets.

:func:`run_generation` is the generation of the main job, which the bring-up's pipeline
(``r2s2r.pipeline.main_job``: ``r2s2r generate`` and the ``sim_generate`` node) runs after the
prerequisites:

1. take the configurations the prerequisites leave (the real demonstrations and the grounding
   artifact found or produced, :mod:`r2s2r_datagen.prerequisites`), or the configurations
   file as it is; build the worlds, check which generators exist here (those that do not are
   reported and not run — nothing is faked);
2. read the run directory's ledger and shards: episodes already finished are skipped
   (resume); a success whose shard became unreadable is run again;
3. run the remaining jobs on a local process pool, or on Ray when given an address, one job
   per idle worker, each with a wall-clock deadline: a worker that crashes or overruns is
   replaced and its job retried ``max_retries`` times, then recorded as failed;
   MimicGen's source demos are checked first (:mod:`r2s2r_datagen.mimicgen.source_check`: the
   palm against the tracked object at grasp), and what the check finds is said before any
   attempt is spent (a warning; the run goes on);
4. merge each configuration's shards into ``datasets/<configuration>.hdf5``;
5. print the per-configuration summary and save it as ``summary.json``, with the source check's
   figures and, for a configuration that yielded nothing or far below usual, one line saying
   why (:func:`r2s2r_datagen.summary.low_yield_diagnosis`).

Run directory layout::

    run.json               the run's identity (base seed, recording, configurations file)
    sessions.jsonl         one line per invocation
    ledger.jsonl           one line per finished episode (see r2s2r_datagen.ledger)
    shards/<config>/shard_<worker>_e<episode>.hdf5   one per written episode (see worker)
    datasets/<config>.hdf5 merged, one copy of each success
    summary.json
    prerequisites.json     what was found, produced or skipped before generating (+ logs/)
    ray/                   Ray's temp dir (Ray runs only)
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from r2s2r_common.config import ConfigError
from r2s2r_common.console import Reporter, duration_text, progress_reporter
from r2s2r_common.disk import (
    DiskSpaceError,
    disk_full_message,
    free_bytes,
    is_disk_full,
    size_text,
)
from r2s2r_common.errors import ExitCode, raise_if_stop_requested
from r2s2r_common.files import write_json_atomic
from r2s2r_sim.backend import BackendUnavailableError
from r2s2r_sim.backend_config import check_backend_available

from r2s2r_datagen.config import GenerateConfig, bundled_configurations_path
from r2s2r_datagen.configurations import load_datagen_config, make_jobs, prepare_configurations
from r2s2r_datagen.generator import EpisodeJob, GeneratorUnavailableError
from r2s2r_datagen.ledger import (
    FINISHED_STATUSES,
    JOB_TIMEOUT,
    EpisodeKey,
    Ledger,
    is_interrupted,
)
from r2s2r_datagen.merge import merge_configuration, scan_shards
from r2s2r_datagen.pool import (
    LocalProcessPool,
    RayActorPool,
    WorkerLost,
    WorkerPool,
    check_ray_address,
)
from r2s2r_datagen.prerequisites import PrerequisitesReport
from r2s2r_datagen.summary import (
    ConfigurationSummary,
    RunSummary,
    low_yield_diagnosis,
)
from r2s2r_datagen.worker import WRITE_FAILED, JobReport, WorkerSetup

ProgressCallback = Callable[[int, int, int, int], None]
"""Called as ``(finished, total, successes, attempts)`` after every finished job."""

_POLL_S = 0.5

EPISODE_FRAMES_ESTIMATE_S = 20.0
"""Episode length assumed by the disk-space estimate (seconds of frames at the recording
rate). Measured: 92-147 frames at 10 Hz (9-15 s) on the shipped twin's planner and MimicGen
episodes."""
COMPRESSED_IMAGE_FRACTION = 0.25
"""Bytes of a gzip-compressed rendered image per raw byte assumed by the estimate. Measured:
0.06-0.18 at level 1 on 128 x 128 renders (1.1-2.6 MB per episode)."""
DISK_RESERVE_BYTES = 64 * 1024 * 1024
"""Free space kept on top of the estimate (ledger, summary, file-system slack)."""


def estimate_episode_bytes(recording: Any) -> int:
    """Estimate, conservatively, the size of one episode in a shard from the recording settings.

    Two cameras of ``H x W x 3`` bytes per frame at ``rate_hz`` for
    :data:`EPISODE_FRAMES_ESTIMATE_S`, compressed to :data:`COMPRESSED_IMAGE_FRACTION` (none at
    compression level 0), plus 1 kB of joints, actions and tracks per frame: about 2-4 times
    what the shipped settings measure, so a run that passes the check does not fill the disk.
    """
    frames = float(recording.rate_hz) * EPISODE_FRAMES_ESTIMATE_S
    image = 2.0 * recording.image_width_px * recording.image_height_px * 3
    fraction = COMPRESSED_IMAGE_FRACTION if recording.compression_level > 0 else 1.0
    return int(frames * (image * fraction + 1024.0))


def check_disk_space(run_dir: Path, episodes: int, recording: Any, merge: bool) -> str:
    """Refuse to start ``episodes`` jobs when the run directory's disk cannot hold them.

    Every job is counted as a success (one episode in a shard, and once more in the merged
    dataset when merging).

    Returns:
        A warning line when the disk would be more than 80 % used by the estimate, else ''.

    Raises:
        DiskSpaceError: The free space is below the estimate; the line names the folder, the
            space free and needed, and how to skip the check.

    """
    per_episode = estimate_episode_bytes(recording) * (2 if merge else 1)
    needed = episodes * per_episode + DISK_RESERVE_BYTES
    free = free_bytes(run_dir)
    if free < needed:
        raise DiskSpaceError(
            f"{run_dir}: not enough disk space for {episodes} episodes: {size_text(free)} free, "
            f"about {size_text(needed)} needed ({size_text(per_episode)} per episode, "
            "estimated from the recording settings); free space, write elsewhere "
            "(--output-dir), generate fewer episodes, or skip the check (--no-disk-check)"
        )
    if free < needed / 0.8:
        return (
            f"{run_dir}: disk nearly full after this run: {size_text(free)} free, about "
            f"{size_text(needed)} needed"
        )
    return ""


def _identity(config: GenerateConfig, configurations_path: Path, recording: Any) -> dict[str, Any]:
    return {
        "base_seed": config.base_seed,
        "configurations_path": str(configurations_path),
        "recording": recording.model_dump(mode="json"),
    }


def _check_run_dir(run_dir: Path, identity: dict[str, Any], resume: bool) -> None:
    run_file = run_dir / "run.json"
    if run_file.is_file():
        if not resume:
            raise ConfigError(
                f"output_dir = {run_dir}: holds a run already; expected resume = true to "
                "continue it, or a new output_dir"
            )
        previous = json.loads(run_file.read_text(encoding="utf-8"))
        for key in ("base_seed", "recording"):
            if previous.get(key) != identity[key]:
                raise ConfigError(
                    f"output_dir = {run_dir}: its run has {key} = {previous.get(key)!r}, this "
                    f"one {identity[key]!r}; expected the same to resume (or a new output_dir)"
                )
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_file, identity)


def _start_session(run_dir: Path, config: GenerateConfig) -> int:
    sessions = run_dir / "sessions.jsonl"
    count = 0
    if sessions.is_file():
        count = sum(1 for line in sessions.read_text(encoding="utf-8").splitlines() if line)
    with sessions.open("a", encoding="utf-8") as stream:
        entry: dict[str, Any] = {"session": count, "started_unix_s": round(time.time(), 3)}
        entry["config"] = config.model_dump(mode="json")
        stream.write(json.dumps(entry) + "\n")
    return count


class _WorkerIds:
    """Unique worker ids within the run directory: ``s<session>w<n>``."""

    def __init__(self, session: int, run_dir: Path, setup: WorkerSetup) -> None:
        self._session = session
        self._setup = setup
        self._count = 0

    def __call__(self) -> WorkerSetup:
        worker_id = f"s{self._session:03d}w{self._count:03d}"
        self._count += 1
        return dataclasses.replace(self._setup, worker_id=worker_id)


def run_jobs(
    pool: WorkerPool,
    jobs: list[EpisodeJob],
    ledger: Ledger,
    job_timeout_s: float,
    max_retries: int,
    progress: ProgressCallback | None = None,
) -> list[JobReport]:
    """Run ``jobs`` on ``pool``; record each finished episode in ``ledger``.

    A job whose worker crashes or exceeds ``job_timeout_s`` is retried up to ``max_retries``
    times on a fresh worker, then recorded as failed with the reason (``worker_crashed`` or
    ``job_timeout``). An episode whose shard could not be written is recorded as ``write_failed``;
    when the disk is full, no further job is handed out (the running ones finish; the rest stay
    unrun, for a resume).

    Returns:
        The final report of every job, in completion order.

    """
    queue: deque[EpisodeJob] = deque(jobs)
    running: dict[int, tuple[EpisodeJob, float]] = {}
    reports: list[JobReport] = []
    successes = attempts = 0

    def finish(report: JobReport, lost_attempts: int = 0) -> None:
        nonlocal successes, attempts
        record = report.as_record()
        record["total_attempts"] = report.attempts + lost_attempts
        ledger.append(record)
        reports.append(report)
        successes += report.status == "success"
        attempts += record["total_attempts"]
        if report.reason == WRITE_FAILED and is_disk_full(OSError(report.detail)):
            queue.clear()  # a full disk stays full: stop handing out jobs
        if progress is not None:
            progress(len(reports), len(jobs), successes, attempts)

    def lost(job: EpisodeJob, outcome: WorkerLost) -> None:
        if job.attempt < max_retries:
            queue.appendleft(dataclasses.replace(job, attempt=job.attempt + 1))
            return
        finish(
            JobReport(
                configuration=job.configuration,
                episode_index=job.episode_index,
                seed=job.seed,
                status="failed",
                reason=outcome.reason,
                attempts=0,
                detail=outcome.detail,
                job_attempt=job.attempt,
            ),
            lost_attempts=job.attempt + 1,
        )

    while queue or running:
        raise_if_stop_requested()  # a SIGTERM whose exception a finalizer swallowed
        for slot in range(pool.size):
            if slot not in running and queue and pool.is_ready(slot):
                job = queue.popleft()
                pool.submit(slot, job)
                running[slot] = (job, time.monotonic() + job_timeout_s)
        next_deadline = min(
            [deadline for _, deadline in running.values()] + [time.monotonic() + _POLL_S]
        )
        timeout = min(_POLL_S, max(0.0, next_deadline - time.monotonic()))
        for slot, outcome in pool.wait(timeout):
            job, _ = running.pop(slot)
            if isinstance(outcome, WorkerLost):
                lost(job, outcome)
            else:
                finish(outcome, lost_attempts=job.attempt)
        now = time.monotonic()
        for slot, (job, deadline) in list(running.items()):
            if now >= deadline:
                running.pop(slot)
                pool.replace(slot)
                lost(job, WorkerLost(JOB_TIMEOUT, f"no result after {job_timeout_s:.1f} s"))
    return reports


def check_mimicgen_sources(
    prepared: list[Any],
    behavior_options: dict[str, Any],
    overrides: dict[str, str],
    say: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """Check the source demos of every runnable MimicGen configuration, before generating.

    Configurations that share their options share one check. What it finds (a consistent
    offset between palm and tracked object at grasp: a biased tracker) is said as a warning;
    the run goes on. A MimicGen whose factory is overridden (tests) is not checked.

    Returns:
        Configuration name → the check's figures
        (:meth:`r2s2r_datagen.mimicgen.source_check.SourceCheck.as_dict`; ``{"verdict":
        "not_checked", "message": why}`` when the check could not run).

    """
    names = [
        entry.spec.name
        for entry in prepared
        if entry.spec.behavior == "mimicgen" and entry.world is not None
    ]
    if not names or "mimicgen" in overrides:
        return {}
    from r2s2r_datagen.mimicgen.source_check import check_configured_sources

    options = dict(behavior_options.get("mimicgen") or {})
    label = ", ".join(names)
    try:
        check = check_configured_sources(options)
    except (GeneratorUnavailableError, ConfigError) as error:
        say(f"[generate] {label}: source demos not checked: {error}")
        return {name: {"verdict": "not_checked", "message": str(error)} for name in names}
    if check.verdict == "ok":
        say(
            f"[generate] {label}: {len(check.offsets)} source demos checked: the tracked object "
            f"sat {100.0 * check.mean_horizontal_m:.1f} cm from the palm at grasp on average"
        )
    for line in check.lines():
        say(
            f"[generate] WARNING: {label}: {line}" if check.warns else f"[generate] {label}: {line}"
        )
    figures = check.as_dict()
    return {name: figures for name in names}


def _progress_bar(total: int, enabled: bool) -> tuple[Reporter, ProgressCallback]:
    bar = progress_reporter("generate", total, enabled, unit="ep")
    started = time.monotonic()

    def update(finished: int, _total: int, successes: int, attempts: int) -> None:
        minutes = max(time.monotonic() - started, 1e-6) / 60.0
        rate = "-" if not attempts else f"{successes / attempts:.0%}"
        bar.update(finished, f"yield {rate}, {finished / minutes:.1f} ep/min")

    return bar, update


def run_generation(
    config: GenerateConfig,
    progress: ProgressCallback | None = None,
    log: Callable[[str], None] | None = None,
    prerequisites: PrerequisitesReport | None = None,
) -> RunSummary:
    """Run the generation job (see the module docstring).

    Args:
        config: Sizes and placement of the run.
        progress: Extra progress callback (e.g. the node's diagnostics).
        log: Where the stage lines go (default: stderr): ``[generate] running / done in N s
            / up to date``.
        prerequisites: What the bring-up's pipeline found or produced before (the
            configurations to use, with MimicGen's source set, and the steps for the notes
            and ``prerequisites.json``); None: the configurations file as it is.

    Returns:
        The run summary (also saved as ``<output_dir>/summary.json``).

    Raises:
        ConfigError: Bad configurations file, unknown configuration name, a run directory
            that holds a different run, or an invalid world or artifact.
        r2s2r_datagen.pool.RayClusterUnreachableError: ``ray_address`` does not answer, or
            its cluster cannot start the workers.
        r2s2r_common.disk.DiskSpaceError: The disk has less room than the remaining episodes
            need (``check_disk_space``), or the ledger itself could not be written (one line
            naming the folder and the space).

    """
    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    started = time.monotonic()
    if config.ray_address:
        check_ray_address(config.ray_address)  # before any folder: one line, bounded time
    configurations_path = Path(config.configurations_path or bundled_configurations_path())
    if prerequisites is None:
        prerequisites = PrerequisitesReport([], load_datagen_config(configurations_path))
    datagen = prerequisites.datagen
    try:  # before any folder is made or worker started
        check_backend_available(datagen.simulator)
    except BackendUnavailableError as error:
        raise ConfigError(f"{configurations_path}: {error}") from None
    overrides = config.overrides()
    nominal, prepared = prepare_configurations(
        datagen,
        configurations_path,
        config.configurations,
        config.grounding_artifact_path or None,
        overrides,
    )
    run_dir = Path(config.output_dir).resolve()
    _check_run_dir(
        run_dir, _identity(config, configurations_path, datagen.recording), config.resume
    )
    session = _start_session(run_dir, config)
    ledger = Ledger(run_dir / "ledger.jsonl")
    executor = "ray" if config.ray_address else "process"
    summary = RunSummary(str(run_dir), session, 0.0, config.workers, executor)
    summary.notes.extend(prerequisites.notes())
    if prerequisites.steps:
        prerequisites.save(run_dir / "prerequisites.json")
    for entry in prepared:
        if entry.unavailable:
            summary.notes.append(f"{entry.spec.name}: not run: {entry.unavailable}")
            say(f"[generate] {entry.spec.name}: NOT RUN: {entry.unavailable}")
    source_checks = check_mimicgen_sources(prepared, datagen.behavior_options, overrides, say)

    # Resume: finished episodes are skipped, unless their data is gone. A shard left under
    # its temporary name by a killed worker holds nothing the ledger counts.
    _remove_partial_shards(run_dir)
    latest = ledger.latest()
    scan = scan_shards(run_dir)
    for path, reason in scan.unreadable:
        summary.notes.append(f"unreadable shard {path.name}: {reason}")
    done: set[EpisodeKey] = set()
    for key, record in latest.items():
        status = record["status"]
        if status == "success" and key not in scan.present:
            ledger.append({**record, "status": "lost", "reason": "shard_unreadable"})
            summary.notes.append(f"{key[0]} episode {key[1]}: data lost, generating it again")
            continue
        retry = status == "failed" and (
            config.retry_failed or (config.retry_interrupted and is_interrupted(record))
        )
        if status in FINISHED_STATUSES and not retry:
            done.add(key)
    all_jobs = make_jobs(
        nominal, prepared, range(config.episodes_per_configuration), config.base_seed, datagen
    )
    # Consecutive jobs with the same world and object types reuse the worker's compiled model
    # and renderers (a change rebuilds them), so the queue is grouped that way.
    jobs = sorted(
        (job for job in all_jobs if job.key not in done),
        key=lambda j: (j.world_config_id, [o.type_name for o in j.plan.objects], j.episode_index),
    )
    finished_before = len(all_jobs) - len(jobs)
    retried = sum(1 for job in jobs if is_interrupted(latest.get(job.key, {})))
    if jobs and config.check_disk_space:
        warning = check_disk_space(run_dir, len(jobs), datagen.recording, config.merge)
        if warning:
            say(f"[generate] WARNING: {warning}")
    if not jobs:
        say(f"[generate] up to date ({finished_before} episodes finished)")
    else:
        resumed = f", {finished_before} already finished" if finished_before else ""
        if retried:
            resumed += f", {retried} lost to a failed write, crash or timeout run again"
        say(
            f"[generate] running: {len(jobs)} episodes on {min(config.workers, len(jobs))} "
            f"workers{resumed} (shards in {run_dir / 'shards'})"
        )

    reports: list[JobReport] = []
    if jobs:
        setup = WorkerSetup(
            worker_id="",
            run_dir=str(run_dir),
            behavior_options=datagen.behavior_options,
            generator_overrides=overrides,
            warmup=jobs[0],
            simulator=datagen.simulator,
        )
        make_setup = _WorkerIds(session, run_dir, setup)
        size = min(config.workers, len(jobs))
        pool: WorkerPool
        if config.ray_address:
            pool = RayActorPool(size, make_setup, config.ray_address, run_dir)
        else:
            pool = LocalProcessPool(size, make_setup)
        bar, bar_update = _progress_bar(len(jobs), config.progress)

        def on_progress(finished: int, total: int, successes: int, attempts: int) -> None:
            bar_update(finished, total, successes, attempts)
            if progress is not None:
                progress(finished, total, successes, attempts)

        jobs_started = time.monotonic()
        try:
            reports = run_jobs(
                pool, jobs, ledger, config.job_timeout_s, config.max_retries, on_progress
            )
            summary.jobs_elapsed_s = time.monotonic() - jobs_started
        except OSError as error:  # the ledger's own write (same disk as the shards)
            if not is_disk_full(error):
                raise
            needed = len(jobs) * estimate_episode_bytes(datagen.recording)
            raise DiskSpaceError(
                f"{disk_full_message(run_dir, needed)}; free space and run again: the resume "
                "runs the episodes without a result"
            ) from error
        finally:
            bar.close()
            pool.close()
            _remove_partial_shards(run_dir)  # of workers stopped mid-write
        say(f"[generate] done in {duration_text(summary.jobs_elapsed_s)}")
        full = [r for r in reports if r.reason == WRITE_FAILED and is_disk_full(OSError(r.detail))]
        if full:
            unrun = len(jobs) - len(reports)
            needed = (len(full) + unrun) * estimate_episode_bytes(datagen.recording)
            line = (
                f"disk full: {full[0].detail.split(': no space')[0]}: {len(full)} episodes "
                f"lost to the write, {unrun} not run; about {size_text(needed)} more needed "
                f"({size_text(free_bytes(run_dir))} free); free space and run again: the "
                "resume runs them"
            )
            say(f"[generate] ERROR: {line}")
            summary.notes.append(line)

    # This invocation's wall time: the prerequisites' commands, then generation.
    summary.elapsed_s = prerequisites.wall_s() + time.monotonic() - started
    _summarise(summary, prepared, ledger, reports, config, run_dir, source_checks)
    if not any(entry.world is not None for entry in prepared):
        summary.exit_code = ExitCode.NOTHING_DONE
        summary.notes.append("no requested configuration can run here: nothing was generated")
    else:
        unfinished = sum(c.unfinished for c in summary.configurations if not c.unavailable)
        if unfinished:
            summary.exit_code = ExitCode.INCOMPLETE
            summary.notes.append(
                f"{unfinished} episodes have no result (lost to a failed write, crash or "
                "timeout, or not run); run again to resume them"
            )
    try:
        summary.save(run_dir / "summary.json")
    except OSError as error:
        if not is_disk_full(error):
            raise
        if not any(note.startswith("disk full") for note in summary.notes):
            say(f"[generate] ERROR: {run_dir}: no space left on device to save summary.json")
    return summary


def _remove_partial_shards(run_dir: Path) -> None:
    """Remove shards left under their temporary name (no worker may be running)."""
    for partial in (run_dir / "shards").glob("*/.*.partial"):
        partial.unlink(missing_ok=True)


def _summarise(
    summary: RunSummary,
    prepared: list[Any],
    ledger: Ledger,
    reports: list[JobReport],
    config: GenerateConfig,
    run_dir: Path,
    source_checks: dict[str, dict[str, Any]] | None = None,
) -> None:
    latest = ledger.latest()
    # Generation time only: a first run's prerequisites (recording demos, grounding) take
    # minutes and would make the rate read as if generation were that slow.
    minutes = max(summary.jobs_elapsed_s or summary.elapsed_s, 1e-6) / 60.0
    for entry in prepared:
        name = entry.spec.name
        item = ConfigurationSummary(
            name=name,
            world=entry.spec.world,
            behavior=entry.spec.behavior,
            world_config_id=entry.world_config_id,
            unavailable=entry.unavailable,
            requested=config.episodes_per_configuration,
            source_check=(source_checks or {}).get(name),
        )
        records = [
            r
            for k, r in latest.items()
            if k[0] == name
            and k[1] < config.episodes_per_configuration
            and r["status"] in FINISHED_STATUSES
        ]
        item.add_records(records)
        item.finished_this_session = sum(r.configuration == name for r in reports)
        item.episodes_per_min = item.finished_this_session / minutes
        if entry.unavailable is None and config.merge:
            successes = {k for k, r in latest.items() if r["status"] == "success"}
            try:
                merged = merge_configuration(run_dir, name, successes)
            except OSError as error:
                if not is_disk_full(error):
                    raise
                line = (
                    f"{name}: not merged: {run_dir / 'datasets'}: no space left on device "
                    f"({size_text(free_bytes(run_dir))} free); free space and run again"
                )
                summary.notes.append(line)
                item.diagnosis = low_yield_diagnosis(item)
                summary.configurations.append(item)
                continue
            if merged.output.exists():
                item.dataset = str(merged.output)
                item.dataset_episodes = merged.episodes
            item.excluded_shards = [f"{p.name}: {why}" for p, why in merged.excluded_shards]
            for path, why in merged.excluded_shards:
                summary.notes.append(f"{name}: shard {path.name} excluded from merge: {why}")
            item.missing = len(merged.missing)
            for key in merged.missing:
                record = latest[key]
                ledger.append({**record, "status": "lost", "reason": "shard_unreadable"})
            if merged.missing:
                summary.notes.append(
                    f"{name}: {len(merged.missing)} episodes lost with excluded shards; "
                    "run again with resume to regenerate them"
                )
        item.diagnosis = low_yield_diagnosis(item)
        check_message = (item.source_check or {}).get("message", "")
        if item.diagnosis:
            summary.notes.append(item.diagnosis)
        elif check_message and (item.source_check or {}).get("verdict") != "ok":
            summary.notes.append(f"{name}: source check: {check_message}")
        summary.configurations.append(item)
