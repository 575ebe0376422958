"""Worker pools: local processes (default) or Ray actors, behind one small interface.

Both run :meth:`r2s2r_datagen.worker.WorkerState.run` — the same job function — in a worker
that keeps its simulator backend across jobs. The scheduler (:mod:`r2s2r_datagen.runner`)
gives each idle slot one job at a time and watches a deadline per job; a slot whose worker
crashed or hung is *replaced* (the process or actor is killed and a fresh one with a new id,
hence new shard names, takes the slot), so a bad episode costs only itself.

Why not ``concurrent.futures.ProcessPoolExecutor``: one worker that dies marks the whole
executor broken (every pending future fails), and a running job cannot be cancelled, so a hung
episode would hold its worker for ever. A slot per ``multiprocessing`` process (spawn context:
no inherited OpenGL/EGL state) gives per-job kill and restart with the same amount of code.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

from r2s2r_common.errors import RunFailedError
from r2s2r_common.process import terminate_self, watch_owner

from r2s2r_datagen.generator import EpisodeJob
from r2s2r_datagen.worker import JobReport, WorkerSetup, WorkerState, use_one_core

RAY_SOCKET_PATH_LIMIT = 107
"""AF_UNIX path limit; Ray puts ``session_<date>_<pid>/sockets/plasma_store`` under its dir."""
_RAY_SESSION_SUFFIX_LEN = 64
READY = "ready"
"""First message of a worker process: imports done, jobs can be timed from now on."""
WORKER_START_TIMEOUT_S = 120.0
RAY_ANSWER_TIMEOUT_S = 10.0
"""How long a Ray cluster's address may take to accept a connection before it is refused."""


class RayClusterUnreachableError(RunFailedError):
    """The Ray cluster given by address does not answer, or does not take this driver."""


def check_ray_address(address: str, timeout_s: float = RAY_ANSWER_TIMEOUT_S) -> None:
    """Refuse, in one line and within ``timeout_s``, a Ray address that does not answer.

    ``ray.init`` retries an address where nothing listens for minutes; a TCP connection to the
    head's GCS port says at once whether anything is there. ``local``, ``auto`` and addresses
    that are not ``HOST:PORT`` are left to Ray.

    Raises:
        RayClusterUnreachableError: Nothing accepts a connection at ``HOST:PORT``.

    """
    host, sep, port = address.rpartition(":")
    if address in ("local", "auto") or "://" in address or not sep or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            speaks_grpc = _answers_http2(conn)
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else error.strerror or str(error)
        raise RayClusterUnreachableError(
            f"Ray cluster at {address} does not answer ({reason}, waited up to {timeout_s:.0f} "
            f"s): start its head (`ray start --head --port {port}`) or give the address it "
            "printed (--ray-address HOST:PORT)"
        ) from None
    if not speaks_grpc:
        raise RayClusterUnreachableError(
            f"Ray cluster at {address}: something listens there but does not answer as a Ray "
            "head's GCS (no gRPC/HTTP2 reply): is it the right port? (`ray status` on the head "
            "prints the address)"
        )


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""The HTTP/2 client connection preface (RFC 9113, 3.4), which a gRPC server answers."""
HTTP2_SETTINGS_FRAME = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An empty SETTINGS frame: length 0, type 4, no flags, stream 0."""


def _answers_http2(conn: socket.socket) -> bool:
    """Whether the peer answers the HTTP/2 preface with a SETTINGS frame (a gRPC server does).

    A Ray head's GCS port is a gRPC server; a web server, a database or a closed-but-listening
    socket answers otherwise or not at all (then the connection's timeout ends the wait).
    """
    try:
        conn.sendall(HTTP2_PREFACE + HTTP2_SETTINGS_FRAME)
        head = b""
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:
        return False
    return head[3] == 4 and head[5:9] == bytes(4)  # type SETTINGS on stream 0


@dataclass(frozen=True)
class WorkerLost:
    """A job attempt that ended without a report: the worker crashed or was killed.

    Attributes:
        reason: ``worker_crashed`` or ``job_timeout`` (:data:`~r2s2r_datagen.ledger.JOB_TIMEOUT`).
        detail: Exit code or error text.

    """

    reason: str
    detail: str


Outcome = JobReport | WorkerLost


class WorkerPool(Protocol):
    """Slots that each run one job at a time."""

    @property
    def size(self) -> int:
        """Number of slots."""
        ...

    def submit(self, slot: int, job: EpisodeJob) -> None:
        """Start ``job`` on the (idle, ready) worker of ``slot``."""
        ...

    def is_ready(self, slot: int) -> bool:
        """Whether the worker of ``slot`` has started (a replacement takes a moment)."""
        ...

    def wait(self, timeout_s: float) -> list[tuple[int, Outcome]]:
        """Block up to ``timeout_s`` for finished jobs; return ``(slot, outcome)`` pairs."""
        ...

    def replace(self, slot: int) -> None:
        """Kill the worker of ``slot`` (hung) and start a fresh one in its place."""
        ...

    def close(self) -> None:
        """Stop every worker."""
        ...


SetupFactory = Callable[[], WorkerSetup]


def _process_worker_main(conn: Connection, setup: WorkerSetup) -> None:
    """Entry point of a worker process: run jobs from ``conn`` until it closes.

    The worker also ends, within a fraction of a second, when the job process dies (it would
    otherwise finish its episode and write to its shard after the job is gone).
    """
    watch_owner(terminate_self, owner_pid=os.getppid())
    use_one_core()
    state = WorkerState(setup)
    try:
        state.warm_up()
        conn.send(READY)
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError):
                return
            if job is None:
                return
            report = state.run(job)
            try:
                conn.send(report)
            except (BrokenPipeError, OSError):
                return
    except KeyboardInterrupt:
        return


@dataclass
class _ProcessSlot:
    process: Any
    conn: Connection
    busy: bool = False
    ready: bool = False


class LocalProcessPool:
    """Worker processes on this machine (``spawn`` start method).

    Args:
        size: Number of worker processes.
        make_setup: Returns the setup of a new worker (a fresh, unique worker id each call).

    """

    def __init__(self, size: int, make_setup: SetupFactory) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._make_setup = make_setup
        self._slots = self._start_many(size)

    def _spawn(self) -> _ProcessSlot:
        parent_conn, child_conn = self._ctx.Pipe()
        process = self._ctx.Process(  # type: ignore[attr-defined]
            target=_process_worker_main,
            args=(child_conn, self._make_setup()),
            daemon=True,
            name="r2s2r-datagen-worker",
        )
        process.start()
        child_conn.close()
        return _ProcessSlot(process, parent_conn)

    def _start_many(self, count: int) -> list[_ProcessSlot]:
        """Start ``count`` workers in parallel and wait until each has imported its modules.

        Raises:
            RuntimeError: If a worker dies or stays silent for WORKER_START_TIMEOUT_S.

        """
        slots = [self._spawn() for _ in range(count)]
        for slot in slots:
            try:
                if not slot.conn.poll(WORKER_START_TIMEOUT_S) or slot.conn.recv() != READY:
                    raise EOFError
            except (EOFError, OSError):
                slot.process.kill()
                raise RuntimeError(
                    f"datagen worker did not start (exit code {slot.process.exitcode}); "
                    "its error is above"
                ) from None
            slot.ready = True
        return slots

    def is_ready(self, slot: int) -> bool:
        """See :meth:`WorkerPool.is_ready`."""
        return self._slots[slot].ready

    @property
    def size(self) -> int:
        """See :meth:`WorkerPool.size`."""
        return len(self._slots)

    def submit(self, slot: int, job: EpisodeJob) -> None:
        """See :meth:`WorkerPool.submit`."""
        entry = self._slots[slot]
        entry.busy = True
        with contextlib.suppress(BrokenPipeError, OSError):
            entry.conn.send(job)  # a gone worker is reported by wait() through its sentinel

    def wait(self, timeout_s: float) -> list[tuple[int, Outcome]]:
        """See :meth:`WorkerPool.wait`.

        Raises:
            RuntimeError: If a replacement worker dies before it is ready.

        """
        watched = {i: s for i, s in enumerate(self._slots) if s.busy or not s.ready}
        if not watched:
            return []
        handles: dict[Any, int] = {}
        for index, entry in watched.items():
            handles[entry.conn] = index
            handles[entry.process.sentinel] = index
        ready = wait(list(handles), timeout=max(0.0, timeout_s))
        results: dict[int, Outcome] = {}
        for index in sorted({handles[h] for h in ready}):
            entry = self._slots[index]
            if not entry.ready:
                try:
                    if not entry.conn.poll() or entry.conn.recv() != READY:
                        raise EOFError
                except (EOFError, OSError):
                    raise RuntimeError(
                        f"datagen worker did not start (exit code {entry.process.exitcode})"
                    ) from None
                entry.ready = True
                continue
            outcome: Outcome
            try:
                if entry.conn.poll():
                    outcome = entry.conn.recv()
                else:
                    raise EOFError
            except (EOFError, OSError):
                entry.process.join(timeout=5.0)
                outcome = WorkerLost("worker_crashed", f"exit code {entry.process.exitcode}")
                entry.conn.close()
                self._slots[index] = self._spawn()
            else:
                entry.busy = False
            results[index] = outcome
        return sorted(results.items())

    def replace(self, slot: int) -> None:
        """See :meth:`WorkerPool.replace`."""
        entry = self._slots[slot]
        entry.process.kill()
        entry.process.join(timeout=5.0)
        entry.conn.close()
        self._slots[slot] = self._spawn()

    def close(self) -> None:
        """See :meth:`WorkerPool.close`.

        An idle worker is told to stop. A busy or starting one (the run was interrupted: its
        job's report would never be read) is terminated at once rather than waited for; an
        episode it was writing stays under its temporary shard name, which the runner removes.
        """
        for entry in self._slots:
            if entry.busy or not entry.ready:
                entry.process.terminate()
                continue
            with contextlib.suppress(BrokenPipeError, OSError):
                entry.conn.send(None)
        for entry in self._slots:
            entry.process.join(timeout=10.0)
            if entry.process.is_alive():
                entry.process.kill()
                entry.process.join(timeout=5.0)
            entry.conn.close()


class _RayWorker:
    """The Ray actor: one :class:`WorkerState` per actor process."""

    def __init__(self, setup: WorkerSetup) -> None:
        use_one_core()
        self.state = WorkerState(setup)
        self.state.warm_up()

    def run(self, job: EpisodeJob) -> JobReport:
        return self.state.run(job)

    def ready(self) -> str:
        return READY


def ray_temp_dir(run_dir: str | Path) -> Path:
    """Ray's temp dir: ``<run_dir>/ray``, reached through a short symlink if needed.

    Ray's socket paths must fit in 107 bytes; when ``<run_dir>/ray`` is too long, a link
    ``<tmp>/r2s2r-ray-<hash>`` pointing into the run dir is returned instead (the data still
    lives in the run dir).
    """
    target = (Path(run_dir) / "ray").resolve()
    target.mkdir(parents=True, exist_ok=True)
    if len(str(target)) + _RAY_SESSION_SUFFIX_LEN <= RAY_SOCKET_PATH_LIMIT:
        return target
    digest = hashlib.sha256(str(target).encode()).hexdigest()[:10]
    link = Path(tempfile.gettempdir()) / f"r2s2r-ray-{digest}"
    if link.is_symlink() and Path(os.readlink(link)) != target:
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(target, target_is_directory=True)
    return link


class RayActorPool:
    """Ray actors as workers (``ray.init(address=...)``; ``"local"`` starts a local Ray).

    Args:
        size: Number of actors.
        make_setup: Returns the setup of a new worker.
        address: Ray address; ``"local"`` starts a local instance (stopped on close).
        run_dir: The run directory (Ray's temp dir goes inside it for a local Ray).

    Raises:
        ImportError: If ray is not installed.

    """

    def __init__(self, size: int, make_setup: SetupFactory, address: str, run_dir: Path) -> None:
        import ray

        self._ray = ray
        self._make_setup = make_setup
        self._started_ray = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address == "local":
                kwargs.update(
                    address="local", num_cpus=max(size, 1), _temp_dir=str(ray_temp_dir(run_dir))
                )
            else:
                check_ray_address(address)
                kwargs.update(
                    address=address,
                    runtime_env={"env_vars": {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}},
                )
            try:
                ray.init(**kwargs)
            except ConnectionError as error:  # answers, but not as a Ray head that takes us
                raise RayClusterUnreachableError(
                    f"Ray cluster at {address}: {error}; is it a Ray head, and does this "
                    "machine have the cluster's auth token (RAY_AUTH_TOKEN_PATH)?"
                ) from None
            self._started_ray = True
        self._actor_cls: Any = ray.remote(num_cpus=1, max_restarts=0)(_RayWorker)
        self._actors: list[Any] = [self._actor_cls.remote(self._make_setup()) for _ in range(size)]
        try:
            ray.get([a.ready.remote() for a in self._actors], timeout=WORKER_START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise RayClusterUnreachableError(
                f"Ray cluster at {address}: {size} workers of 1 CPU each did not start within "
                f"{WORKER_START_TIMEOUT_S:.0f} s (too few free CPUs in the cluster?)"
            ) from None
        self._refs: dict[int, Any] = {}

    def _start(self) -> Any:
        return self._actor_cls.remote(self._make_setup())

    def is_ready(self, slot: int) -> bool:
        """See :meth:`WorkerPool.is_ready` (a new actor queues its first job until it is up)."""
        return True

    @property
    def size(self) -> int:
        """See :meth:`WorkerPool.size`."""
        return len(self._actors)

    def submit(self, slot: int, job: EpisodeJob) -> None:
        """See :meth:`WorkerPool.submit`."""
        self._refs[slot] = self._actors[slot].run.remote(job)

    def wait(self, timeout_s: float) -> list[tuple[int, Outcome]]:
        """See :meth:`WorkerPool.wait`."""
        if not self._refs:
            return []
        ray = self._ray
        by_ref = {ref: slot for slot, ref in self._refs.items()}
        ready, rest = ray.wait(list(by_ref), num_returns=1, timeout=max(0.0, timeout_s))
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        results = []
        for ref in ready:
            slot = by_ref[ref]
            del self._refs[slot]
            outcome: Outcome
            try:
                outcome = ray.get(ref)
            except ray.exceptions.RayError as error:
                outcome = WorkerLost("worker_crashed", f"{type(error).__name__}: {error}"[:500])
                ray.kill(self._actors[slot], no_restart=True)
                self._actors[slot] = self._start()
            results.append((slot, outcome))
        return sorted(results, key=lambda item: item[0])

    def replace(self, slot: int) -> None:
        """See :meth:`WorkerPool.replace`."""
        self._refs.pop(slot, None)
        self._ray.kill(self._actors[slot], no_restart=True)
        self._actors[slot] = self._start()

    def close(self) -> None:
        """See :meth:`WorkerPool.close`."""
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)
        self._actors = []
        if self._started_ray:
            self._ray.shutdown()
