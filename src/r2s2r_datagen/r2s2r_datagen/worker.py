"""The job function every worker runs (process pool and Ray alike).

A worker process owns one simulator backend, reused across its jobs, and the generators it has
built. Each successful episode becomes one shard
(``shards/<configuration>/shard_<worker>_e<episode>.hdf5``), written under a temporary name and
renamed when closed: a worker killed mid-write, or a write that fails on a full disk, leaves no
shard and harms no other episode (the episode is recorded as ``write_failed``, or not at all, and
a resume runs it again).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import cv2
from r2s2r_common.disk import disk_full_message, is_disk_full
from r2s2r_common.files import move_into_place
from r2s2r_description.cameras import CAMERA_NAMES
from r2s2r_sim.backend_config import SimBackendConfig, make_backend

from r2s2r_datagen.configurations import check_plan
from r2s2r_datagen.generator import (
    EpisodeGenerator,
    EpisodeJob,
    EpisodeSkipped,
    classify_exception,
    make_generator,
)
from r2s2r_dataset import EpisodeWriter

SOFTWARE_RASTER_THREADS = "0"
"""Mesa llvmpipe's rasterizer threads in a worker process (``LP_NUM_THREADS``): 0 draws in the
worker's own thread (see :func:`use_one_core`). GPU OpenGL ignores it."""


def use_one_core() -> None:
    """Run this worker process's libraries on one thread each, before its simulator starts.

    A pool runs one worker per core, so the helper threads of Mesa's software GL (one per core
    by default; ``LP_NUM_THREADS``, unless the environment sets it) and of OpenCV (remap, blur,
    optical flow in the cell's perception) would only contend with the other workers for the
    cores. The episodes are the same, array for array (``test_worker_threads.py``).
    """
    os.environ.setdefault("LP_NUM_THREADS", SOFTWARE_RASTER_THREADS)
    cv2.setNumThreads(1)


Status = Literal["success", "failed", "skipped"]

WRITE_FAILED = "write_failed"
"""Reason of an episode generated and then lost because its shard could not be written (a
full disk, an I/O error): not a verdict on the episode, so a resume runs it again."""


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs besides its jobs (picklable, sent once at start).

    Attributes:
        worker_id: Unique within the run directory (names the shard files).
        run_dir: The run directory.
        behavior_options: Options per behavior (from the configurations file).
        generator_overrides: ``behavior → "module:factory"``.
        warmup: A job whose world and objects the worker loads into its backend before it
            reports ready (model build and renderer start-up then do not count against the
            first job's timeout); it is not run.
        simulator: Which simulator backend the worker builds (MuJoCo by default).

    """

    worker_id: str
    run_dir: str
    behavior_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    generator_overrides: dict[str, str] = field(default_factory=dict)
    warmup: EpisodeJob | None = None
    simulator: SimBackendConfig = field(default_factory=SimBackendConfig)


@dataclass
class JobReport:
    """The result of one job attempt, as recorded in the ledger.

    Attributes:
        configuration: Configuration name.
        episode_index: Episode index.
        seed: Episode seed.
        status: ``success`` (episode written), ``failed`` or ``skipped`` (bad input).
        reason: ``success`` or the failure/skip reason.
        attempts: Simulator rollouts the generator tried.
        frames: Frames written (0 unless success).
        shard: Shard file the episode went to (relative to the run dir), or ''.
        worker: Worker id.
        timings: Seconds per phase (``total``, ``generate``, ``write``, generator's own).
        detail: Human-readable detail of a failure.
        job_attempt: 0 for the first try, 1 for the retry after a crash or timeout.

    """

    configuration: str
    episode_index: int
    seed: int
    status: Status
    reason: str
    attempts: int = 0
    frames: int = 0
    shard: str = ""
    worker: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    detail: str = ""
    job_attempt: int = 0

    def as_record(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)


def shard_path(run_dir: str | Path, configuration: str, worker_id: str, episode_index: int) -> Path:
    """``<run_dir>/shards/<configuration>/shard_<worker_id>_e<episode_index>.hdf5``.

    One shard per written episode: a shard is written whole under a temporary name and renamed
    when closed (:func:`write_episode`), so no shard is ever extended in place, and a failed
    write (a full disk) or a kill can leave nothing half-written that holds other episodes.
    """
    name = f"shard_{worker_id}_e{episode_index:06d}.hdf5"
    return Path(run_dir) / "shards" / configuration / name


def partial_shard_path(path: Path) -> Path:
    """Where a shard is written before it is complete: ``.<name>.partial`` beside it.

    The name does not match ``shard_*.hdf5``, so neither the scan nor the merge ever reads it.
    """
    return path.with_name(f".{path.name}.partial")


def write_episode(path: Path, episode: Any, compression_level: int) -> None:
    """Write one episode as the shard ``path``; nothing is left under either name if it fails.

    The shard is written under :func:`partial_shard_path` and renamed when closed, so a failed
    write (a full disk) leaves no empty or half-written shard, and a write that fails after a
    full disk prints one error, not h5py's report of every object it could not release.

    Raises:
        OSError: The write failed (``r2s2r_common.disk.is_disk_full`` tells a full disk).
        RuntimeError: h5py's wrapping of a failed write.

    """
    quiet_disk_full_unraisables()
    partial = partial_shard_path(path)
    partial.unlink(missing_ok=True)
    try:
        with EpisodeWriter(partial, compression_level=compression_level) as writer:
            writer.append(episode)
        move_into_place(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise


def _is_h5py_release_on_full_disk(error: BaseException | None, traceback: Any = None) -> bool:
    if error is None or not is_disk_full(error):
        return False
    frame = traceback if traceback is not None else error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    released = frame is not None and frame.tb_frame.f_code.co_name.endswith("_dealloc")
    return released or "id ref count" in str(error)


def quiet_disk_full_unraisables() -> None:
    """Drop h5py's reports of the objects it cannot release after a write failed on a full disk.

    When a write fails on a full disk, h5py releases the file's objects (then, or later, when
    the exception and its frames go) and each release fails again with the same ENOSPC ("Can't
    decrement id ref count"), printed by Cython through :func:`sys.excepthook` and
    :func:`sys.unraisablehook` as "Exception ignored in ObjectID.__dealloc__" and a traceback
    per object: the hundreds of lines a full disk used to print. The failure itself is raised
    and reported once, in one line. Installed once per worker process; every other error is
    reported as before.
    """
    if getattr(sys.unraisablehook, "_r2s2r_quiet_disk_full", False):
        return
    previous_unraisable = sys.unraisablehook
    previous_except = sys.excepthook

    def unraisable(info: Any) -> None:
        if not _is_h5py_release_on_full_disk(info.exc_value, info.exc_traceback):
            previous_unraisable(info)

    def excepthook(kind: Any, value: BaseException, traceback: Any) -> None:
        if not _is_h5py_release_on_full_disk(value, traceback):
            previous_except(kind, value, traceback)

    unraisable._r2s2r_quiet_disk_full = True  # type: ignore[attr-defined]
    sys.unraisablehook = unraisable
    sys.excepthook = excepthook


def write_failure_detail(folder: Path, error: BaseException) -> str:
    """One line for an episode lost to its write: the folder and the space, or the error."""
    if is_disk_full(error):
        return disk_full_message(folder)
    text = " ".join(str(error).split())
    return f"{folder}: {type(error).__name__}: {text[:300]}"


class WorkerState:
    """Per-process state of a worker: backend, generators, shard writers.

    Args:
        setup: The worker's setup.
        backend_factory: Builds the simulator backend (default: ``setup.simulator``).

    """

    def __init__(self, setup: WorkerSetup, backend_factory: Any = None) -> None:
        self.setup = setup
        self._backend_factory = backend_factory
        self._backend: Any = None
        self._generators: dict[str, EpisodeGenerator] = {}

    @property
    def backend(self) -> Any:
        """The worker's simulator backend (built on first use, then reused)."""
        if self._backend is None:
            if self._backend_factory is not None:
                self._backend = self._backend_factory()
            else:
                os.environ.setdefault("MUJOCO_GL", "egl")
                self._backend = make_backend(self.setup.simulator)
        return self._backend

    def generator(self, behavior: str) -> EpisodeGenerator:
        """Return the generator of ``behavior`` (built once per worker)."""
        if behavior not in self._generators:
            self._generators[behavior] = make_generator(
                behavior,
                self.setup.behavior_options.get(behavior, {}),
                self.setup.generator_overrides,
            )
        return self._generators[behavior]

    def warm_up(self) -> None:
        """Build the backend, the model of the warm-up job's world and the renderers."""
        job = self.setup.warmup
        if job is None:
            return
        self.backend.reset(job.world, job.seed, job.plan.objects)
        for camera in CAMERA_NAMES:
            self.backend.render(camera)

    def run(self, job: EpisodeJob) -> JobReport:
        """Run one job: check it, generate, write a success to the shard; never raises."""
        started = time.perf_counter()
        report = JobReport(
            configuration=job.configuration,
            episode_index=job.episode_index,
            seed=job.seed,
            status="failed",
            reason="",
            worker=self.setup.worker_id,
            job_attempt=job.attempt,
        )
        try:
            check_plan(job.plan, job.world)
            generator = self.generator(job.behavior)
            result = generator.generate(job, self.backend)
        except EpisodeSkipped as skipped:
            report.status, report.reason, report.detail = "skipped", skipped.reason, skipped.detail
        except Exception as error:
            reason, is_skip = classify_exception(error)
            report.status = "skipped" if is_skip else "failed"
            report.reason, report.detail = reason, f"{type(error).__name__}: {error}"
            report.attempts = 0 if is_skip else 1
        else:
            report.attempts = result.attempts
            report.timings.update(result.timings)
            report.timings["generate"] = time.perf_counter() - started
            report.detail = result.detail
            if result.skipped:
                report.status, report.reason = "skipped", result.outcome
            elif result.success and result.episode is not None:
                write_started = time.perf_counter()
                episode = result.episode
                provenance = dict(episode.metadata.provenance)
                provenance["job"] = {
                    "configuration": job.configuration,
                    "episode_index": job.episode_index,
                    "seed": job.seed,
                    "world_config_id": job.world_config_id,
                    "generator_attempts": result.attempts,
                }
                episode.metadata.provenance = provenance
                path = shard_path(
                    self.setup.run_dir, job.configuration, self.setup.worker_id, job.episode_index
                )
                try:
                    write_episode(path, episode, job.recording.compression_level)
                except (OSError, RuntimeError) as error:
                    # A full disk, an I/O error: the episode is lost to the write, not to
                    # the generator (resumes run it again, see ledger.INTERRUPTED_REASONS).
                    report.status, report.reason = "failed", WRITE_FAILED
                    report.detail = write_failure_detail(path.parent, error)
                else:
                    report.status, report.reason = "success", "success"
                    report.frames = episode.num_frames
                    report.shard = str(path.relative_to(self.setup.run_dir))
                report.timings["write"] = time.perf_counter() - write_started
            else:
                report.status, report.reason = "failed", result.outcome or "failure"
        report.timings["total"] = time.perf_counter() - started
        return report
