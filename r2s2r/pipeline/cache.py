"""The pipeline's one caching rule: resumable stages with a ``stage.json`` record.

Each stage (demonstrations, grounding, generation of one configuration, training of one
policy, evaluation of one policy) writes its outputs into its own folder and, when it
finishes, a ``stage.json`` record: the hash of its inputs, the inputs themselves, its outputs,
its wall time and the commit of the code that produced them. A stage is skipped when that
record exists, its inputs hash equals the current one and every output it names still exists;
otherwise it runs again. A stage's inputs include the *fingerprints* of the files it reads
(the producing stage's inputs hash, or for a file given from outside its size and modification
time), so a change upstream re-runs everything downstream and nothing else. The experiment
keeps its stages in one experiment directory; the main job keeps its prerequisites (the
demonstrations, the grounding artifact) in their own folders (``runs/demos``,
``runs/grounding``), shared by its runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2s2r_common.console import duration_text
from r2s2r_common.errors import Terminated, raise_if_stop_requested
from r2s2r_common.files import write_atomic

STAGE_RECORD = "stage.json"
PENDING_RECORD = "stage.pending"
CLOCK_RECORD = "stage.clock"
"""Wall time a pending stage has spent in earlier sittings (JSON), kept while it resumes."""
CLOCK_PERIOD_S = 30.0
"""How often a running stage writes its clock: a killed machine loses at most this much."""


def interrupted_note(name: str) -> str:
    """Return what a stop (Ctrl-C, SIGTERM) in stage ``name`` adds to the command's last line."""
    return (
        f"stage {name} was interrupted; run the same command again to resume it (finished "
        "stages are kept, and this one continues from its partial outputs)"
    )


class StageError(RuntimeError):
    """A stage could not produce its outputs (the message says why)."""


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def current_commit(directory: str | Path = ".") -> str:
    """Return the git commit of ``directory``'s checkout ('' outside a git checkout).

    ``-dirty`` is appended when tracked files differ from that commit (as ``git describe
    --dirty`` does): a record made from uncommitted edits says so. An install built from an
    older tree (``scripts/setup.sh`` not rerun) is not detected here.
    """
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    head = git("rev-parse", "HEAD")
    if head is None or head.returncode != 0:
        return ""
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = status is not None and status.returncode == 0 and bool(status.stdout.strip())
    return head.stdout.strip() + ("-dirty" if dirty else "")


def inputs_hash(inputs: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a stage's inputs (sorted keys)."""
    text = json.dumps(inputs, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(path: str | Path) -> str:
    """SHA-256 of a (small) file's bytes: config files are identified by content."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def file_fingerprint(path: str | Path) -> str:
    """Identity of a file or folder given from outside: resolved path, size and mtime.

    Folders (shard directories) fingerprint every file under them. Content hashing of
    multi-GB datasets would cost minutes; size + nanosecond mtime changes when they are
    rewritten.

    Raises:
        FileNotFoundError: If the path does not exist.

    """
    target = Path(path).resolve()
    if not target.exists():
        raise FileNotFoundError(f"{target}: not found")
    files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
    digest = hashlib.sha256(str(target).encode())
    for item in files:
        stat = item.stat()
        digest.update(f"{item}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


@dataclass
class StageRecord:
    """What a finished stage wrote in its ``stage.json``.

    Attributes:
        name: Stage name.
        inputs_hash: :func:`inputs_hash` of its inputs.
        inputs: The inputs.
        outputs: Output name -> path.
        wall_s: Wall time of the run that produced the outputs.
        finished_unix_s: When it finished.
        info: Anything the stage wants to keep (counts, losses, ...).
        commit: Git commit of the code that produced the outputs ('' if unknown).
        sittings: Runs of the stage it took (> 1 when it was stopped and resumed); ``wall_s``
            adds up all of them.

    """

    name: str
    inputs_hash: str
    inputs: dict[str, Any]
    outputs: dict[str, str]
    wall_s: float
    finished_unix_s: float
    info: dict[str, Any] = field(default_factory=dict)
    commit: str = ""
    sittings: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "name": self.name,
            "inputs_hash": self.inputs_hash,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "wall_s": self.wall_s,
            "finished_unix_s": self.finished_unix_s,
            "info": self.info,
            "commit": self.commit,
            "sittings": self.sittings,
        }

    @classmethod
    def read(cls, path: Path) -> StageRecord | None:
        """Read a record; None if missing or unreadable (the stage then runs again)."""
        try:
            data = json.loads(path.read_text())
            return cls(
                name=str(data["name"]),
                inputs_hash=str(data["inputs_hash"]),
                inputs=dict(data["inputs"]),
                outputs={str(k): str(v) for k, v in data["outputs"].items()},
                wall_s=float(data["wall_s"]),
                finished_unix_s=float(data["finished_unix_s"]),
                info=dict(data.get("info", {})),
                commit=str(data.get("commit", "")),
                sittings=int(data.get("sittings", 1)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


@dataclass
class StageOutcome:
    """Result of :meth:`StageRunner.run`.

    Attributes:
        record: The stage's record (fresh or cached).
        cached: True when the stage was skipped because its outputs were up to date.

    """

    record: StageRecord
    cached: bool

    @property
    def outputs(self) -> dict[str, str]:
        """Output name -> path."""
        return self.record.outputs

    @property
    def fingerprint(self) -> str:
        """What downstream stages hash: this stage's inputs hash."""
        return self.record.inputs_hash


StageBody = Callable[[Path], tuple[dict[str, str], dict[str, Any]]]
"""A stage's work: given its folder, produce ``(outputs, info)`` or raise :class:`StageError`."""


class StageRunner:
    """Runs stages in an experiment directory, skipping those that are up to date.

    Args:
        root: Experiment directory.
        log: Where progress lines go.
        commit: Git commit of the running code, recorded with every stage it runs.
        folders: Stage name -> its folder, for stages kept outside ``root`` (default:
            ``root/<name>``).

    Attributes:
        ran: Names of stages that did work in this session.
        skipped: Names of stages found up to date.

    """

    def __init__(
        self,
        root: str | Path,
        log: Callable[[str], None] | None = None,
        commit: str = "",
        folders: Mapping[str, Path] | None = None,
    ) -> None:
        self.root = Path(root)
        self.folders = {name: Path(path) for name, path in (folders or {}).items()}
        self.log = log or (lambda text: None)
        self.commit = commit
        self.ran: list[str] = []
        self.skipped: list[str] = []

    def folder(self, name: str) -> Path:
        """Return the folder of stage ``name`` (``a/b`` names nest)."""
        return self.folders.get(name, self.root / name)

    def record(self, name: str) -> StageRecord | None:
        """Return the stage's record as it is on disk (None if it never finished)."""
        return StageRecord.read(self.folder(name) / STAGE_RECORD)

    def cached(self, name: str, inputs: Mapping[str, Any]) -> StageRecord | None:
        """Return the stage's record if it is up to date with ``inputs``, else None."""
        record = self.record(name)
        if record is None or record.inputs_hash != inputs_hash(inputs):
            return None
        if not all(Path(path).exists() for path in record.outputs.values()):
            return None
        return record

    def run(
        self,
        name: str,
        inputs: Mapping[str, Any],
        body: StageBody,
        resume_inputs: Mapping[str, Any] | None = None,
        note: str = "",
        what: str = "",
        clear_stale: bool = True,
    ) -> StageOutcome:
        """Run stage ``name`` unless it is up to date.

        The log gets one line when it starts (``[name] running``, or ``[name] running:
        what`` when ``what`` says what it does, with ``note`` such as where its command's log
        goes in parentheses, and ``(resuming)`` when partial outputs are kept) and one when it
        ends (``[name] done in N s``), or only ``[name] up to date``. A stop while the body
        runs (Ctrl-C, SIGTERM raised as :class:`~r2s2r_common.errors.Terminated`) goes on up
        with :func:`interrupted_note` added (the command line's error boundary prints it).

        The old record is removed before the body runs, so an interrupted stage is never
        mistaken for a finished one. The body may resume from partial outputs left in its
        folder (training and generation do) as long as ``resume_inputs`` (default: all
        inputs) are unchanged; when they changed, the folder is emptied first, unless
        ``clear_stale`` is False (a stage whose command keeps its own folder: ``r2s2r
        record-demos`` replaces only what its manifest says it wrote).

        Raises:
            StageError: From the body (no record is written).

        """
        raise_if_stop_requested()  # a stop the last stage's work lost: at its boundary
        record = self.cached(name, inputs)
        if record is not None:
            self.skipped.append(name)
            self.log(f"[{name}] up to date")
            return StageOutcome(record, cached=True)
        folder = self.folder(name)
        resume_hash = inputs_hash(inputs if resume_inputs is None else resume_inputs)
        pending = folder / PENDING_RECORD
        resuming = folder.is_dir() and _read_text(pending) == resume_hash
        if clear_stale and folder.exists() and not resuming:
            # Partial outputs of different inputs (or of unknown origin) must not be resumed.
            for item in folder.iterdir():
                if item.is_dir() and not item.is_symlink():
                    shutil.rmtree(item)
                else:
                    item.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        record_path = folder / STAGE_RECORD
        record_path.unlink(missing_ok=True)
        write_atomic(pending, resume_hash)
        notes = [note] if note else []
        if resuming and any(p.name != PENDING_RECORD for p in folder.iterdir()):
            notes.append("resuming")
        self.log(
            f"[{name}] running"
            + (f": {what}" if what else "")
            + (f" ({'; '.join(notes)})" if notes else "")
        )
        clock = StageClock(folder / CLOCK_RECORD, resume_hash, resuming)
        try:
            with clock:
                outputs, info = body(folder)
        except (KeyboardInterrupt, Terminated) as stop:
            stop.add_note(interrupted_note(name))
            raise
        missing = {k: v for k, v in outputs.items() if not Path(v).exists()}
        if missing:
            raise StageError(f"stage {name}: outputs not produced: {missing}")
        record = StageRecord(
            name=name,
            inputs_hash=inputs_hash(inputs),
            inputs=json.loads(json.dumps(dict(inputs), default=str)),
            outputs={k: str(v) for k, v in outputs.items()},
            wall_s=clock.total_s(),
            finished_unix_s=time.time(),
            info=info,
            commit=self.commit,
            sittings=clock.sittings,
        )
        write_atomic(record_path, json.dumps(record.to_dict(), indent=2))
        (folder / CLOCK_RECORD).unlink(missing_ok=True)
        self.ran.append(name)
        self.log(f"[{name}] done in {duration_text(record.wall_s)}")
        return StageOutcome(record, cached=False)


class StageClock:
    """A stage's wall time over all its sittings (stopped, killed, resumed).

    While the body runs, a daemon thread writes the time so far to ``stage.clock`` every
    :data:`CLOCK_PERIOD_S` (and once more when the body ends, however it ends), tagged with
    the stage's resume hash; a resumed stage starts from what its earlier sittings wrote, so
    a killed machine loses at most one period of the count.
    """

    def __init__(self, path: Path, resume_hash: str, resuming: bool) -> None:
        self.path = path
        self.earlier_s = 0.0
        self.sittings = 1
        self._tag = resume_hash
        if resuming:
            try:
                data = json.loads(path.read_text())
                if data.get("resume_hash") == resume_hash:
                    self.earlier_s = float(data["wall_s"])
                    self.sittings = int(data["sittings"]) + 1
            except (OSError, ValueError, KeyError, TypeError):
                pass
        self._started = 0.0
        self._ended: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def total_s(self) -> float:
        """Wall time of every sitting so far, this one included."""
        end = self._ended if self._ended is not None else time.perf_counter()
        return self.earlier_s + (end - self._started)

    def _write(self) -> None:
        data = {"resume_hash": self._tag, "wall_s": self.total_s(), "sittings": self.sittings}
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(data))

    def _tick(self) -> None:
        while not self._stop.wait(CLOCK_PERIOD_S):
            self._write()

    def __enter__(self) -> StageClock:
        self._started = time.perf_counter()
        self._write()
        self._thread = threading.Thread(target=self._tick, name="stage-clock", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._ended = time.perf_counter()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._write()
