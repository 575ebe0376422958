"""The cell identity: static-scene grids, their comparison, names, and the artifact section."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError
from r2s2r_world.cell_identity import (
    STATIC_DEPTH_GRID,
    CellIdentity,
    StaticSceneCheck,
    StaticSceneLimits,
    compare_static_depth,
    identity_from_depth,
    name_mismatch,
    static_depth_grid,
)
from r2s2r_world.grounding import GroundingArtifact, check_artifact

LIMITS = StaticSceneLimits()


def _scene(offset_m: float = 0.0, tilt: float = 0.0) -> np.ndarray:
    """A 128 px depth image of a tilted table 1.2 m away with a box on it."""
    rows, cols = np.mgrid[0:128, 0:128].astype(np.float32)
    depth = 1.2 + offset_m + tilt * (rows - 64) / 64.0 + 0.002 * np.sin(cols / 5.0)
    depth[40:70, 50:90] -= 0.25  # a bin
    depth[:7, :] = 0.0  # no return along the top edge (7 of the first grid row's 8 rows)
    return depth.astype(np.float32)


def test_grid_is_per_cell_median_in_mm_with_nan_where_no_return() -> None:
    grid = static_depth_grid(_scene())
    assert grid.shape == STATIC_DEPTH_GRID
    assert math.isnan(grid[0, 0])  # 1 row of 8 with a return: under MIN_VALID_PIXELS
    assert grid[8, 0] == pytest.approx(1200.0, abs=3.0)
    assert grid[6, 8] == pytest.approx(950.0, abs=3.0)


def test_same_scene_is_same_and_a_moved_camera_is_different() -> None:
    base = static_depth_grid(_scene())
    assert compare_static_depth(base, static_depth_grid(_scene()), LIMITS).same
    noisy = _scene() + np.random.default_rng(0).normal(0.0, 0.004, (128, 128)).astype(np.float32)
    assert compare_static_depth(base, static_depth_grid(noisy), LIMITS).same
    moved = compare_static_depth(base, static_depth_grid(_scene(offset_m=0.03)), LIMITS)
    assert moved.verdict == "different" and moved.median_mm == pytest.approx(30.0, abs=1.0)
    tilted = compare_static_depth(base, static_depth_grid(_scene(tilt=0.05)), LIMITS)
    assert tilted.verdict == "different"
    assert "different: median" in tilted.summary()


def test_an_object_over_a_few_cells_does_not_make_another_cell() -> None:
    occluded = _scene()
    occluded[70:100, 20:40] -= 0.1  # an object on the belt, ~5 % of the view
    match = compare_static_depth(static_depth_grid(_scene()), static_depth_grid(occluded), LIMITS)
    assert match.same and 0.0 < match.far_fraction < LIMITS.max_far_fraction


def test_nothing_to_compare_when_depth_is_missing() -> None:
    blind = np.zeros((128, 128), np.float32)
    match = compare_static_depth(static_depth_grid(_scene()), static_depth_grid(blind), LIMITS)
    assert match.verdict == "nothing_to_compare" and not match.same
    assert "nothing to compare" in match.summary()
    with pytest.raises(ValueError, match="shapes"):
        compare_static_depth(np.zeros((4, 4)), np.zeros((16, 16)), LIMITS)
    with pytest.raises(ValueError, match="expected"):
        static_depth_grid(np.zeros((8, 8)))


def test_identity_round_trips_through_the_artifact_and_names_compare() -> None:
    cell = identity_from_depth(_scene(), 12.5, "lab-a")
    assert cell.static_depth_mm is not None and cell.static_depth_mm[0][0] is None
    artifact = GroundingArtifact(cell=cell)
    data = check_artifact(artifact.model_dump(mode="json"), "artifact.yaml")
    again = CellIdentity.model_validate(data["cell"])
    assert again == cell and again.fingerprint() == cell.fingerprint()
    assert again.describe().startswith("'lab-a' (static scene ")
    assert name_mismatch(cell, "lab-a", "a.yaml") is None
    assert name_mismatch(cell, "", "a.yaml") is None  # the running cell has no name
    assert name_mismatch(CellIdentity(), "lab-b", "a.yaml") is None  # unnamed artifact
    line = name_mismatch(cell, "lab-b", "a.yaml")
    assert line is not None and "'lab-a'" in line and "'lab-b'" in line and "\n" not in line


def test_artifacts_without_a_cell_section_stay_valid() -> None:
    data = GroundingArtifact().model_dump(mode="json")
    data.pop("cell")
    assert "cell" not in check_artifact(data, "old.yaml")


@pytest.mark.parametrize(
    "grid",
    [[], [[1.0, 2.0], [3.0]], [[-5.0]], [[math.inf]]],
)
def test_malformed_grids_are_refused(grid: list[list[float]]) -> None:
    with pytest.raises(ValidationError, match="static_depth_mm"):
        CellIdentity(static_depth_mm=grid)


def _check(window_s: float = 2.0, timeout_s: float = 10.0) -> StaticSceneCheck:
    expected = identity_from_depth(_scene(), 0.0, "lab-a")
    return StaticSceneCheck(expected, LIMITS, 0.0, window_s, timeout_s)


def test_check_passes_on_the_first_matching_image() -> None:
    check = _check()
    assert check.offer(1.0, _scene(offset_m=0.05)) == StaticSceneCheck.PENDING
    assert check.offer(1.5, _scene()) == StaticSceneCheck.PASSED
    assert check.offer(9.0, _scene(offset_m=0.05)) == StaticSceneCheck.PASSED  # final
    assert "this is the artifact's cell 'lab-a'" in check.message("a.yaml")


def test_check_refuses_a_cell_that_differs_for_the_whole_window() -> None:
    check = _check(window_s=2.0)
    for t in (1.0, 2.0, 2.9):
        assert check.offer(t, _scene(offset_m=0.05)) == StaticSceneCheck.PENDING
    assert check.offer(3.0, _scene(offset_m=0.05)) == StaticSceneCheck.REFUSED
    line = check.message("a.yaml")
    assert line.startswith("a.yaml grounds another cell") and "median 50.0 mm" in line


def test_check_leaves_a_blind_cell_unchecked_after_the_timeout() -> None:
    check = _check(timeout_s=5.0)
    assert check.expire(4.0) == StaticSceneCheck.PENDING
    assert check.offer(4.5, np.zeros((128, 128), np.float32)) == StaticSceneCheck.PENDING
    assert check.expire(5.0) == StaticSceneCheck.UNCHECKED
    assert "not checked" in check.message("a.yaml")
    with pytest.raises(ValueError, match="no static scene"):
        StaticSceneCheck(CellIdentity(name="x"), LIMITS, 0.0, 1.0, 1.0)
