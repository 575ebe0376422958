"""The ``--artifact`` option of the verbs that run a cell: run it grounded with that artifact."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def artifact_option(what: str) -> Callable[[Any], Any]:
    """Return the ``--artifact FILE`` option; ``what`` is the verb's work (``Record``, ...)."""
    return click.option(
        "--artifact",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=f"{what} on the cell grounded with this artifact (what `r2s2r ground` wrote): its "
        "camera_info, /tf_static and roller radius, the tracker on grounded extrinsics, as the "
        "pipeline does (docs/architecture.md section 3). Default: a cell before grounding.",
    )


def grounded_arguments(artifact: Path, export_dir: Path) -> dict[str, str]:
    """Return the grounded cell's launch arguments, or refuse a bad ``--artifact`` in one line.

    Raises:
        click.BadParameter: A missing or invalid artifact.

    """
    from r2s2r.pipeline.stages import grounded_cell_arguments

    try:
        return grounded_cell_arguments(artifact, export_dir)
    except ValueError as error:  # ArtifactError
        raise click.BadParameter(str(error), param_hint="--artifact") from None
