"""A family of twins: a documented distribution of how a real cell deviates from nominal.

Grounding must hold on cells it was not tuned on, so it is judged on a distribution of twins
rather than on two files. The distribution (``config/twin/family.yaml``, schema
:class:`TwinFamily`) gives, for every axis grounding recovers or that changes what the robot
sees and feels, a range around the nominal world and the physical reason for it. Every axis is
sampled uniformly and independently in its range, or in the outer fifth of it (where cells
that were set up in a hurry sit).

The family bounds what is *tested*, not what may run: a cell outside it is still simulated,
grounded and scored, with one warning line per parameter outside its range.

- :func:`sample_twin` draws one twin from a seed (the same seed and ``outer_fraction`` give the
  same twin);
- :func:`family_deviations` lists, one line per parameter, where a world leaves the family (the
  key, the value, its deviation, the range and its reason), without raising;
  :func:`range_positions` places every varied parameter in its range (0 = lo, 1 = hi);
- :func:`check_twin` refuses a twin outside the family (tests, and samplers that must stay
  inside); :func:`load_twin` is :func:`~r2s2r_world.world.load_world` plus that check;
- :func:`out_of_family_warnings`, :func:`load_twin_with_warnings` and
  :func:`twin_family_warnings` (the real twin's start-up check) warn instead of refusing;
- ``python -m r2s2r_sim.twin_family --seeds 0:20 [--outer-fifth] --out DIR`` writes twin YAML
  files.

The grounding pipeline never reads a twin file (the twin it talks to is a cell); it may read the
family, the design's documented tolerance, to say when a grounded value leaves it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.config import (
    ConfigError,
    parse_config,
    resolve_config_path,
)
from r2s2r_common.files import write_yaml_atomic
from r2s2r_description.transforms import wrap_angle
from r2s2r_world.world import WorldParams, load_world

from r2s2r_sim.twin_family_schema import FAMILY_PATH as FAMILY_PATH
from r2s2r_sim.twin_family_schema import FAMILY_VERSION as FAMILY_VERSION
from r2s2r_sim.twin_family_schema import OUTER_FIFTH as OUTER_FIFTH
from r2s2r_sim.twin_family_schema import AppearanceDeviation as AppearanceDeviation
from r2s2r_sim.twin_family_schema import BeltDeviation as BeltDeviation
from r2s2r_sim.twin_family_schema import CameraDeviation as CameraDeviation
from r2s2r_sim.twin_family_schema import CamerasDeviation as CamerasDeviation
from r2s2r_sim.twin_family_schema import ControllerDeviation as ControllerDeviation
from r2s2r_sim.twin_family_schema import LightingDeviation as LightingDeviation
from r2s2r_sim.twin_family_schema import ObjectsDeviation as ObjectsDeviation
from r2s2r_sim.twin_family_schema import PoseDeviation as PoseDeviation
from r2s2r_sim.twin_family_schema import Range as Range
from r2s2r_sim.twin_family_schema import TwinFamily as TwinFamily
from r2s2r_sim.twin_family_schema import _check_outer_fraction
from r2s2r_sim.twin_family_schema import load_family as load_family

# -- the axes: one list drives sampling and checking -----------------------------------------


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


def _appearance_axes(family: TwinFamily) -> list[_Axis]:
    """Return the cameras' appearance axes in their sampling order (their own random stream)."""
    axes: list[_Axis] = []
    for name in ("head", "hand"):
        look = getattr(family.cameras, name).appearance
        if look is None:
            continue
        prefix = f"cameras.{name}.appearance"
        axes += [
            _Axis(f"{prefix}.exposure_ev", "abs", look.exposure_ev, "EV"),
            _Axis(f"{prefix}.auto_exposure", "abs", look.auto_exposure, ""),
            _Axis(f"{prefix}.white_balance_rgb[0]", "rel", look.white_balance_red_rel, ""),
            _Axis(f"{prefix}.white_balance_rgb[2]", "rel", look.white_balance_blue_rel, ""),
            _Axis(f"{prefix}.crosstalk", "abs", look.crosstalk, ""),
            _Axis(f"{prefix}.gamma", "abs", look.gamma, ""),
            _Axis(f"{prefix}.black_level", "abs", look.black_level, ""),
            _Axis(f"{prefix}.vignetting", "abs", look.vignetting, ""),
            _Axis(f"{prefix}.shot_noise", "abs", look.shot_noise, ""),
            _Axis(f"{prefix}.read_noise", "abs", look.read_noise, ""),
            _Axis(f"{prefix}.motion_blur_px", "abs", look.motion_blur_px, "px"),
            _Axis(f"{prefix}.jpeg_quality", "abs", look.jpeg_quality, ""),
        ]
    return axes


APPEARANCE_STREAM = 0xA99EA7
"""Second entropy word of the appearance axes' random stream (the seed is the first)."""


def _appearance_axes_of(family: TwinFamily, twin: WorldParams) -> list[_Axis]:
    """Return the appearance axes of the cameras whose look ``twin`` sets (not the identity)."""
    kept = [
        f"cameras.{name}.appearance."
        for name in ("head", "hand")
        if not getattr(twin.cameras, name).appearance.is_identity()
    ]
    return [axis for axis in _appearance_axes(family) if axis.key.startswith(tuple(kept))]


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
        return wrap_angle(value - reference)
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
    if key.endswith("jpeg_quality"):
        return float(round(value))
    digits = 7 if "distortion" in key or key.endswith("latency_s") else 6
    return round(value, digits)


def sample_twin(
    nominal: WorldParams,
    family: TwinFamily,
    seed: int,
    outer_fraction: float = 0.0,
    appearance: bool = False,
) -> WorldParams:
    """Draw one twin: every axis of the family uniformly in its range around ``nominal``.

    Args:
        nominal: The nominal world (everything the family does not vary is copied from it).
        family: The distribution.
        seed: Random seed (``numpy.random.default_rng``); the same seed and ``outer_fraction``
            give the same twin.
        outer_fraction: 0 draws every axis in its whole range; f in (0, 0.5] draws every axis
            in the outer f of its range, at either end (:data:`OUTER_FIFTH` = 0.2: cells set up
            in a hurry). A fixed range (lo == hi) stays fixed.
        appearance: Also draw the cameras' appearance axes (:class:`AppearanceDeviation`),
            from their own random stream: every other value is the same as without.

    Returns:
        The twin world; it passes :func:`check_twin`.

    Raises:
        ValueError: ``outer_fraction`` outside [0, 0.5].
        ConfigError: The sampled world is invalid for :class:`~r2s2r_world.world.WorldParams`
            (a family whose ranges leave the world schema's).

    """
    if outer_fraction != 0.0:
        _check_outer_fraction(outer_fraction)
    rng = np.random.default_rng(int(seed))
    base = nominal.model_dump(mode="json")
    twin = nominal.model_dump(mode="json")
    for axis in _axes(family, nominal):
        _apply(axis, axis.range.sample(rng, outer_fraction), twin, base)
        _set(twin, axis.key, _round(axis.key, _get(twin, axis.key)))
    if appearance:
        look_axes = _appearance_axes(family)
        if not look_axes:
            raise ValueError("appearance: the family defines no camera appearance axes")
        look_rng = np.random.default_rng([int(seed), APPEARANCE_STREAM])
        for axis in look_axes:
            _apply(axis, axis.range.sample(look_rng, outer_fraction), twin, base)
            _set(twin, axis.key, _round(axis.key, _get(twin, axis.key)))
    source = f"twin sampled with seed {seed}"
    if outer_fraction:
        source += f" (outer_fraction {outer_fraction:g})"
    if appearance:
        source += " with camera appearance"
    world = parse_config(WorldParams, twin, source)
    check_twin(world, nominal, family, source)
    return world


def _with_nominal_axes(twin: Any, nominal: Any, axes: list[_Axis]) -> Any:
    merged = copy.deepcopy(twin)
    for axis in axes:
        # A key the twin lacks (another object set) stays a difference, reported below.
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set(merged, axis.key, _get(nominal, axis.key))
    return merged


def _differences(a: Any, b: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every leaf where ``a`` differs from ``b``: (dotted key, a's value, b's value)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            dotted = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                yield dotted, a.get(key), b.get(key)
            else:
                yield from _differences(a[key], b[key], dotted)
        return
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, f"{prefix}[{index}]")
        return
    if isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, abs_tol=1e-12):
        return
    if a != b:
        yield prefix, a, b


_WHAT = {
    "abs": "value",
    "add": "offset from nominal",
    "angle": "offset from nominal",
    "rel": "relative deviation from nominal",
    "aspect": "aspect-ratio deviation from nominal",
    "damping": "damping-ratio deviation from nominal",
}


def _axis_deviations(
    twin: WorldParams, nominal: WorldParams, family: TwinFamily
) -> Iterator[tuple[_Axis, float, float]]:
    """(axis, the twin's value, its deviation) of every varied axis the twin has."""
    twin_data = twin.model_dump(mode="json")
    nominal_data = nominal.model_dump(mode="json")
    for axis in _axes(family, nominal) + _appearance_axes_of(family, twin):
        try:
            value = _get(twin_data, axis.key)
            deviation = _deviation(axis, twin_data, nominal_data)
        except (KeyError, IndexError, TypeError):  # another object/bin set: not comparable
            continue
        yield axis, value, deviation


def family_deviations(
    twin: WorldParams,
    nominal: WorldParams,
    family: TwinFamily,
    keys: Collection[str] | None = None,
) -> list[str]:
    """Where a world leaves the twin family, one line per parameter; never raises on a finding.

    Each line names the key, the value, its deviation from nominal (in the unit the family
    gives the range in), the range and its reason, e.g. ``controller.latency_s = 0.08: value
    +0.08 s is outside the twin family's range [0, 0.05] s (command path: ...)``; a key the
    family does not vary that differs from nominal gets ``<key> = <value>: the twin family does
    not vary this key (nominal <value>)``.

    Args:
        twin: The world to place (a twin file, or a grounded world).
        nominal: The nominal world the family's ranges are around.
        family: The family.
        keys: Only these varied keys (dotted, as in the lines: ``cameras.head.fx_px``,
            ``bins.bin_1.pose.xyz_m[0]``), and no check of the keys the family does not vary;
            None: every varied key, then every other key that differs from nominal.

    Returns:
        The lines, in the family's axis order; empty when the world belongs to the family.

    """
    lines = []
    for axis, value, deviation in _axis_deviations(twin, nominal, family):
        if keys is not None and axis.key not in keys:
            continue
        if axis.range.contains(deviation):
            continue
        unit = f" {axis.unit}" if axis.unit else ""
        lines.append(
            f"{axis.key} = {value:.6g}: {_WHAT[axis.kind]} {deviation:+.6g}{unit} is outside "
            f"the twin family's range [{axis.range.lo:.6g}, {axis.range.hi:.6g}]{unit} "
            f"({axis.range.reason})"
        )
    if keys is not None:
        return lines
    twin_data = twin.model_dump(mode="json")
    nominal_data = nominal.model_dump(mode="json")
    checked = _axes(family, nominal) + _appearance_axes(family)
    merged = _with_nominal_axes(twin_data, nominal_data, checked)
    for key, value, reference in _differences(merged, nominal_data):
        lines.append(
            f"{key} = {value!r}: the twin family does not vary this key (nominal {reference!r})"
        )
    return lines


def range_positions(
    twin: WorldParams, nominal: WorldParams, family: TwinFamily
) -> dict[str, float]:
    """Where each varied parameter of ``twin`` lies in its family range: 0 = lo, 1 = hi.

    Outside the family a position is below 0 or above 1. Fixed ranges (lo == hi) are left out.
    """
    positions = {}
    for axis, _, deviation in _axis_deviations(twin, nominal, family):
        span = axis.range.hi - axis.range.lo
        if span > 0.0:
            positions[axis.key] = (deviation - axis.range.lo) / span
    return positions


def check_twin(
    twin: WorldParams, nominal: WorldParams, family: TwinFamily, source: str = "twin"
) -> None:
    """Refuse a twin outside the family (:func:`family_deviations`, as an error).

    Raises:
        ConfigError: A varied key whose deviation from nominal leaves its range (names the key,
            the value, its deviation and the range), or a key the family does not vary that
            differs from nominal; the first finding in full, and the keys of any others.

    """
    findings = family_deviations(twin, nominal, family)
    if findings:
        others = [line.split(" = ", 1)[0] for line in findings[1:]]
        more = f" (and {len(others)} more outside the family: {', '.join(others)})"
        raise ConfigError(f"{source}: {findings[0]}{more if others else ''}")


def load_twin(path: str | Path, nominal: WorldParams, family: TwinFamily) -> WorldParams:
    """Load a twin file and check that it belongs to the family.

    Raises:
        ConfigError: Invalid world file (see :func:`~r2s2r_world.world.load_world`) or a twin
            outside the family (see :func:`check_twin`).

    """
    twin = load_world(path)
    check_twin(twin, nominal, family, str(path))
    return twin


UNTESTED = "outside the twin family: the cell is used, results are untested there"
"""What an out-of-family warning adds to its finding."""


def out_of_family_warnings(
    twin: WorldParams, nominal: WorldParams, family: TwinFamily, source: str = "twin"
) -> list[str]:
    """One warning line per parameter of ``twin`` outside the family (none inside it).

    Each line is ``<source>: <finding of family_deviations>; <UNTESTED>``.
    """
    return [f"{source}: {line}; {UNTESTED}" for line in family_deviations(twin, nominal, family)]


def load_twin_with_warnings(
    path: str | Path,
    nominal: WorldParams,
    family: TwinFamily,
    warn: Callable[[str], None],
) -> WorldParams:
    """Load any twin file; warn once per parameter outside the family instead of refusing.

    What benchmarks use: the family bounds what is tested, not what may be scored.

    Args:
        path: The twin's world file.
        nominal: The nominal world.
        family: The family.
        warn: Called with each line of :func:`out_of_family_warnings`.

    Raises:
        ConfigError: An invalid world file, one line naming the file and the key (see
            :func:`~r2s2r_world.world.load_world`).

    """
    twin = load_world(path)
    for line in out_of_family_warnings(twin, nominal, family, str(path)):
        warn(line)
    return twin


def twin_family_warnings(
    twin: WorldParams, nominal: WorldParams, source: str, family_path: str | Path = FAMILY_PATH
) -> list[str]:
    """Return the warning lines of the real twin's start-up check (a twin outside the family).

    The check never stops the twin: a missing or invalid family file gives one line saying the
    check was skipped, and why.

    Args:
        twin: The twin's world.
        nominal: The nominal world.
        source: How the lines name the twin (its file name).
        family_path: The family file; relative paths resolve against ``config/``
            (:func:`~r2s2r_common.config.resolve_config_path`).

    Returns:
        One line per parameter outside the family (:func:`out_of_family_warnings`), or the one
        line of a skipped check; empty when the twin belongs to the family.

    """
    try:
        family = load_family(resolve_config_path(family_path))
    except ConfigError as error:
        return [f"{source}: twin family check skipped ({error})"]
    return out_of_family_warnings(twin, nominal, family, source)


def write_twin(twin: WorldParams, path: str | Path, header: str) -> None:
    """Write a twin YAML file with a comment header (one ``#`` line per header line)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    data = twin.model_dump(mode="json")
    for name in ("head", "hand"):
        if getattr(twin.cameras, name).appearance.is_identity():
            del data["cameras"][name]["appearance"]  # today's look: the file as it always was
    write_yaml_atomic(target, data, header=comment)


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


def twin_file_name(seed: int, outer_fraction: float = 0.0, appearance: bool = False) -> str:
    """File name of a sampled twin: ``twin_<seed>.yaml``, ``twin_outer_fifth_<seed>.yaml``, ...

    ``_appearance`` is added before ``.yaml`` when the cameras' look was drawn.
    """
    look = "_appearance" if appearance else ""
    if outer_fraction == 0.0:
        return f"twin_{seed:04d}{look}.yaml"
    if outer_fraction == OUTER_FIFTH:
        return f"twin_outer_fifth_{seed:04d}{look}.yaml"
    return f"twin_outer_{outer_fraction:g}_{seed:04d}{look}.yaml"


def write_family_twins(
    nominal_path: str | Path,
    family_path: str | Path,
    seeds: list[int],
    out: str | Path,
    outer_fraction: float = 0.0,
    appearance: bool = False,
) -> list[Path]:
    """Sample one twin per seed and write ``<out>/<twin_file_name>``; return the paths.

    With ``appearance`` the cameras' look is drawn too (files ``*_appearance.yaml``).

    The header of each file records the family, the seed, the nominal world and
    ``outer_fraction`` (what reproduces it).

    Raises:
        ConfigError: Invalid nominal or family file.
        ValueError: ``outer_fraction`` outside [0, 0.5].

    """
    nominal = load_world(nominal_path)
    family = load_family(family_path)
    if outer_fraction == 0.0:
        drawn = "every axis uniform in its range"
        option = ""
    else:
        part = "fifth" if outer_fraction == OUTER_FIFTH else f"{outer_fraction:g}"
        drawn = f"every axis in the outer {part} of its range (outer_fraction {outer_fraction:g})"
        option = " --outer-fifth" if outer_fraction == OUTER_FIFTH else ""
    paths = []
    for seed in seeds:
        path = Path(out) / twin_file_name(seed, outer_fraction, appearance)
        look = " --appearance" if appearance else ""
        header = (
            f"Twin sampled from {family_path} (seed {seed}) around {nominal_path}: {drawn}"
            f"{', camera appearance drawn' if appearance else ''}.\n"
            f"Reproduce: python -m r2s2r_sim.twin_family --seeds {seed}{option}{look} --out DIR\n"
            "Benchmarks and tests only: a twin's values are the hidden truth of a cell."
        )
        twin = sample_twin(nominal, family, seed, outer_fraction, appearance)
        write_twin(twin, path, header)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Write sampled twins: ``python -m r2s2r_sim.twin_family --seeds 0:20 --out DIR``."""
    parser = argparse.ArgumentParser(description="Write twin YAML files sampled from a family.")
    parser.add_argument("--seeds", default="0:20", help="A:B, A,B,C or one seed.")
    parser.add_argument("--out", required=True, help="Folder for the twin files.")
    parser.add_argument(
        "--outer-fifth",
        action="store_true",
        help="Draw every axis from the outer fifth of its range, at either end (cells set up "
        "in a hurry); files twin_outer_fifth_<seed>.yaml.",
    )
    parser.add_argument(
        "--appearance",
        action="store_true",
        help="Also draw the cameras' look (exposure, colour, noise, tone, MJPEG) from the "
        "family's appearance axes; every other value is the seed's as without it.",
    )
    parser.add_argument("--family", default=FAMILY_PATH, help="Family file (config/).")
    parser.add_argument("--nominal", default="world/nominal.yaml", help="Nominal world.")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
        nominal_path = resolve_config_path(args.nominal)
        family_path = resolve_config_path(args.family)
        outer_fraction = OUTER_FIFTH if args.outer_fifth else 0.0
        for path in write_family_twins(
            nominal_path, family_path, seeds, args.out, outer_fraction, args.appearance
        ):
            print(path)
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
