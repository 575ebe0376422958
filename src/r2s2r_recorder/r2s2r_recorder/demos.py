"""Demonstrations on the real twin: record N takes with the human-like demonstrator, convert.

:func:`record_demos` is the core of ``r2s2r record-demos``: it has the ``record_demos`` graph
(``config/graphs/record_demos.yaml``: real twin, cell state, belt speed, object tracker,
recorder and the demonstrator, each its own process) run by the :data:`RecordGraph` it is given
(the bring-up's supervisor, ``r2s2r.pipeline.demos``) until the demonstrator has run its trials
(one episode bag per trial), completes each bag's episode metadata from what the bag recorded,
and converts the bags with :func:`~r2s2r_recorder.bag_to_dataset.convert_bags` into one
dataset (``source = real``). What it is asked is :mod:`.demos_config`'s, the graph
:mod:`.demos_graph`'s, which takes go into the dataset :mod:`.demos_takes`'s, and completing a
bag's metadata :mod:`.bag_completion`'s.

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
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from r2s2r_common.errors import ExitCode
from r2s2r_common.files import write_json_atomic

from .bag_completion import complete_bag
from .bag_format import EpisodeInfo
from .bag_reading import BagReadError
from .bag_to_dataset import convert_bags, find_episode_bags
from .config import ConversionConfig
from .conversion_summary import ConversionSummary
from .demos_config import (
    BAGS_DIRNAME,
    MANIFEST_NAME,
    RecordDemosConfig,
    RecordDemosError,
    default_twin_config,
)
from .demos_graph import (
    GRAPH_NAME,
    GraphRun,
    RecordGraph,
    private_domain_id,
    record_graph_arguments,
)
from .demos_takes import TakeRecord, take_summary, takes_to_convert, with_grasp_misses
from .grasp_miss import miss_lines
from .msg_types import make_typestore


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
        exit_code: ``ExitCode.OK`` when at least one episode is in the dataset, else
            ``NOTHING_DONE`` (3); ``INCOMPLETE`` (4) when fewer than the wanted successful
            takes were converted within ``max_attempts``.

    """

    dataset: Path
    reused: bool
    manifest: dict[str, Any]
    conversion: ConversionSummary | None = None
    graph: GraphRun | None = None
    metadata_errors: list[tuple[Path, str]] = field(default_factory=list)
    exit_code: int = ExitCode.OK

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
        if self.exit_code == ExitCode.NOTHING_DONE:
            lines.append("record-demos: no episode converted; the dataset is empty")
        elif self.exit_code == ExitCode.INCOMPLETE:
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
        The result; ``exit_code`` ``ExitCode.NOTHING_DONE`` when nothing was converted.

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
    write_json_atomic(
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
    exit_code = ExitCode.OK if conversion.written else ExitCode.NOTHING_DONE
    summary = take_summary(config, takes)
    if config.until_successes:
        complete = graph.ok and len(conversion.converted) >= config.successes
        if conversion.converted and not complete:
            exit_code = ExitCode.INCOMPLETE
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
    write_json_atomic(config.manifest_path, result_manifest)
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
