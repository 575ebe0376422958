"""Command-line verbs for recordings and datasets (mounted by the ``r2s2r`` CLI).

``python -m r2s2r_recorder.cli bag2dataset BAGS... -o out.hdf5``,
``... dataset-info PATH``, ``... contact-sheet PATH EPISODE out.png``,
``... inspect-bag BAG``, ``... repair-bag BAG``,
``r2s2r record-demos`` (recording on the cell) lives in :mod:`r2s2r_recorder.demos`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from r2s2r_common.config import load_config

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
@click.option("--append", is_flag=True, help="Add the episodes to an existing OUTPUT shard.")
def bag2dataset(
    bags: tuple[Path, ...], output: Path, config_path: Path | None, append: bool
) -> None:
    """Convert episode bags (or directories of them) into a dataset shard."""
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
    summary = convert_bags(bag_dirs, output, config, append_existing=append)
    if not summary.converted and not append:
        output.unlink(missing_ok=True)  # no empty shard left behind
    click.echo(summary.format())
    if summary.errors or not summary.converted:
        click.echo(
            f"r2s2r bag2dataset: error: {len(summary.converted)} of {len(bag_dirs)} bags "
            f"converted ({len(summary.skipped)} skipped {summary.skip_counts}, "
            f"{len(summary.errors)} unreadable; see above)"
            + ("" if summary.converted or append else f"; {output} not written"),
            err=True,
        )
        sys.exit(1)


@cli.command("dataset-info")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def dataset_info_cmd(path: Path) -> None:
    """Print episodes, frames, features and per-source counts."""
    click.echo(format_dataset_info(path))


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
    """Report what is readable in an episode bag (complete or not)."""
    result = inspect_bag(bag)
    click.echo(
        f"{result.bag_dir}: {'complete' if result.complete else 'INCOMPLETE'}, "
        f"{result.readable_messages} readable messages, "
        f"{result.valid_until_offset}/{result.file_size} bytes"
    )
    for topic, count in sorted(result.topic_counts.items()):
        click.echo(f"  {topic:40s} {count}")
    if result.error:
        click.echo(f"  stopped: {result.error}")


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
    a second repair of the same bag reports the first.
    """
    click.echo(repair(bag, output).format())


@click.group("dataset")
def dataset_group() -> None:
    """Inspect episode datasets (HDF5 shards)."""


dataset_group.add_command(dataset_info_cmd, "info")
dataset_group.add_command(contact_sheet_cmd, "contact-sheet")


@click.group("bag")
def bag_group() -> None:
    """Inspect and repair demonstration bags (rosbag2, MCAP)."""


bag_group.add_command(inspect_bag_cmd, "inspect")
bag_group.add_command(repair_bag_cmd, "repair")


if __name__ == "__main__":
    cli()
