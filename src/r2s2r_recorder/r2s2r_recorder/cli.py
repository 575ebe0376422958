"""Command-line verbs for recordings and datasets (mounted by the ``r2s2r`` CLI).

``python -m r2s2r_recorder.cli bag2dataset BAGS... -o out.hdf5``,
``... dataset-info PATH``, ``... contact-sheet PATH EPISODE out.png``,
``... inspect-bag BAG``, ``... repair-bag BAG``, ``r2s2r dataset export-lerobot IN OUT``,
``r2s2r record-demos`` (recording on the cell) lives in :mod:`r2s2r_recorder.demos`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from r2s2r_common.config import load_config
from r2s2r_common.errors import ExitCode

from r2s2r_dataset import EpisodeDataset, dataset_info

from .bag_reading import inspect_bag
from .bag_repair import repair
from .bag_to_dataset import convert_bags, find_episode_bags
from .config import ConversionConfig
from .inspection import format_dataset_info, make_contact_sheet


@click.group()
def cli() -> None:
    """Demonstration bags and datasets."""


@cli.command("bag2dataset")
@click.argument("bags", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="Shard file.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, path_type=Path),
    help="ConversionConfig YAML (plain schema).",
)
@click.option(
    "--append",
    is_flag=True,
    help="Add the episodes to an existing OUTPUT shard (refused for bags it holds already).",
)
def bag2dataset(
    bags: tuple[Path, ...], output: Path, config_path: Path | None, append: bool
) -> None:
    """Convert episode bags (or directories of them) into a dataset shard.

    OUTPUT is written as .OUTPUT.partial and renamed when done; rerunning a killed conversion
    resumes it. A bag given twice is converted once. Exits 1 when a bag cannot be read (the
    others are converted) or no episode was converted.
    """
    if output.exists() and not append:
        raise click.UsageError(
            f"--output {output}: exists already (not overwritten); pass --append to add these "
            "episodes to it, or give another --output"
        )
    config = load_config(ConversionConfig, config_path) if config_path else ConversionConfig()
    bag_dirs = [bag for root in bags for bag in find_episode_bags(root)]
    if not bag_dirs:
        raise click.UsageError(
            f"no episode bag (a folder holding an .mcap file) in {', '.join(map(str, bags))}"
        )
    summary = convert_bags(bag_dirs, output, config, append_existing=append, progress=click.echo)
    click.echo(summary.format())
    done = len(summary.converted) + len(summary.resumed)
    if summary.errors or not done:
        unreadable = ", ".join(str(bag) for bag, _ in summary.errors)
        click.echo(
            f"r2s2r bag2dataset: error: {done} of {len(bag_dirs)} bags "
            f"converted ({len(summary.skipped)} skipped {summary.skip_counts}, "
            f"{len(summary.errors)} unreadable{': ' + unreadable if unreadable else ''}; "
            "see above)" + ("" if summary.written else f"; {output} not written"),
            err=True,
        )
        sys.exit(ExitCode.FAILED)


@cli.command("dataset-info")
@click.argument("path", type=click.Path(path_type=Path))
def dataset_info_cmd(path: Path) -> None:
    """Print episodes, frames, features and per-source counts.

    Exits 1 when the dataset is incomplete (a leftover partial file of an interrupted write,
    episodes that disagree with the file's manifest), after the INCOMPLETE lines.
    """
    info = dataset_info(path)
    click.echo(format_dataset_info(info))
    if info.problems:
        click.echo(
            f"r2s2r dataset info: error: {path} is incomplete: {info.problems[0]}"
            + (
                f" (and {len(info.problems) - 1} more, see above)" if len(info.problems) > 1 else ""
            ),
            err=True,
        )
        sys.exit(ExitCode.FAILED)


@cli.command("contact-sheet")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.argument("episode", type=int)
@click.argument("out_png", type=click.Path(path_type=Path))
def contact_sheet_cmd(path: Path, episode: int, out_png: Path) -> None:
    """Write a contact sheet PNG (frames and joint plots) of one episode."""
    click.echo(str(make_contact_sheet(path, episode, out_png)))


@cli.command("inspect-bag")
@click.argument("bag", type=click.Path(exists=True, path_type=Path))
def inspect_bag_cmd(bag: Path) -> None:
    """Report what is readable in an episode bag and check its CRCs.

    Exit 0: complete and every stored CRC matches; 1: damaged (a CRC fails, or a closed bag's
    file is cut or malformed; each damaged record is listed with its offset) or unfinished
    (the recorder stopped before closing it); `r2s2r bag repair` keeps the intact part.
    """
    result = inspect_bag(bag)
    state = result.state
    click.echo(
        f"{result.bag_dir}: {state}, "
        f"{result.readable_messages} readable messages, "
        f"{result.valid_until_offset}/{result.file_size} bytes"
    )
    click.echo(f"  checksums: {result.checksums}")
    for topic, count in sorted(result.topic_counts.items()):
        click.echo(f"  {topic:40s} {count}")
    for damage in result.damage:
        click.echo(f"  damaged: {damage}")
    if result.error:
        click.echo(f"  stopped: {result.error}")
    if state != "complete":
        where = result.damage[0] if result.damage else (result.error or "no footer")
        what = (
            "damaged bag"
            if state == "DAMAGED"
            else "unfinished bag (recorder stopped before closing it)"
        )
        click.echo(
            f"r2s2r bag inspect: error: {result.bag_dir}: {what}: {where}; "
            f"`r2s2r bag repair {result.bag_dir}` keeps the intact part",
            err=True,
        )
        sys.exit(ExitCode.FAILED)


@cli.command("repair-bag")
@click.argument("bag", type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repaired bag directory (default: BAG.recovered).",
)
def repair_bag_cmd(bag: Path, output: Path | None) -> None:
    """Rewrite the readable part of an unfinished or damaged bag as a finalised bag.

    The repaired bag's outcome is that of the last /trial/outcome message that survived, else
    'unknown' (bag2dataset then skips it, reason lost_outcome). A complete bag is left alone;
    a second repair of the same bag reports the first. A damaged chunk (its CRC fails) is never
    copied: the copy keeps the intact part before the first one and says how many chunks it
    dropped; damage outside the chunks (index, summary) loses no message.
    """
    click.echo(repair(bag, output).format())


@cli.command("export-lerobot")
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--codec",
    type=click.Choice(["av1", "h264"]),
    default="av1",
    show_default=True,
    help="Video codec (AV1: SVT-AV1, LeRobot's default).",
)
@click.option(
    "--lossless",
    is_flag=True,
    help="H.264 in RGB at qp 0: frames decode bit for bit (larger files; overrides --codec).",
)
@click.option(
    "--crf", type=int, default=None, help="Constant rate factor (default 30 av1, 23 h264)."
)
@click.option(
    "--sim-ratio",
    type=float,
    default=None,
    help="Co-training sim_ratio to spell out as per-frame weights in the export's README.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def export_lerobot_cmd(
    source: Path,
    out: Path,
    codec: str,
    lossless: bool,
    crf: int | None,
    sim_ratio: float | None,
    no_progress: bool,
) -> None:
    """Export an episode dataset (SOURCE: .hdf5 or a folder of shards) as LeRobot v3.0 in OUT.

    OUT must be new or empty; it is written as .OUT.partial beside it and renamed when
    complete, so an interrupted export leaves nothing at OUT.
    """
    from r2s2r_common.console import progress_reporter
    from r2s2r_dataset.lerobot_config import LeRobotExportConfig
    from r2s2r_dataset.lerobot_export import check_output, export_lerobot

    config = LeRobotExportConfig(
        codec=codec,  # type: ignore[arg-type]
        lossless=lossless,
        crf=crf,
        sim_ratio=sim_ratio,
    )
    check_output(out)
    with EpisodeDataset(source) as dataset:
        episodes = len(dataset)
    bar = progress_reporter("export-lerobot", episodes, enabled=not no_progress, unit="episode")
    try:
        summary = export_lerobot(
            source, out, config, on_episode=lambda done, _total: bar.update(done)
        )
    finally:
        bar.close()
    click.echo(summary.format())


@click.group("dataset")
def dataset_group() -> None:
    """Inspect and export episode datasets (HDF5 shards)."""


dataset_group.add_command(dataset_info_cmd, "info")
dataset_group.add_command(contact_sheet_cmd, "contact-sheet")
dataset_group.add_command(export_lerobot_cmd, "export-lerobot")


@click.group("bag")
def bag_group() -> None:
    """Inspect and repair demonstration bags (rosbag2, MCAP)."""


bag_group.add_command(inspect_bag_cmd, "inspect")
bag_group.add_command(repair_bag_cmd, "repair")


if __name__ == "__main__":
    cli()
