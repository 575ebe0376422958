"""Grounded values against the twin family: a cell outside it is used, and said to be untested.

The twin family (:data:`r2s2r_sim.twin_family.FAMILY_PATH` under ``config/``, schema
:class:`~r2s2r_sim.twin_family.TwinFamily`) is the design's documented tolerance: how far a
real cell of this design deviates from the nominal world. It is not a twin file, and it bounds
what is *tested*, not what may run: grounding never clips a value to it. When a grounded value
lies outside its range around nominal, the grounding report says so, one line per parameter,
e.g. ``grounded controller.latency_s = 0.08: value +0.08 s is outside the twin family's range
[0, 0.05] s (...); outside the twin family: the cell is used, results are untested there``.

Only what the artifact grounded is placed: a quantity it did not recover keeps its nominal
value, which says nothing about the cell.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from r2s2r_common.config import ConfigError, resolve_config_path
from r2s2r_sim.twin_family import (
    FAMILY_PATH,
    UNTESTED,
    TwinFamily,
    family_deviations,
    load_family,
)
from r2s2r_world.world import WorldParams, apply_grounding


def _dotted_keys(data: Any, prefix: str = "") -> Iterator[str]:
    """Every leaf of nested mappings and lists, dotted as in the family's keys (``a.b[0]``)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield from _dotted_keys(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            yield from _dotted_keys(value, f"{prefix}[{index}]")
    else:
        yield prefix


def grounded_outside_family(
    overrides: Mapping[str, Any], nominal: WorldParams, family: TwinFamily
) -> list[str]:
    """One warning line per grounded value outside the twin family's range around nominal.

    Args:
        overrides: The artifact's ``world_overrides`` (nested, mirroring ``WorldParams``).
        nominal: The nominal world the family's ranges are around.
        family: The twin family.

    Returns:
        ``grounded <finding>; <UNTESTED>`` per grounded parameter outside its range (the
        finding names the key, the value, its deviation, the range and its reason); empty when
        every grounded value lies inside the family.

    Raises:
        ConfigError: Overrides that make an invalid world (see
            :func:`~r2s2r_world.world.apply_grounding`).

    """
    grounded = apply_grounding(nominal, overrides)
    keys = set(_dotted_keys(overrides))
    return [
        f"grounded {line}; {UNTESTED}"
        for line in family_deviations(grounded, nominal, family, keys=keys)
    ]


def grounding_family_warnings(
    overrides: Mapping[str, Any],
    nominal: WorldParams,
    family_path: str | Path = FAMILY_PATH,
) -> list[str]:
    """:func:`grounded_outside_family` with the family read from ``family_path``.

    Never stops grounding: a missing or invalid family file (or overrides that make no valid
    world) give one line saying the check was skipped, and why.

    Args:
        overrides: The artifact's ``world_overrides``.
        nominal: The nominal world.
        family_path: The family file; relative paths resolve against ``config/``.

    """
    try:
        family = load_family(resolve_config_path(family_path))
        return grounded_outside_family(overrides, nominal, family)
    except ConfigError as error:
        return [f"twin family check of the grounded values skipped ({error})"]
