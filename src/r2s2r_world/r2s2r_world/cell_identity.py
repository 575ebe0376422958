"""Which cell a grounding artifact belongs to, and whether the running cell is that cell.

An artifact grounds *one* cell: used on another, its camera extrinsics, belt and bin poses are
wrong by as much as the two cells differ, and nothing downstream notices (a tracker reports
objects where they are not; demos are recorded against the wrong frames). So world grounding
records the cell's identity in the artifact (:class:`CellIdentity`, section ``cell``):

- ``name``: what the lab calls the cell (``r2s2r ground --cell-name``); a running graph given a
  ``cell_name`` compares it (:func:`name_mismatch`);
- ``static_depth_mm``: the head camera's depth of the static scene as grounding observed it
  (the scene step's depth image, belt empty, arm at home), reduced to a grid of per-cell
  medians (:func:`static_depth_grid`). Any reader with the head depth stream observes it again
  and compares (:func:`compare_static_depth`): the same cell gives the same grid (measured on
  the twins: 0 mm; a grounded world rendered against its own cell 2.5–4 mm median), another
  cell of the family differs by 13–150 mm median with 30–99 % of the grid over 20 mm.

A grid of medians is robust to what changes between observations of one cell: depth noise
(averaged within a grid cell) and a few grid cells covered by an object or the arm (the median
over the grid, and a bounded fraction of far cells, :class:`StaticSceneLimits`).

ROS-free; depth images are (H, W) float32 metres, 0 or non-finite where the sensor has no
return.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigModel
from r2s2r_description.cameras import HEAD

STATIC_DEPTH_GRID: tuple[int, int] = (16, 16)
"""Rows and columns of the static-scene depth grid."""

MAX_DEPTH_M = 3.5
"""Depth beyond this is no return (the twin's far plane is 4 m; a structured-light sensor's
range is about 3 m)."""

MIN_VALID_PIXELS = 0.25
"""A grid cell needs this fraction of its pixels with a return to have a median."""


class StaticSceneLimits(ConfigModel):
    """When two static-scene grids are the same cell."""

    median_mm: float = Field(
        10.0,
        gt=0.0,
        description="Largest median |difference| over the grid (mm). Same cell: 0 mm (one "
        "sensor), 2.5-4 mm (a grounded world rendered against its cell); the nearest other "
        "cell of the family measured 13 mm.",
    )
    far_cell_mm: float = Field(
        20.0, gt=0.0, description="A grid cell differing by more than this is 'far' (mm)."
    )
    max_far_fraction: float = Field(
        0.25,
        gt=0.0,
        le=1.0,
        description="Largest fraction of far grid cells (objects or the arm may cover some): "
        "same cell 0-0.06 measured, other cells 0.30-0.99.",
    )
    min_compared_fraction: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="Fewest grid cells with depth in both grids, as a fraction of the grid, "
        "for a verdict (fewer: nothing to compare).",
    )


class CellIdentity(ConfigModel):
    """The ``cell`` section of a grounding artifact: which cell it grounds."""

    name: str | None = Field(
        None, description="The lab's name for the cell (`r2s2r ground --cell-name`)."
    )
    camera: str = Field(HEAD.name, description="Camera whose depth the grid is of.")
    static_depth_mm: list[list[float | None]] | None = Field(
        None,
        description="Per-cell median depth of the static scene (mm; null: no return), "
        f"{STATIC_DEPTH_GRID[0]}x{STATIC_DEPTH_GRID[1]}; None when grounding saw no depth.",
    )
    observed_stamp_s: float | None = Field(None, description="Stamp of that depth image (s).")

    @field_validator("name")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("expected a non-empty cell name, or none")
        return value

    @model_validator(mode="after")
    def _rectangular(self) -> CellIdentity:
        grid = self.static_depth_mm
        if grid is not None:
            widths = {len(row) for row in grid}
            if not grid or len(widths) != 1 or 0 in widths:
                raise ValueError("static_depth_mm: expected a non-empty rectangular grid")
            if any(v is not None and not (math.isfinite(v) and v >= 0.0) for r in grid for v in r):
                raise ValueError("static_depth_mm: expected depths ≥ 0 mm or null")
        return self

    def grid(self) -> npt.NDArray[np.float64] | None:
        """Return the static-scene grid as an array (mm, NaN where no return), or None."""
        if self.static_depth_mm is None:
            return None
        return np.array(
            [[math.nan if v is None else v for v in row] for row in self.static_depth_mm]
        )

    def fingerprint(self) -> str:
        """Return a short digest of the grid at centimetre resolution (names the cell in a line)."""
        grid = self.grid()
        if grid is None:
            return "no static scene"
        rounded = np.where(np.isfinite(grid), np.round(grid / 10.0), -1).astype(np.int64)
        return hashlib.sha256(rounded.tobytes()).hexdigest()[:12]

    def describe(self) -> str:
        """Return the cell in a few words: its name and fingerprint."""
        name = f"'{self.name}'" if self.name else "unnamed cell"
        return f"{name} (static scene {self.fingerprint()})"


def static_depth_grid(
    depth_m: npt.ArrayLike, grid: tuple[int, int] = STATIC_DEPTH_GRID
) -> npt.NDArray[np.float64]:
    """Reduce a depth image to per-cell medians (mm; NaN where too few pixels have a return).

    Raises:
        ValueError: Not a 2-D image, or smaller than the grid.

    """
    depth = np.asarray(depth_m, dtype=np.float64)
    if depth.ndim == 3 and depth.shape[2] == 1:
        depth = depth[:, :, 0]
    rows, cols = grid
    if depth.ndim != 2 or depth.shape[0] < rows or depth.shape[1] < cols:
        raise ValueError(f"depth image of shape {depth.shape}: expected (H, W) ≥ {grid}")
    height, width = depth.shape
    valid = np.isfinite(depth) & (depth > 0.0) & (depth < MAX_DEPTH_M)
    out = np.full(grid, np.nan)
    for r in range(rows):
        for c in range(cols):
            block = (slice(r * height // rows, (r + 1) * height // rows),
                     slice(c * width // cols, (c + 1) * width // cols))  # fmt: skip
            returns = depth[block][valid[block]]
            if returns.size >= MIN_VALID_PIXELS * valid[block].size:
                out[r, c] = 1000.0 * float(np.median(returns))
    return out


def identity_from_depth(
    depth_m: npt.ArrayLike, stamp_s: float | None, name: str | None, camera: str = HEAD.name
) -> CellIdentity:
    """Return the identity world grounding records from one static-scene depth image."""
    grid = static_depth_grid(depth_m)
    values = [[None if not math.isfinite(v) else round(float(v), 1) for v in row] for row in grid]
    return CellIdentity(name=name, camera=camera, static_depth_mm=values, observed_stamp_s=stamp_s)


@dataclass(frozen=True)
class StaticSceneMatch:
    """Two static-scene grids compared.

    Attributes:
        compared: Grid cells with depth in both.
        median_mm: Median |difference| over them (NaN when none).
        far_fraction: Fraction of them differing by more than the limit.
        verdict: ``same`` (within every limit), ``different`` or ``nothing_to_compare``.

    """

    compared: int
    median_mm: float
    far_fraction: float
    verdict: str

    @property
    def same(self) -> bool:
        """Whether the grids are of the same cell."""
        return self.verdict == "same"

    def summary(self) -> str:
        """One line: the verdict with its numbers."""
        if self.verdict == "nothing_to_compare":
            return f"nothing to compare ({self.compared} grid cells with depth in both)"
        return (
            f"{self.verdict}: median {self.median_mm:.1f} mm off, "
            f"{100.0 * self.far_fraction:.0f} % of {self.compared} grid cells far"
        )


def compare_static_depth(
    expected_mm: npt.ArrayLike, observed_mm: npt.ArrayLike, limits: StaticSceneLimits
) -> StaticSceneMatch:
    """Compare two static-scene grids (mm, NaN = no return) against ``limits``.

    Raises:
        ValueError: The grids differ in shape.

    """
    expected = np.asarray(expected_mm, dtype=np.float64)
    observed = np.asarray(observed_mm, dtype=np.float64)
    if expected.shape != observed.shape:
        raise ValueError(f"static-scene grids of shapes {expected.shape} and {observed.shape}")
    both = np.isfinite(expected) & np.isfinite(observed)
    compared = int(both.sum())
    if compared < limits.min_compared_fraction * expected.size:
        return StaticSceneMatch(compared, math.nan, math.nan, "nothing_to_compare")
    difference = np.abs(expected[both] - observed[both])
    median = float(np.median(difference))
    far = float(np.mean(difference > limits.far_cell_mm))
    same = median <= limits.median_mm and far <= limits.max_far_fraction
    return StaticSceneMatch(compared, median, far, "same" if same else "different")


def name_mismatch(artifact_cell: CellIdentity | None, running_name: str, source: str) -> str | None:
    """One line when the artifact names another cell than the running one, else None.

    Nothing to compare (no name on either side) is not a mismatch.
    """
    recorded = artifact_cell.name if artifact_cell is not None else None
    if not running_name or not recorded or recorded == running_name:
        return None
    return (
        f"{source} grounds cell '{recorded}', but this is cell '{running_name}': ground this "
        "cell (`r2s2r ground --cell-name ...`) or give its own artifact"
    )


class StaticSceneCheck:
    """The check a reader runs at start-up: whether the running cell is the artifact's cell.

    Offer head depth images as they arrive (:meth:`offer`); the first whose grid matches the
    artifact's passes the check. A cell that differs in every image for ``window_s`` after the
    first one is another cell (the window lets an arm that was moving, or an object that
    covered the view, go by). No usable image by ``timeout_s`` after :attr:`started_s` leaves
    the cell unchecked (:meth:`expire`). ``verdict`` is then final.

    Args:
        expected: The artifact's cell (its grid is compared; its name is not).
        limits: When two grids are the same cell.
        started_s: When the reader started waiting (s, the clock of :meth:`offer`).
        window_s: How long every image must differ before the cell is another one (s).
        timeout_s: How long to wait for an image that can be compared (s).

    Raises:
        ValueError: The artifact's cell has no static scene (nothing to check against).

    """

    PENDING = "pending"
    PASSED = "passed"
    REFUSED = "refused"
    UNCHECKED = "unchecked"

    def __init__(
        self,
        expected: CellIdentity,
        limits: StaticSceneLimits,
        started_s: float,
        window_s: float,
        timeout_s: float,
    ) -> None:
        grid = expected.grid()
        if grid is None:
            raise ValueError(f"{expected.describe()}: the artifact records no static scene")
        self.expected = expected
        self._grid = grid
        self._limits = limits
        self._started_s = started_s
        self._window_s = window_s
        self._timeout_s = timeout_s
        self._first_different_s: float | None = None
        self.verdict = self.PENDING
        self.last: StaticSceneMatch | None = None
        self.images = 0

    def offer(self, now_s: float, depth_m: npt.ArrayLike) -> str:
        """Compare one head depth image (taken at ``now_s``); return the verdict so far."""
        if self.verdict != self.PENDING:
            return self.verdict
        self.images += 1
        self.last = compare_static_depth(self._grid, static_depth_grid(depth_m), self._limits)
        if self.last.same:
            self.verdict = self.PASSED
        elif self.last.verdict == "different":
            if self._first_different_s is None:
                self._first_different_s = now_s
            if now_s - self._first_different_s >= self._window_s:
                self.verdict = self.REFUSED
        return self.expire(now_s)

    def expire(self, now_s: float) -> str:
        """Leave the cell unchecked when nothing comparable came within the timeout."""
        waiting = self.verdict == self.PENDING and self._first_different_s is None
        if waiting and now_s - self._started_s >= self._timeout_s:
            self.verdict = self.UNCHECKED
        return self.verdict

    def message(self, source: str) -> str:
        """One line on the verdict, naming the artifact ``source`` and the cell."""
        cell = self.expected.describe()
        seen = self.last.summary() if self.last is not None else "no head depth image"
        if self.verdict == self.PASSED:
            return f"{source}: this is the artifact's cell {cell} ({seen})"
        if self.verdict == self.REFUSED:
            return (
                f"{source} grounds another cell: its static scene {cell} and this cell's head "
                f"depth differ over {self._window_s:g} s ({seen}); ground this cell or give "
                "its own artifact"
            )
        if self.verdict == self.UNCHECKED:
            return (
                f"{source}: cell not checked against {cell}: {seen} within "
                f"{self._timeout_s:g} s to compare"
            )
        return f"{source}: checking the cell against {cell} ({seen})"
