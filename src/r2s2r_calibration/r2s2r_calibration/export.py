"""Export a grounding artifact as the files a cell's drivers and nodes take.

A real cell applies calibration through standard interfaces: each camera driver publishes
``camera_info`` from a ROS camera_calibration YAML it is given, the description publisher puts
the grounded mounts on ``/tf_static`` and the belt-speed node gets its roller radius as a
parameter. This module writes, from an artifact (fully validated by
:func:`~r2s2r_calibration.artifact.load_artifact`):

- ``<out>/head_camera.yaml``, ``<out>/hand_camera.yaml``: camera_calibration files, for each
  camera whose intrinsics were grounded (``head_camera_info_file``/``hand_camera_info_file``
  of the real twin, ``calibration_file`` of ``camera_driver``);
- ``<out>/belt_speed.yaml``: a ``belt_speed`` parameter file with the grounded roller radius,
  when the artifact has a belt model (for deployments that pass parameter files rather than
  ``grounding_artifact``).

The conversion itself is :mod:`r2s2r_world.grounding` (the nodes read the artifact's
``world_overrides`` through it without importing this package), so the files and the nodes
agree by construction.

Run: ``python -m r2s2r_calibration.export ARTIFACT --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

import click
from r2s2r_common.camera_info import save_camera_calibration
from r2s2r_common.config import ConfigError, dump_yaml
from r2s2r_world.grounding import (
    CAMERA_KEYS,
    camera_calibration_of,
    grounded_intrinsics,
    grounded_roller_radius_m,
)

from r2s2r_calibration.artifact import load_artifact
from r2s2r_calibration.errors import ArtifactError


def export_artifact(artifact_path: str | Path, out_dir: str | Path) -> dict[str, Path]:
    """Write the camera_calibration and belt parameter files of an artifact.

    Args:
        artifact_path: The grounding artifact YAML.
        out_dir: Folder to write into (created if missing).

    Returns:
        What was written: ``head_camera``/``hand_camera``/``belt_speed`` -> file path.

    Raises:
        ArtifactError: Missing or invalid artifact, or one that grounded nothing these files
            carry (no camera intrinsics and no belt model).

    """
    artifact = load_artifact(artifact_path)
    overrides = artifact.world_overrides
    out = Path(out_dir)
    source = str(artifact_path)
    written: dict[str, Path] = {}
    try:
        for camera_name in CAMERA_KEYS:
            intrinsics = grounded_intrinsics(overrides, camera_name, source)
            if intrinsics is None:
                continue
            path = out / f"{camera_name}.yaml"
            save_camera_calibration(camera_calibration_of(intrinsics, camera_name), path)
            written[camera_name] = path
        radius_m = grounded_roller_radius_m(overrides, source)
    except ConfigError as error:
        raise ArtifactError(str(error)) from None
    if radius_m is not None:
        path = out / "belt_speed.yaml"
        dump_yaml(
            {"belt_speed": {"ros__parameters": {"encoder": {"roller_radius_m": radius_m}}}}, path
        )
        written["belt_speed"] = path
    if not written:
        raise ArtifactError(
            f"{artifact_path}: no camera intrinsics and no belt model to export; ground the "
            "cameras (intrinsics) or the belt first"
        )
    return written


@click.command("export")
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for head_camera.yaml, hand_camera.yaml and belt_speed.yaml.",
)
def export_command(artifact: Path, out_dir: Path) -> None:
    """Write camera_calibration files (and belt_speed parameters) of a grounding ARTIFACT."""
    try:
        written = export_artifact(artifact, out_dir)
    except ArtifactError as error:
        raise click.ClickException(str(error)) from None
    for name, path in written.items():
        click.echo(f"{name}: {path}")


if __name__ == "__main__":
    export_command()
