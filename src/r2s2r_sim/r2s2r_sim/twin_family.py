"""A family of twins: a documented distribution of how a real cell deviates from nominal.

Grounding must hold on cells it was not tuned on, so it is judged on a distribution of twins
rather than on two files. The distribution (``config/twin/family.yaml``, schema
:class:`TwinFamily`) gives, for every axis grounding recovers or that changes what the robot
sees and feels, a range around the nominal world and the physical reason for it. Every axis is
sampled uniformly and independently in its range.

- :func:`sample_twin` draws one twin from a seed (the same seed gives the same twin);
- :func:`check_twin` refuses a twin outside the family, naming the key, the value and the range
  (and any key the family does not vary that differs from nominal);
- :func:`load_twin` is :func:`~r2s2r_world.world.load_world` plus that check;
- ``python -m r2s2r_sim.twin_family --seeds 0:20 --out DIR`` writes twin YAML files.

Used by benchmarks and tests only: the grounding pipeline never reads a twin file (the twin it
talks to is a cell).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import Field, model_validator
from r2s2r_common.config import (
    ConfigError,
    ConfigModel,
    load_config,
    parse_config,
    resolve_config_path,
)
from r2s2r_world.world import WorldParams, load_world

FAMILY_VERSION = 1


class Range(ConfigModel):
    """A closed range ``lo..hi`` of one deviation, with why a real cell spans it."""

    lo: float = Field(description="Lowest value (unit of the axis).")
    hi: float = Field(description="Highest value.")
    reason: str = Field(min_length=10, description="The physical reason for this range.")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)) or self.lo > self.hi:
            raise ValueError(f"expected finite lo <= hi, got lo = {self.lo}, hi = {self.hi}")
        return self

    def sample(self, rng: np.random.Generator) -> float:
        """One uniform draw in the range (one draw from ``rng`` even when lo == hi)."""
        return float(self.lo + (self.hi - self.lo) * rng.random())

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the range (with a rounding tolerance)."""
        tolerance = 1e-9 + 1e-6 * max(abs(self.lo), abs(self.hi))
        return self.lo - tolerance <= value <= self.hi + tolerance


def _fixed(reason: str) -> Range:
    return Range(lo=0.0, hi=0.0, reason=reason)


class PoseDeviation(ConfigModel):
    """Deviation of a mounted frame from its nominal pose (added to xyz and to rpy)."""

    xy_m: Range = Field(description="Added to x and to y (m), each drawn independently.")
    z_m: Range = Field(description="Added to z (m).")
    roll_pitch_rad: Range = Field(description="Added to roll and to pitch (rad), independently.")
    yaw_rad: Range = Field(description="Added to yaw (rad).")


class CameraDeviation(ConfigModel):
    """Deviation of one camera from its datasheet values and its nominal mount."""

    focal_rel: Range = Field(description="fx / nominal fx - 1.")
    aspect_rel: Range = Field(description="(fy / fx) / (nominal fy / fx) - 1.")
    principal_point_px: Range = Field(description="Added to cx and to cy (px), independently.")
    k1: Range = Field(description="Radial distortion k1 (absolute value; nominal is 0).")
    k2: Range = Field(description="Radial distortion k2 (absolute value).")
    tangential: Range = Field(description="Tangential p1 and p2 (absolute), independently.")
    blur_sigma_px: Range = Field(description="Gaussian blur sigma (absolute value, px).")
    mount: PoseDeviation = Field(description="Camera link pose in its parent frame.")


class CamerasDeviation(ConfigModel):
    """Both cameras."""

    head: CameraDeviation
    hand: CameraDeviation


class ControllerDeviation(ConfigModel):
    """Per-joint servo and command path."""

    kp_rel: Range = Field(description="kp / nominal kp - 1, per joint.")
    damping_ratio_rel: Range = Field(
        description="Damping ratio / nominal damping ratio - 1, per joint: (kd / kd_nominal) / "
        "sqrt(kp / kp_nominal) - 1 (a joint's inertia is the nominal one)."
    )
    latency_s: Range = Field(description="Command latency (absolute value, s; continuous).")


class BeltDeviation(ConfigModel):
    """The conveyor."""

    mount: PoseDeviation = Field(description="belt_link pose in world.")
    speed_rel: Range = Field(description="speed_mps / nominal - 1.")
    roller_radius_rel: Range = Field(description="roller_radius_m / nominal - 1.")


class ObjectsDeviation(ConfigModel):
    """Every object type (each drawn independently)."""

    mass_rel: Range = Field(description="mass_kg / nominal - 1.")
    friction_rel: Range = Field(description="friction / nominal - 1.")


class LightingDeviation(ConfigModel):
    """The cell's light."""

    diffuse: Range = Field(description="Directional intensity (absolute value).")
    ambient: Range = Field(description="Ambient intensity (absolute value).")
    direction_xy: Range = Field(
        description="Added to the direction's x and y (the direction is not normalised; its z "
        "stays nominal), independently."
    )


class TwinFamily(ConfigModel):
    """The distribution of twins (see the module docstring)."""

    schema_version: Literal[1] = Field(1, description="Schema version of this file.")
    cameras: CamerasDeviation
    base: PoseDeviation = Field(description="base_link in world.")
    controller: ControllerDeviation
    belt: BeltDeviation
    bins: PoseDeviation = Field(description="Each bin's pose in world, drawn independently.")
    objects: ObjectsDeviation
    lighting: LightingDeviation


def load_family(path: str | Path) -> TwinFamily:
    """Load and validate a twin family file.

    Raises:
        ConfigError: Missing file, bad YAML, unknown key, a range with lo > hi or no reason.

    """
    return load_config(TwinFamily, path)


# -- the axes: one list drives sampling and checking -----------------------------------------


def _wrap_rad(angle: float) -> float:
    return float((angle + math.pi) % (2.0 * math.pi) - math.pi)


class _Axis:
    """One scalar of the twin: where it is, how its deviation is measured, and its range.

    ``kind`` is ``abs`` (value), ``add`` (value - nominal), ``rel`` (value / nominal - 1),
    ``angle`` (wrapped value - nominal) or a derived kind handled by :func:`_deviation`.
    """

    def __init__(self, key: str, kind: str, rng_range: Range, unit: str) -> None:
        self.key = key
        self.kind = kind
        self.range = rng_range
        self.unit = unit


def _pose_axes(prefix: str, deviation: PoseDeviation) -> Iterator[_Axis]:
    yield _Axis(f"{prefix}.xyz_m[0]", "add", deviation.xy_m, "m")
    yield _Axis(f"{prefix}.xyz_m[1]", "add", deviation.xy_m, "m")
    yield _Axis(f"{prefix}.xyz_m[2]", "add", deviation.z_m, "m")
    yield _Axis(f"{prefix}.rpy_rad[0]", "angle", deviation.roll_pitch_rad, "rad")
    yield _Axis(f"{prefix}.rpy_rad[1]", "angle", deviation.roll_pitch_rad, "rad")
    yield _Axis(f"{prefix}.rpy_rad[2]", "angle", deviation.yaw_rad, "rad")


def _axes(family: TwinFamily, nominal: WorldParams) -> list[_Axis]:
    """Every varied scalar, in sampling order (changing this order changes every seed's twin)."""
    axes: list[_Axis] = []
    for name in ("head", "hand"):
        cam: CameraDeviation = getattr(family.cameras, name)
        prefix = f"cameras.{name}"
        axes += [
            _Axis(f"{prefix}.fx_px", "rel", cam.focal_rel, ""),
            _Axis(f"{prefix}.fy_px", "aspect", cam.aspect_rel, ""),
            _Axis(f"{prefix}.cx_px", "add", cam.principal_point_px, "px"),
            _Axis(f"{prefix}.cy_px", "add", cam.principal_point_px, "px"),
            _Axis(f"{prefix}.distortion.k1", "abs", cam.k1, ""),
            _Axis(f"{prefix}.distortion.k2", "abs", cam.k2, ""),
            _Axis(f"{prefix}.distortion.p1", "abs", cam.tangential, ""),
            _Axis(f"{prefix}.distortion.p2", "abs", cam.tangential, ""),
            _Axis(f"{prefix}.blur_sigma_px", "abs", cam.blur_sigma_px, "px"),
        ]
        axes += list(_pose_axes(f"{prefix}.pose", cam.mount))
    axes += list(_pose_axes("robot.base_pose", family.base))
    for joint in nominal.controller.gains:
        axes.append(_Axis(f"controller.gains.{joint}.kp", "rel", family.controller.kp_rel, ""))
        axes.append(
            _Axis(
                f"controller.gains.{joint}.kd", "damping", family.controller.damping_ratio_rel, ""
            )
        )
    axes.append(_Axis("controller.latency_s", "abs", family.controller.latency_s, "s"))
    axes += list(_pose_axes("belt.pose", family.belt.mount))
    axes.append(_Axis("belt.speed_mps", "rel", family.belt.speed_rel, ""))
    axes.append(_Axis("belt.roller_radius_m", "rel", family.belt.roller_radius_rel, ""))
    for name in nominal.bins:
        axes += list(_pose_axes(f"bins.{name}.pose", family.bins))
    for name in nominal.objects:
        axes.append(_Axis(f"objects.{name}.mass_kg", "rel", family.objects.mass_rel, ""))
        axes.append(_Axis(f"objects.{name}.friction", "rel", family.objects.friction_rel, ""))
    axes += [
        _Axis("lighting.diffuse", "abs", family.lighting.diffuse, ""),
        _Axis("lighting.ambient", "abs", family.lighting.ambient, ""),
        _Axis("lighting.direction[0]", "add", family.lighting.direction_xy, ""),
        _Axis("lighting.direction[1]", "add", family.lighting.direction_xy, ""),
    ]
    return axes


def _parts(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in key.split("."):
        if part.endswith("]"):
            name, index = part[:-1].split("[")
            parts += [name, int(index)]
        else:
            parts.append(part)
    return parts


def _get(data: Any, key: str) -> float:
    for part in _parts(key):
        data = data[part]
    return float(data)


def _set(data: Any, key: str, value: float) -> None:
    parts = _parts(key)
    for part in parts[:-1]:
        data = data[part]
    data[parts[-1]] = value


def _sibling(key: str, leaf: str) -> str:
    return key.rsplit(".", 1)[0] + "." + leaf


def _deviation(axis: _Axis, twin: Any, nominal: Any) -> float:
    """Return the axis's deviation of ``twin`` from ``nominal`` (plain dumps), in its unit."""
    value, reference = _get(twin, axis.key), _get(nominal, axis.key)
    if axis.kind == "abs":
        return value
    if axis.kind == "add":
        return value - reference
    if axis.kind == "angle":
        return _wrap_rad(value - reference)
    if axis.kind == "rel":
        return value / reference - 1.0
    if axis.kind == "aspect":
        fx_key = _sibling(axis.key, "fx_px")
        return (value / _get(twin, fx_key)) / (reference / _get(nominal, fx_key)) - 1.0
    if axis.kind == "damping":
        kp_key = _sibling(axis.key, "kp")
        kp_ratio = _get(twin, kp_key) / _get(nominal, kp_key)
        return (value / reference) / math.sqrt(kp_ratio) - 1.0
    raise ValueError(f"unknown axis kind {axis.kind!r}")


def _apply(axis: _Axis, deviation: float, twin: Any, nominal: Any) -> None:
    """Write the value of ``twin`` at the axis that has ``deviation`` (inverse of _deviation)."""
    reference = _get(nominal, axis.key)
    if axis.kind == "abs":
        value = deviation
    elif axis.kind in ("add", "angle"):
        value = reference + deviation
    elif axis.kind == "rel":
        value = reference * (1.0 + deviation)
    elif axis.kind == "aspect":
        fx_key = _sibling(axis.key, "fx_px")
        value = _get(twin, fx_key) * (reference / _get(nominal, fx_key)) * (1.0 + deviation)
    elif axis.kind == "damping":
        kp_key = _sibling(axis.key, "kp")
        kp_ratio = _get(twin, kp_key) / _get(nominal, kp_key)
        value = reference * math.sqrt(kp_ratio) * (1.0 + deviation)
    else:
        raise ValueError(f"unknown axis kind {axis.kind!r}")
    _set(twin, axis.key, value)


def _round(key: str, value: float) -> float:
    """Round a sampled value to what a twin file needs (stable YAML, no float noise)."""
    digits = 7 if "distortion" in key or key.endswith("latency_s") else 6
    return round(value, digits)


def sample_twin(nominal: WorldParams, family: TwinFamily, seed: int) -> WorldParams:
    """Draw one twin: every axis of the family uniformly in its range around ``nominal``.

    Args:
        nominal: The nominal world (everything the family does not vary is copied from it).
        family: The distribution.
        seed: Random seed (``numpy.random.default_rng``); the same seed gives the same twin.

    Returns:
        The twin world; it passes :func:`check_twin`.

    Raises:
        ConfigError: The sampled world is invalid for :class:`~r2s2r_world.world.WorldParams`
            (a family whose ranges leave the world schema's).

    """
    rng = np.random.default_rng(int(seed))
    base = nominal.model_dump(mode="json")
    twin = nominal.model_dump(mode="json")
    for axis in _axes(family, nominal):
        _apply(axis, axis.range.sample(rng), twin, base)
        _set(twin, axis.key, _round(axis.key, _get(twin, axis.key)))
    world = parse_config(WorldParams, twin, f"twin sampled with seed {seed}")
    check_twin(world, nominal, family, f"twin sampled with seed {seed}")
    return world


def _with_nominal_axes(twin: Any, nominal: Any, axes: list[_Axis]) -> Any:
    merged = copy.deepcopy(twin)
    for axis in axes:
        _set(merged, axis.key, _get(nominal, axis.key))
    return merged


def _first_difference(a: Any, b: Any, prefix: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            dotted = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                return dotted, a.get(key), b.get(key)
            found = _first_difference(a[key], b[key], dotted)
            if found:
                return found
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{prefix}[{index}]")
            if found:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, abs_tol=1e-12):
        return None
    return None if a == b else (prefix, a, b)


def check_twin(
    twin: WorldParams, nominal: WorldParams, family: TwinFamily, source: str = "twin"
) -> None:
    """Refuse a twin outside the family.

    Raises:
        ConfigError: A varied key whose deviation from nominal leaves its range (names the key,
            the value, its deviation and the range), or a key the family does not vary that
            differs from nominal.

    """
    twin_data = twin.model_dump(mode="json")
    nominal_data = nominal.model_dump(mode="json")
    axes = _axes(family, nominal)
    for axis in axes:
        deviation = _deviation(axis, twin_data, nominal_data)
        if not axis.range.contains(deviation):
            value = _get(twin_data, axis.key)
            what = {
                "abs": "value",
                "add": "offset from nominal",
                "angle": "offset from nominal",
                "rel": "relative deviation from nominal",
                "aspect": "aspect-ratio deviation from nominal",
                "damping": "damping-ratio deviation from nominal",
            }[axis.kind]
            unit = f" {axis.unit}" if axis.unit else ""
            raise ConfigError(
                f"{source}: {axis.key} = {value:.6g}: {what} {deviation:+.6g}{unit} is outside "
                f"the twin family's range [{axis.range.lo:.6g}, {axis.range.hi:.6g}]{unit} "
                f"({axis.range.reason})"
            )
    rest = _first_difference(_with_nominal_axes(twin_data, nominal_data, axes), nominal_data)
    if rest is not None:
        key, value, reference = rest
        raise ConfigError(
            f"{source}: {key} = {value!r}: the twin family does not vary this key, so it must "
            f"equal the nominal world's ({reference!r})"
        )


def load_twin(path: str | Path, nominal: WorldParams, family: TwinFamily) -> WorldParams:
    """Load a twin file and check that it belongs to the family.

    Raises:
        ConfigError: Invalid world file (see :func:`~r2s2r_world.world.load_world`) or a twin
            outside the family (see :func:`check_twin`).

    """
    twin = load_world(path)
    check_twin(twin, nominal, family, str(path))
    return twin


def write_twin(twin: WorldParams, path: str | Path, header: str) -> None:
    """Write a twin YAML file with a comment header (one ``#`` line per header line)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    body = yaml.safe_dump(twin.model_dump(mode="json"), sort_keys=False)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(comment + body, encoding="utf-8")
    tmp.replace(target)


def parse_seeds(text: str) -> list[int]:
    """Parse ``A:B`` (A..B-1), ``A,B,C`` or a single seed.

    Raises:
        ValueError: Malformed text, a negative seed or an empty range.

    """
    try:
        if ":" in text:
            first, last = (int(part) for part in text.split(":", 1))
            seeds = list(range(first, last))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"seeds {text!r}: expected A:B, A,B,C or one integer") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds {text!r}: expected at least one seed, all >= 0")
    return seeds


def write_family_twins(
    nominal_path: str | Path, family_path: str | Path, seeds: list[int], out: str | Path
) -> list[Path]:
    """Sample one twin per seed and write ``<out>/twin_<seed>.yaml``; return the paths."""
    nominal = load_world(nominal_path)
    family = load_family(family_path)
    paths = []
    for seed in seeds:
        path = Path(out) / f"twin_{seed:04d}.yaml"
        header = (
            f"Twin sampled from {family_path} (seed {seed}) around {nominal_path}.\n"
            "Benchmarks and tests only: a twin's values are the hidden truth of a cell."
        )
        write_twin(sample_twin(nominal, family, seed), path, header)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Write sampled twins: ``python -m r2s2r_sim.twin_family --seeds 0:20 --out DIR``."""
    parser = argparse.ArgumentParser(description="Write twin YAML files sampled from a family.")
    parser.add_argument("--seeds", default="0:20", help="A:B, A,B,C or one seed.")
    parser.add_argument("--out", required=True, help="Folder for twin_<seed>.yaml.")
    parser.add_argument("--family", default="twin/family.yaml", help="Family file (config/).")
    parser.add_argument("--nominal", default="world/nominal.yaml", help="Nominal world.")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
        nominal_path = resolve_config_path(args.nominal)
        family_path = resolve_config_path(args.family)
        for path in write_family_twins(nominal_path, family_path, seeds, args.out):
            print(path)
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
