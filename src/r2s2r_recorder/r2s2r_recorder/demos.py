"""Demonstrations on the real twin: record N takes with the human-like demonstrator, convert.

:func:`record_demos` is the core of ``r2s2r record-demos``: it has the ``record_demos`` graph
(``config/graphs/record_demos.yaml``: real twin, cell state, belt speed, object tracker,
recorder and the demonstrator, each its own process) run by the :data:`RecordGraph` it is given
(the bring-up's supervisor, ``r2s2r.pipeline.demos``) until the demonstrator has run its trials
(one episode bag per trial), completes each bag's episode metadata from what the bag recorded,
and converts the bags with :func:`~r2s2r_recorder.bag_to_dataset.convert_bags` into one
dataset (``source = real``).

Two ways to say how much: ``episodes`` takes (every take converted, its outcome in the
episode metadata), or takes until ``successes`` of them succeeded, at most ``max_attempts``
(an operator re-recording failed takes; attempt i is trial ``seed + i``): only the successful
takes go into the dataset, the failed ones stay in ``bags/`` marked ``failure``, and the
manifest lists every take with its outcome reason and, for a failed one, how far from the
object its hand closed (:mod:`.grasp_miss`; one line per failed take and the median in the
printed summary).

The graph is self-contained (the twin is the cell), so it runs in a ROS domain of its own
(``domain_id``; by default one claimed for this process with a lock file, discovery on
localhost only, :mod:`r2s2r_common.ros_domain`): two recordings on one machine, or a recording
next to another job's twin, would otherwise share topics and services.

Output folder layout::

    bags/episode_NNNNNN/   one rosbag2 (MCAP) bag per trial
    dataset.hdf5           the converted episodes (or the path given as ``dataset_path``)
    record_demos.json      manifest: what was recorded (episodes, seed, condition, twin hash)
    logs/<graph>-<time>/   one log per node

Idempotent: when the manifest says the same episodes, seed, condition and twin configuration
(by content hash) were recorded and the dataset is there, a re-run reuses it. Anything else
is recorded again; files that this procedure did not write are never replaced unless asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel, resolve_config_path
from r2s2r_common.ros_domain import claim_domain
from r2s2r_common.topics import BELT_SPEED, TRIAL_OUTCOME
from rosbags.typesys.store import Typestore

from .bag_format import CUSTOM_DATA_KEY, SIDECAR_NAME, EpisodeInfo
from .bag_reading import BagReadError, open_reader, read_episode_info
from .bag_to_dataset import ConversionSummary, convert_bags, find_episode_bags
from .config import ConversionConfig
from .grasp_miss import PalmInBase, miss_lines, read_grasp_miss
from .msg_types import deserialize, make_typestore

GRAPH_NAME = "record_demos"
MANIFEST_NAME = "record_demos.json"
BAGS_DIRNAME = "bags"
DATASET_NAME = "dataset.hdf5"
EXIT_OK = 0
EXIT_NOTHING_CONVERTED = 1
EXIT_REFUSED = 2
EXIT_SHORT = 3
"""Exit code when fewer than the wanted successful takes were recorded within max_attempts."""
MAX_DOMAIN_ID = 232
"""Largest ROS_DOMAIN_ID whose DDS ports are valid on every platform."""


class RecordDemosError(RuntimeError):
    """The procedure cannot run as asked (e.g. it would replace files it did not write)."""


class RecordDemosConfig(ConfigModel):
    """What ``r2s2r record-demos`` records, and where."""

    episodes: int = Field(
        default=0, ge=0, le=100000, description="Takes (trials) to record; 0 with successes."
    )
    successes: int = Field(
        default=0,
        ge=0,
        le=100000,
        description="Record until this many takes succeeded (0: record `episodes` takes); "
        "only the successful takes are converted.",
    )
    max_attempts: int = Field(
        default=0,
        ge=0,
        le=100000,
        description="With successes: the most takes to try; 0: twice `successes`.",
    )
    out_dir: str = Field(min_length=1, description="Output folder (bags, dataset, manifest).")
    dataset_path: str = Field(
        default="", description="Dataset file to write; empty: <out_dir>/dataset.hdf5."
    )
    twin_config: str = Field(
        default="", description="Twin YAML (hidden world); empty: config/twin/default.yaml."
    )
    launch_args: list[str] = Field(
        default_factory=list,
        description="Extra NAME:=VALUE arguments of the record_demos graph (override the rest).",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the first trial.")
    condition: str = Field(
        default="nominal",
        pattern=r"^(nominal|lighting|belt_speed|unseen_object)$",
        description="Trial condition of the twin.",
    )
    real_time_factor: float = Field(
        default=1.0, gt=0.0, le=50.0, description="Twin simulation speed vs wall clock."
    )
    timeout_s: float = Field(
        default=0.0,
        ge=0.0,
        le=86400.0,
        description="Wall-clock limit of the recording; 0: 120 s + 60 s per episode.",
    )
    max_staleness_s: float = Field(
        default=2.0,
        gt=0.0,
        le=10.0,
        description="Conversion: largest age of a stream's latest sample at a frame. One limit "
        "for all streams; the belt-speed node (on the twin's 500 Hz /clock) stalls up to ~1.1 s "
        "on a loaded 2-core machine, cameras and joints much less (cadence in each bag).",
    )
    grace_period_s: float = Field(
        default=10.0, gt=0.0, le=120.0, description="Time each node gets to stop on SIGINT."
    )
    force: bool = Field(
        default=False, description="Replace bags or a dataset that no manifest says are ours."
    )
    domain_id: int | None = Field(
        default=None,
        ge=0,
        le=MAX_DOMAIN_ID,
        description="ROS_DOMAIN_ID of the recording graph; None: a private one claimed for "
        "this process (lock file per id; localhost discovery).",
    )

    @model_validator(mode="after")
    def _one_way_to_count(self) -> RecordDemosConfig:
        if (self.episodes > 0) == (self.successes > 0):
            raise ValueError(
                f"episodes = {self.episodes}, successes = {self.successes}: expected exactly "
                "one of them > 0 (a fixed number of takes, or takes until that many succeed)"
            )
        if self.max_attempts and not self.successes:
            raise ValueError(f"max_attempts = {self.max_attempts}: only with successes")
        if self.successes and self.attempts_cap < self.successes:
            raise ValueError(
                f"max_attempts = {self.max_attempts} < successes = {self.successes}: expected "
                "at least as many attempts as wanted successes"
            )
        return self

    @property
    def until_successes(self) -> bool:
        """Takes are recorded until ``successes`` succeeded (not a fixed count)."""
        return self.successes > 0

    @property
    def attempts_cap(self) -> int:
        """The most takes the graph runs: ``episodes``, or ``max_attempts`` (2 × successes)."""
        if not self.until_successes:
            return self.episodes
        return self.max_attempts or 2 * self.successes

    @property
    def out_path(self) -> Path:
        """The output folder (absolute)."""
        return Path(self.out_dir).resolve()

    @property
    def bags_path(self) -> Path:
        """Folder of the episode bags."""
        return self.out_path / BAGS_DIRNAME

    @property
    def dataset(self) -> Path:
        """The dataset file (absolute)."""
        return (
            Path(self.dataset_path).resolve() if self.dataset_path else self.out_path / DATASET_NAME
        )

    @property
    def manifest_path(self) -> Path:
        """The manifest file."""
        return self.out_path / MANIFEST_NAME

    @property
    def wall_limit_s(self) -> float:
        """Wall-clock limit of the recording graph."""
        return self.timeout_s or 120.0 + 60.0 * self.attempts_cap


def default_twin_config() -> Path:
    """Return the shipped ``config/twin/default.yaml`` (share dir, else the source tree)."""
    return resolve_config_path("twin/default.yaml")


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def recording_identity(config: RecordDemosConfig, twin_path: Path) -> dict[str, Any]:
    """Return what makes two recordings the same: how many takes, seed, condition, twin."""
    count: dict[str, Any] = (
        {"successes": config.successes, "max_attempts": config.attempts_cap}
        if config.until_successes
        else {"episodes": config.episodes}
    )
    return {
        **count,
        "seed": config.seed,
        "condition": config.condition,
        "twin_config_sha256": file_sha256(twin_path),
    }


def read_manifest(path: Path) -> dict[str, Any] | None:
    """Return the manifest at ``path``, or None if missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _write_yaml_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    tmp.replace(path)


# --- episode metadata from the bag ----------------------------------------------------------


@dataclass(frozen=True)
class RecordedTrial:
    """What a bag recorded about its trial.

    Attributes:
        object_type: From the last ``/trial/outcome`` message ('' if none).
        success: The operator's verdict from that message (None if none).
        belt_speed_mps: Median of ``/belt/speed`` (None if none recorded).
        reason: The outcome's reason ('success', 'missed_grasp', ...; '' if none).
        seed: The trial's seed (None if no outcome).

    """

    object_type: str
    success: bool | None
    belt_speed_mps: float | None
    reason: str = ""
    seed: int | None = None


def read_recorded_trial(bag_dir: str | Path, typestore: Typestore | None = None) -> RecordedTrial:
    """Read the trial outcome and belt speed a bag recorded.

    Raises:
        BagReadError: If the bag cannot be read.

    """
    store = typestore or make_typestore()
    object_type, success, speeds = "", None, []
    reason, seed = "", None
    reader = open_reader(bag_dir)
    try:
        wanted = [c for c in reader.connections if c.topic in (TRIAL_OUTCOME, BELT_SPEED)]
        for connection, _stamp, raw in reader.messages(connections=wanted):
            msg = deserialize(store, raw, connection.msgtype)
            if connection.topic == TRIAL_OUTCOME and hasattr(msg, "object_type"):
                object_type, success = str(msg.object_type), bool(msg.success)
                reason, seed = str(msg.reason), int(msg.seed)
            elif connection.topic == BELT_SPEED:
                speeds.append(float(msg.twist.linear.x))
    except (ValueError, KeyError) as error:
        raise BagReadError(
            f"{bag_dir}: cannot read {TRIAL_OUTCOME}/{BELT_SPEED}: {error}"
        ) from None
    finally:
        reader.close()
    return RecordedTrial(
        object_type, success, statistics.median(speeds) if speeds else None, reason, seed
    )


def complete_episode_info(info: EpisodeInfo, trial: RecordedTrial) -> EpisodeInfo:
    """Fill what the operator could not know when the episode started (from the bag).

    The object type and belt speed become known only during the trial; the outcome is the
    operator's verdict. Values the recorder already holds (not 'unknown' / 0) are kept.
    """
    updates: dict[str, Any] = {}
    if info.object_type == "unknown" and trial.object_type:
        updates["object_type"] = trial.object_type
    if info.belt_speed_mps == 0.0 and trial.belt_speed_mps is not None:
        updates["belt_speed_mps"] = round(trial.belt_speed_mps, 6)
    if info.outcome == "unknown" and trial.success is not None:
        updates["outcome"] = "success" if trial.success else "failure"
    return EpisodeInfo.model_validate({**info.model_dump(), **updates}) if updates else info


def write_episode_info(bag_dir: str | Path, info: EpisodeInfo) -> None:
    """Store episode metadata where the recorder keeps it (metadata.yaml custom_data, sidecar).

    Raises:
        BagReadError: If the bag has no metadata.yaml (an unfinished bag).

    """
    root = Path(bag_dir)
    meta_path = root / "metadata.yaml"
    if not meta_path.is_file():
        raise BagReadError(f"{root}: no metadata.yaml (bag not finalised)")
    meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
    section = meta.setdefault("rosbag2_bagfile_information", {})
    custom = section.get("custom_data") or {}
    custom[CUSTOM_DATA_KEY] = info.model_dump_json()
    section["custom_data"] = custom
    _write_yaml_atomic(meta_path, meta)
    sidecar = root / SIDECAR_NAME
    if sidecar.is_file():
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}
        data["episode"] = info.model_dump(mode="json")
        _write_yaml_atomic(sidecar, data)


def complete_bag_metadata(bag_dir: str | Path, typestore: Typestore | None = None) -> EpisodeInfo:
    """Complete one finalised bag's episode metadata from its recorded messages.

    Raises:
        BagReadError: Unreadable bag, or one without episode metadata.

    """
    return complete_bag(bag_dir, typestore)[0]


def complete_bag(
    bag_dir: str | Path, typestore: Typestore | None = None
) -> tuple[EpisodeInfo, RecordedTrial]:
    """Complete one bag's episode metadata; return it with what the bag recorded of its trial.

    Raises:
        BagReadError: Unreadable bag, or one without episode metadata.

    """
    info = read_episode_info(bag_dir)
    if info is None:
        raise BagReadError(f"{bag_dir}: no episode metadata (not recorded by the recorder)")
    trial = read_recorded_trial(bag_dir, typestore)
    completed = complete_episode_info(info, trial)
    if completed != info:
        write_episode_info(bag_dir, completed)
    return completed, trial


# --- takes: which go into the dataset ---------------------------------------------------------


@dataclass(frozen=True)
class TakeRecord:
    """One recorded take, as the manifest lists it.

    Attributes:
        bag: Bag directory name.
        seed: Trial seed (None if the bag has no outcome).
        outcome: 'success', 'failure' or 'unknown' (episode metadata).
        reason: The outcome's reason ('' if none recorded).
        object_type: The trial's object type.
        grasp_miss: For a failed take, where its grasp closed relative to the object
            (:meth:`r2s2r_recorder.grasp_miss.GraspMiss.as_dict`); None otherwise.

    """

    bag: str
    seed: int | None
    outcome: str
    reason: str
    object_type: str
    grasp_miss: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        data: dict[str, Any] = {
            "bag": self.bag,
            "seed": self.seed,
            "outcome": self.outcome,
            "reason": self.reason,
            "object_type": self.object_type,
        }
        if self.grasp_miss is not None:
            data["grasp_miss"] = self.grasp_miss
        return data


def with_grasp_misses(takes: list[TakeRecord], bag_of: dict[str, Path]) -> list[TakeRecord]:
    """Return ``takes`` with the grasp miss of every failed take read from its bag.

    A bag that cannot be read for it gets the reason instead of a figure.
    """
    palm = PalmInBase()  # compiled on its first use: only a take whose hand closed needs it
    typestore = make_typestore()
    result = []
    for take in takes:
        if take.outcome == "success" or take.bag not in bag_of:
            result.append(take)
            continue
        try:
            miss = read_grasp_miss(bag_of[take.bag], take.object_type, palm, typestore).as_dict()
        except BagReadError as error:
            miss = {"miss_m": None, "detail": f"bag not readable for the grasp: {error}"}
        result.append(replace(take, grasp_miss=miss))
    return result


def takes_to_convert(config: RecordDemosConfig, takes: list[TakeRecord]) -> list[TakeRecord]:
    """Return the takes that go into the dataset: all of them, or only the successful ones.

    Recording until N successes keeps failed takes out of the dataset (they are re-recorded,
    not demonstrations); a fixed count converts every take with its outcome. At most the
    wanted number of successes is converted (the first ones recorded).
    """
    if not config.until_successes:
        return list(takes)
    return [take for take in takes if take.outcome == "success"][: config.successes]


def take_summary(config: RecordDemosConfig, takes: list[TakeRecord]) -> dict[str, Any]:
    """Return the attempts, successes and failure reasons of a recording (manifest fields)."""
    successes = sum(1 for take in takes if take.outcome == "success")
    reasons = Counter(take.reason or take.outcome for take in takes if take.outcome != "success")
    summary: dict[str, Any] = {
        "attempts": len(takes),
        "successes": successes,
        "failure_reasons": dict(reasons),
    }
    if config.until_successes:
        summary["wanted_successes"] = config.successes
        summary["max_attempts"] = config.attempts_cap
        summary["short"] = successes < config.successes
    return summary


# --- the graph --------------------------------------------------------------------------------


@dataclass
class GraphRun:
    """How the recording graph ended.

    Attributes:
        exit_code: The supervisor's: 0 when the demonstrator finished, 1 when a node died.
        timed_out: Stopped at the wall-clock limit.
        interrupted: Stopped by SIGINT/SIGTERM.
        wall_s: Wall time of the graph.
        log_dir: Per-node logs.

    """

    exit_code: int
    timed_out: bool
    interrupted: bool
    wall_s: float
    log_dir: Path

    @property
    def ok(self) -> bool:
        """The demonstrator finished its trials."""
        return self.exit_code == 0 and not self.timed_out and not self.interrupted


def private_domain_id() -> int:
    """Return a ROS domain id for a self-contained graph, claimed for this process.

    The id is held with a lock file while this process lives
    (:func:`r2s2r_common.ros_domain.claim_domain`), so two recordings (or a recording and a
    grounding) on one host never share a domain.
    """
    return claim_domain().domain_id


def record_graph_arguments(config: RecordDemosConfig, twin_path: Path) -> dict[str, str]:
    """Return the launch arguments of the ``record_demos`` graph for a recording.

    The recording's own, then the ``launch_args`` given on top (passed on unread).

    Raises:
        RecordDemosError: A launch argument that is not ``NAME:=VALUE``.

    """
    arguments = {
        "trials": str(config.attempts_cap),
        "successes": str(config.successes),
        "seed": str(config.seed),
        "condition": config.condition,
        "out_dir": str(config.bags_path),
        "twin_config": str(twin_path),
        "real_time_factor": str(config.real_time_factor),
    }
    for token in config.launch_args:
        name, separator, value = token.partition(":=")
        if not separator or not name:
            raise RecordDemosError(f"bad launch argument '{token}': expected NAME:=VALUE")
        arguments[name] = value
    return arguments


RecordGraph = Callable[[dict[str, str], Path, float, float, TextIO | None, int], GraphRun]
"""Runs the ``record_demos`` graph until the demonstrator is done, the wall-clock limit or a
signal: ``(launch arguments, log dir, wall limit s, grace period s, console, ROS domain id) ->
GraphRun``.
The bring-up passes its supervisor (``r2s2r.pipeline.demos.run_record_graph``)."""


# --- the procedure ----------------------------------------------------------------------------


@dataclass
class RecordDemosResult:
    """What :func:`record_demos` did.

    Attributes:
        dataset: The dataset file.
        reused: The cached dataset was reused (nothing recorded).
        manifest: The manifest (written, or the cached one).
        conversion: The conversion summary (None when reused).
        graph: How the recording graph ended (None when reused).
        metadata_errors: ``(bag, message)`` for bags whose metadata could not be completed.
        exit_code: 0 when at least one episode is in the dataset, else 1.

    """

    dataset: Path
    reused: bool
    manifest: dict[str, Any]
    conversion: ConversionSummary | None = None
    graph: GraphRun | None = None
    metadata_errors: list[tuple[Path, str]] = field(default_factory=list)
    exit_code: int = EXIT_OK

    def format(self) -> str:
        """Readable summary (what was recorded, converted and skipped, and why)."""
        m = self.manifest
        identity = m["identity"]
        count = (
            f"successes={identity['successes']} max_attempts={identity['max_attempts']}"
            if "successes" in identity
            else f"episodes={identity['episodes']}"
        )
        if self.reused:
            return (
                f"record-demos: reusing {self.dataset}: {m.get('converted', '?')} episodes "
                f"({m.get('frames', '?')} frames) recorded {m.get('created', '?')} for "
                f"{count} seed={identity['seed']} condition={identity['condition']} "
                f"twin sha256 {identity['twin_config_sha256'][:12]}"
            )
        lines = []
        if self.graph is not None:
            state = "finished" if self.graph.ok else "did NOT finish"
            why = (
                " (wall-clock limit)"
                if self.graph.timed_out
                else " (interrupted)"
                if self.graph.interrupted
                else f" (exit code {self.graph.exit_code})"
                if self.graph.exit_code
                else ""
            )
            lines.append(
                f"record-demos: recording graph {state}{why} after {self.graph.wall_s:.1f} s; "
                f"{m['bags']} episode bags ({count}); logs in {self.graph.log_dir}"
            )
        outcomes = m.get("outcomes", {})
        lines.append(f"record-demos: outcomes {outcomes}; object types {m.get('object_types', {})}")
        lines.append(
            f"record-demos: {m.get('successes', 0)} successful of {m.get('attempts', 0)} takes; "
            f"failure reasons {m.get('failure_reasons', {})}"
        )
        if "successes" in identity:
            lines.append(
                f"record-demos: only successful takes converted (failed ones stay in "
                f"{BAGS_DIRNAME}/, marked failure)"
            )
        lines.extend(miss_lines(m.get("takes", [])))
        for bag, message in self.metadata_errors:
            lines.append(f"  metadata not completed for {bag}: {message}")
        if self.conversion is not None:
            lines.append(self.conversion.format())
        if self.exit_code == EXIT_NOTHING_CONVERTED:
            lines.append("record-demos: no episode converted; the dataset is empty")
        elif self.exit_code == EXIT_SHORT:
            lines.append(
                f"record-demos: SHORT: {m.get('converted', 0)} successful takes converted, "
                f"{identity['successes']} wanted (at most {identity['max_attempts']} attempts)"
            )
        return "\n".join(lines)


def _check_replaceable(config: RecordDemosConfig, manifest: dict[str, Any] | None) -> None:
    """Refuse to replace bags or a dataset that no manifest of ours accounts for.

    Raises:
        RecordDemosError: Unless ``force`` is set.

    """
    if manifest is not None or config.force:
        return
    problems = []
    if config.dataset.exists():
        problems.append(f"dataset {config.dataset} exists")
    bags = config.bags_path
    if bags.is_dir() and any(bags.iterdir()):
        problems.append(f"{bags} is not empty")
    if problems:
        raise RecordDemosError(
            f"{'; '.join(problems)} without a {MANIFEST_NAME} saying record-demos wrote them; "
            "expected an empty output folder (or pass force to replace them)"
        )


def _clear_previous(config: RecordDemosConfig, say: Any) -> None:
    bags = config.bags_path
    if bags.is_dir():
        earlier = list(bags.iterdir())
        if earlier:
            say(f"record-demos: removing {len(earlier)} earlier entries in {bags}")
        shutil.rmtree(bags)
    if config.dataset.exists():
        say(f"record-demos: replacing {config.dataset}")
        config.dataset.unlink()
    config.manifest_path.unlink(missing_ok=True)


def record_demos(
    config: RecordDemosConfig,
    run_graph: RecordGraph,
    console: TextIO | None = None,
    log_root: Path | None = None,
) -> RecordDemosResult:
    """Record ``config.episodes`` demonstrations on the twin and convert them (module docs).

    Args:
        config: What to record and where.
        run_graph: Runs the ``record_demos`` graph (the bring-up's supervisor).
        console: Where node output and progress go (stdout when None).
        log_root: Folder for the per-node logs (default ``<out_dir>/logs``).

    Returns:
        The result; ``exit_code`` 1 when nothing was converted.

    Raises:
        RecordDemosError: Existing files that no manifest of ours accounts for (without force),
            or a malformed launch argument.
        r2s2r_common.config.ConfigError: From ``run_graph``: a bad graph argument or a missing
            executable.
        FileNotFoundError: The twin configuration does not exist.

    """
    out = console or sys.stdout

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    twin_path = Path(config.twin_config).resolve() if config.twin_config else default_twin_config()
    if not twin_path.is_file():
        raise FileNotFoundError(f"twin_config = {twin_path}: file not found")
    record_graph_arguments(config, twin_path)  # a malformed launch argument records nothing
    identity = recording_identity(config, twin_path)
    manifest = read_manifest(config.manifest_path)
    if (
        manifest is not None
        and manifest.get("identity") == identity
        and manifest.get("complete")
        and Path(manifest.get("dataset", "")) == config.dataset
        and config.dataset.is_file()
    ):
        return RecordDemosResult(config.dataset, reused=True, manifest=manifest)
    _check_replaceable(config, manifest)
    if manifest is not None and manifest.get("identity") != identity:
        say(f"record-demos: earlier recording {manifest.get('identity')} differs; recording again")
    config.out_path.mkdir(parents=True, exist_ok=True)
    _clear_previous(config, say)
    config.bags_path.mkdir(parents=True)
    config.dataset.parent.mkdir(parents=True, exist_ok=True)
    # Written first, so that an interrupted run's bags are known to be ours on the next run.
    _write_json_atomic(
        config.manifest_path,
        {"identity": identity, "dataset": str(config.dataset), "complete": False},
    )

    log_dir = (
        log_root or config.out_path / "logs"
    ) / f"{GRAPH_NAME}-{time.strftime('%Y%m%d-%H%M%S')}"
    domain_id = config.domain_id if config.domain_id is not None else private_domain_id()
    how_many = (
        f"takes until {config.successes} succeed (at most {config.attempts_cap})"
        if config.until_successes
        else f"{config.episodes} takes"
    )
    say(
        f"record-demos: recording {how_many} (seed {config.seed}, {config.condition}, twin "
        f"{twin_path.name}, x{config.real_time_factor}, ROS domain {domain_id}) into "
        f"{config.bags_path}"
    )
    graph = run_graph(
        record_graph_arguments(config, twin_path),
        log_dir,
        config.wall_limit_s,
        config.grace_period_s,
        out,
        domain_id,
    )

    typestore = make_typestore()
    bags = find_episode_bags(config.bags_path) if config.bags_path.is_dir() else []
    metadata_errors: list[tuple[Path, str]] = []
    infos: list[EpisodeInfo] = []
    takes: list[TakeRecord] = []
    bag_of: dict[str, Path] = {}
    for bag in bags:
        try:
            info, trial = complete_bag(bag, typestore)
        except BagReadError as error:
            metadata_errors.append((bag, str(error)))
            continue
        infos.append(info)
        takes.append(TakeRecord(bag.name, trial.seed, info.outcome, trial.reason, info.object_type))
        bag_of[bag.name] = bag
    takes = with_grasp_misses(takes, bag_of)
    chosen = takes_to_convert(config, takes)
    conversion = convert_bags(
        [bag_of[take.bag] for take in chosen] if config.until_successes else bags,
        config.dataset,
        ConversionConfig(
            source="real", world_config_id="real", max_staleness_s=config.max_staleness_s
        ),
    )
    # A rerun may resume the episodes an interrupted conversion had written (``resumed``).
    exit_code = EXIT_OK if conversion.written else EXIT_NOTHING_CONVERTED
    summary = take_summary(config, takes)
    if config.until_successes:
        complete = graph.ok and len(conversion.converted) >= config.successes
        if conversion.converted and not complete:
            exit_code = EXIT_SHORT
    else:
        complete = graph.ok and len(bags) == config.episodes and bool(conversion.converted)
    result_manifest: dict[str, Any] = {
        "identity": identity,
        "twin_config": str(twin_path),
        "real_time_factor": config.real_time_factor,
        "domain_id": domain_id,
        "dataset": str(config.dataset),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "complete": complete,
        **summary,
        "takes": [take.as_dict() for take in takes],
        "bags": len(bags),
        "converted": len(conversion.converted),
        "frames": conversion.frames,
        "skipped": conversion.skip_counts,
        "errors": len(conversion.errors),
        "outcomes": dict(Counter(i.outcome for i in infos)),
        "object_types": dict(Counter(i.object_type for i in infos)),
        "graph_exit_code": graph.exit_code,
        "graph_wall_s": round(graph.wall_s, 2),
        "timed_out": graph.timed_out,
        "log_dir": str(graph.log_dir),
    }
    _write_json_atomic(config.manifest_path, result_manifest)
    return RecordDemosResult(
        config.dataset,
        reused=False,
        manifest=result_manifest,
        conversion=conversion,
        graph=graph,
        metadata_errors=metadata_errors,
        exit_code=exit_code,
    )


def quiet_console() -> TextIO:
    """Return a console that drops node output (the per-node logs still hold it)."""
    return open(os.devnull, "w", encoding="utf-8")
