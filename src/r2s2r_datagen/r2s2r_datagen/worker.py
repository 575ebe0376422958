"""The job function every worker runs (process pool and Ray alike).

A worker process owns one simulator backend, reused across its jobs, the generators it has
built, and one dataset shard per configuration (``shards/<configuration>/shard_<worker>.hdf5``).
Each shard is opened, extended by one episode and closed again per job, so a worker killed
between jobs never leaves a shard half-written, and one killed while writing can corrupt only
its own shard (which the merge reports and excludes; the ledger check then re-runs those
episodes on resume).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from r2s2r_recorder.dataset import EpisodeWriter

from r2s2r_datagen.configurations import check_plan
from r2s2r_datagen.generator import (
    EpisodeGenerator,
    EpisodeJob,
    EpisodeSkipped,
    classify_exception,
    make_generator,
)

Status = Literal["success", "failed", "skipped"]


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

    """

    worker_id: str
    run_dir: str
    behavior_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    generator_overrides: dict[str, str] = field(default_factory=dict)
    warmup: EpisodeJob | None = None


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


def shard_path(run_dir: str | Path, configuration: str, worker_id: str) -> Path:
    """``<run_dir>/shards/<configuration>/shard_<worker_id>.hdf5``."""
    return Path(run_dir) / "shards" / configuration / f"shard_{worker_id}.hdf5"


class WorkerState:
    """Per-process state of a worker: backend, generators, shard writers.

    Args:
        setup: The worker's setup.
        backend_factory: Builds the simulator backend (default: MuJoCo with rendering).

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
                from r2s2r_sim.mujoco_backend import MujocoBackend

                self._backend = MujocoBackend(enable_rendering=True)
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
        for camera in ("head_camera", "hand_camera"):
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
                path = shard_path(self.setup.run_dir, job.configuration, self.setup.worker_id)
                with EpisodeWriter(
                    path,
                    compression_level=job.recording.compression_level,
                    append_existing=path.exists(),
                ) as writer:
                    writer.append(episode)
                report.status, report.reason = "success", "success"
                report.frames = episode.num_frames
                report.shard = str(path.relative_to(self.setup.run_dir))
                report.timings["write"] = time.perf_counter() - write_started
            else:
                report.status, report.reason = "failed", result.outcome or "failure"
        report.timings["total"] = time.perf_counter() - started
        return report
