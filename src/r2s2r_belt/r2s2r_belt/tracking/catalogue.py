"""The object catalogue: what each object type looks like (shape, size, colour)."""

from __future__ import annotations

import colorsys
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from r2s2r_belt.tracking.config import SHAPES, CatalogueConfig


class CatalogueError(ValueError):
    """A catalogue entry or file that cannot be used (names the entry and the expectation)."""


@dataclass(frozen=True)
class ObjectModel:
    """One object type.

    Attributes:
        name: Type name (e.g. ``cube``).
        shape: ``box``, ``cylinder`` (upright, axis along the belt normal) or ``sphere``.
        size_m: ``(x, y, z)``; cylinder ``(diameter, diameter, height)``; sphere its diameter
            three times.
        rgb: Nominal surface colour, each in ``[0, 1]``.

    """

    name: str
    shape: str
    size_m: tuple[float, float, float]
    rgb: tuple[float, float, float]

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise CatalogueError(f"object {self.name!r}: shape {self.shape!r}, expected {SHAPES}")
        if any(s <= 0.0 for s in self.size_m):
            raise CatalogueError(f"object {self.name!r}: size_m {self.size_m}, expected > 0")

    @property
    def height_m(self) -> float:
        """Height of the resting object above the belt (its top)."""
        return float(self.size_m[2])

    @property
    def hue_deg(self) -> float:
        """Hue of the nominal colour, degrees in ``[0, 360)``."""
        hue, _, _ = colorsys.rgb_to_hsv(*self.rgb)
        return 360.0 * hue

    @property
    def yaw_period_rad(self) -> float:
        """Rotational symmetry about the vertical: the yaw is defined modulo this (0: none)."""
        if self.shape != "box":
            return 0.0
        if math.isclose(self.size_m[0], self.size_m[1], rel_tol=1e-6):
            return math.pi / 2.0
        return math.pi


@dataclass(frozen=True)
class Catalogue:
    """The object types the tracker knows, by name."""

    models: tuple[ObjectModel, ...]

    def __post_init__(self) -> None:
        if not self.models:
            raise CatalogueError("catalogue: needs at least one object type")
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise CatalogueError(f"catalogue names {names}: names repeat")

    def __getitem__(self, name: str) -> ObjectModel:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(f"object type {name!r} not in the catalogue {self.names}")

    @property
    def names(self) -> list[str]:
        """Type names in catalogue order."""
        return [m.name for m in self.models]

    @staticmethod
    def from_config(config: CatalogueConfig) -> Catalogue:
        """Build from the parallel lists of :class:`CatalogueConfig`."""
        models = []
        for index, name in enumerate(config.names):
            sx, sy, sz = config.sizes_m[3 * index : 3 * index + 3]
            r, g, b = config.rgb[3 * index : 3 * index + 3]
            models.append(ObjectModel(name, config.shapes[index], (sx, sy, sz), (r, g, b)))
        return Catalogue(tuple(models))

    def to_config(self) -> CatalogueConfig:
        """Return the parallel-list form (what the node's parameters hold)."""
        return CatalogueConfig(
            names=self.names,
            shapes=[m.shape for m in self.models],
            sizes_m=[float(v) for m in self.models for v in m.size_m],
            rgb=[float(v) for m in self.models for v in m.rgb],
        )

    @staticmethod
    def from_world_objects(objects: Mapping[str, Mapping[str, Any]]) -> Catalogue:
        """Build from the ``objects`` section of a world YAML (shape, size_m, rgba per type).

        Raises:
            CatalogueError: If an entry lacks shape, size_m or rgba.

        """
        models = []
        for name, entry in objects.items():
            try:
                size = tuple(float(v) for v in entry["size_m"])
                rgba = tuple(float(v) for v in entry["rgba"])
                shape = str(entry["shape"])
            except (KeyError, TypeError, ValueError) as error:
                raise CatalogueError(
                    f"objects.{name}: needs shape, size_m (3 values) and rgba (4 values): {error}"
                ) from error
            if len(size) != 3 or len(rgba) not in (3, 4):
                raise CatalogueError(
                    f"objects.{name}: size_m {size} / rgba {rgba}: expected 3 and 4 values"
                )
            models.append(ObjectModel(str(name), shape, size, rgba[:3]))  # type: ignore[arg-type]
        return Catalogue(tuple(models))

    @staticmethod
    def from_world_yaml(path: str | Path) -> Catalogue:
        """Read the ``objects`` section of a world YAML (e.g. ``config/world/nominal.yaml``).

        Raises:
            CatalogueError: If the file has no ``objects`` mapping or an entry is incomplete.

        """
        data = yaml.safe_load(Path(path).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("objects"), dict):
            raise CatalogueError(f"{path}: no 'objects' mapping (expected a world YAML)")
        return Catalogue.from_world_objects(data["objects"])
