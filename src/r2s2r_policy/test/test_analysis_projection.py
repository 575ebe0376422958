"""2-D projections fit on training frames and applied to rollouts; the analysis figures.

PCA of frames along a known direction recovers it; rollouts are placed on the fitted map
without refitting it; a missing UMAP/openTSNE package falls back to PCA with one line. Every
figure writes a small PNG, NaN inputs included.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from r2s2r_policy.analysis.plots import (
    SUMMARY_METRICS,
    plot_attribution_timeline,
    plot_latent_map,
    plot_policy_summary,
    plot_style_comparison,
)
from r2s2r_policy.analysis.projection import (
    PcaProjection,
    TsneProjection,
    UmapProjection,
    make_projection,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PNG_BYTES = 150_000


def line_frames(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Frames whose first three dimensions follow one latent ``t`` (scaled 10, -3, 0.5)."""
    t = rng.normal(size=count)
    frames = np.column_stack(
        [10.0 * t, -3.0 * t, 0.5 * t, rng.normal(size=count), rng.normal(size=count)]
    )
    frames[:, :3] += 0.02 * rng.normal(size=(count, 3)) * np.array([10.0, 3.0, 0.5])
    return frames + np.array([5.0, -2.0, 0.0, 1.0, 0.0]), t


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) < MAX_PNG_BYTES, f"{path.name}: {len(data)} bytes"
    assert not list(path.parent.glob(".*.partial"))


def test_pca_recovers_the_dominant_axis() -> None:
    frames, t = line_frames(np.random.default_rng(0), 2000)
    projection = PcaProjection()
    embedding = projection.fit(frames)
    assert projection.components is not None and projection.explained_variance_ratio is not None
    # Standardised, the three correlated dimensions have equal weight: axis ±(1, -1, 1, 0, 0)/√3.
    expected = np.array([1.0, -1.0, 1.0, 0.0, 0.0]) / math.sqrt(3.0)
    assert abs(projection.components[0] @ expected) > 0.995
    # Three of five unit-variance dimensions lie on the axis.
    assert projection.explained_variance_ratio[0] == pytest.approx(0.6, abs=0.02)
    assert abs(np.corrcoef(embedding[:, 0], t)[0, 1]) > 0.999
    assert projection.axis_labels[0] == "PC1 (60 %)"


def test_transform_of_training_frames_is_the_fitted_embedding() -> None:
    frames, _ = line_frames(np.random.default_rng(1), 200)
    projection = PcaProjection()
    embedding = projection.fit(frames)
    np.testing.assert_allclose(projection.transform(frames), embedding, atol=1e-12)
    np.testing.assert_array_equal(projection.train_embedding, embedding)
    assert projection.transform(np.zeros((0, 5))).shape == (0, 2)


def test_rollout_frames_are_transformed_not_refit() -> None:
    rng = np.random.default_rng(2)
    train, _ = line_frames(rng, 300)
    rollout = rng.normal(size=(50, 5)) * 20.0 + 40.0  # far from the training frames
    projection = PcaProjection()
    embedding = projection.fit(train)
    components = projection.components.copy() if projection.components is not None else None
    placed = projection.transform(rollout)

    np.testing.assert_array_equal(projection.train_embedding, embedding)
    np.testing.assert_array_equal(projection.components, components)
    np.testing.assert_allclose(projection.transform(train), embedding, atol=1e-12)
    # Placed with the training frames' statistics and axes ...
    assert components is not None
    standardised = (rollout - train.mean(axis=0)) / train.std(axis=0)
    np.testing.assert_allclose(placed, standardised @ components.T, atol=1e-9)
    # ... which a map fit on the rollout frames would not give.
    assert not np.allclose(PcaProjection().fit(rollout), placed, atol=1e-3)
    with pytest.raises(RuntimeError, match="already fitted"):
        projection.fit(rollout)
    with pytest.raises(ValueError, match="fit on 5"):
        projection.transform(rollout[:, :4])


def test_projection_input_errors() -> None:
    with pytest.raises(RuntimeError, match="not fitted"):
        PcaProjection().transform(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="non-finite"):
        PcaProjection().fit(np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="at least 3 frames"):
        PcaProjection().fit(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="unknown projection kind 'isomap'"):
        make_projection("isomap")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "module", "package"),
    [
        ("umap", "umap", "umap-learn"),
        ("tsne", "openTSNE", "openTSNE"),
    ],
)
def test_missing_package_falls_back_to_pca(
    monkeypatch: pytest.MonkeyPatch, kind: str, module: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    projection, note = make_projection(kind, seed=3)  # type: ignore[arg-type]
    assert isinstance(projection, PcaProjection)
    assert note is not None and "\n" not in note
    assert package in note and f"pip install {package}" in note and "PCA" in note


def test_pca_needs_no_note() -> None:
    projection, note = make_projection("pca")
    assert isinstance(projection, PcaProjection) and note is None


def two_clusters(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    offset = np.r_[8.0, np.zeros(5)]
    return rng.normal(size=(80, 6)), rng.normal(size=(80, 6)) + offset


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "module", "cls"),
    [
        ("umap", "umap", UmapProjection),
        ("tsne", "openTSNE", TsneProjection),
    ],
)
def test_optional_projection_places_new_frames_by_their_cluster(
    kind: str, module: str, cls: type
) -> None:
    pytest.importorskip(module)
    rng = np.random.default_rng(4)
    first, second = two_clusters(rng)
    projection, note = make_projection(kind, seed=0)  # type: ignore[arg-type]
    assert isinstance(projection, cls) and note is None
    embedding = projection.fit(np.vstack([first, second]))
    centre_first, centre_second = embedding[:80].mean(axis=0), embedding[80:].mean(axis=0)
    new_first, new_second = two_clusters(rng)
    for frames, own, other in (
        (new_first, centre_first, centre_second),
        (new_second, centre_second, centre_first),
    ):
        placed = projection.transform(frames[:20])
        assert placed.shape == (20, 2)
        closer = np.linalg.norm(placed - own, axis=1) < np.linalg.norm(placed - other, axis=1)
        assert closer.mean() > 0.9
    np.testing.assert_array_equal(projection.train_embedding, embedding)


def test_latent_map_writes_a_small_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    train_xy = rng.normal(size=(6000, 2))
    train_xy[::50] = np.nan
    rollout_xy = rng.normal(size=(400, 2))
    rollout_xy[3] = [np.nan, 0.0]
    is_shifted = np.arange(400) >= 200
    path = plot_latent_map(
        tmp_path / "maps" / "latent_map.png",
        "policy A, PCA",
        train_xy,
        rng.random(6000) < 0.2,
        rollout_xy,
        is_shifted,
        rollout_trial=np.arange(0, 60),
        axis_labels=("PC1 (40 %)", "PC2 (20 %)"),
    )
    assert_png(path)
    # A boolean mask, no rollout at all, and no highlighted trial also draw.
    assert_png(
        plot_latent_map(
            path, "mask", train_xy, np.ones(6000), rollout_xy, is_shifted, rollout_trial=is_shifted
        )
    )
    assert_png(
        plot_latent_map(
            tmp_path / "empty.png",
            "none",
            train_xy,
            np.zeros(6000),
            np.zeros((0, 2)),
            np.zeros(0, dtype=bool),
        )
    )
    with pytest.raises(ValueError, match="train_is_real"):
        plot_latent_map(path, "bad", train_xy, np.ones(5), rollout_xy, is_shifted)
    with pytest.raises(ValueError, match="rollout_trial"):
        plot_latent_map(
            path,
            "bad",
            train_xy,
            np.ones(6000),
            rollout_xy,
            is_shifted,
            rollout_trial=np.array([0, 400]),
        )


def test_attribution_timeline_draws_gaps_and_skips_missing_events(tmp_path: Path) -> None:
    time_s = np.linspace(0.0, 12.0, 241)
    share = np.clip(0.5 + 0.4 * np.sin(time_s), 0.0, 1.0)
    share[40:60] = np.nan
    series = {
        "state: kNN real share": share,
        "state: probe p(real)": 1.0 - share,
        "state: distance to nearest real": 3.0 + np.cos(time_s),
        "behavior: real-likeness": np.full(241, np.nan),
    }
    events = {"touch": 2.0, "grasp": 2.6, "lift": 3.5, "release": math.nan, "bin": math.nan}
    path = plot_attribution_timeline(
        tmp_path / "timeline.png", "policy A, trial 7", time_s, series, events, "dropped"
    )
    assert_png(path)
    with pytest.raises(ValueError, match="series 'short'"):
        plot_attribution_timeline(path, "bad", time_s, {"short": share[:10]}, events, "success")
    with pytest.raises(ValueError, match="at least one series"):
        plot_attribution_timeline(path, "bad", time_s, {}, events, "success")


def summary_row(name: str, nan: bool = False) -> dict[str, object]:
    row: dict[str, object] = {"name": name}
    for number, key in enumerate(SUMMARY_METRICS):
        value = 0.3 + 0.05 * number
        row[key] = (value, value - 0.1, value + 0.1)
    row["probe_accuracy_linear"] = 0.55
    row["probe_accuracy_mlp"] = 0.7
    row["alignment_sliced_wasserstein"] = 1.8
    if nan:
        row["state_real_likeness_shifted"] = (math.nan, math.nan, math.nan)
        row["behavior_real_likeness_nominal"] = (0.5, math.nan, math.nan)
        row["probe_accuracy_mlp"] = math.nan
        row["alignment_sliced_wasserstein"] = (2.0, 1.5, 2.6)
    return row


def test_policy_summary_draws_nan_as_missing(tmp_path: Path) -> None:
    rows = [
        summary_row("real only"),
        summary_row("co-trained 1:4", nan=True),
        summary_row("sim only"),
    ]
    assert_png(plot_policy_summary(tmp_path / "summary.png", rows))
    incomplete = summary_row("x")
    del incomplete["success"]
    with pytest.raises(ValueError, match=r"rows\[0\]: missing keys \['success'\]"):
        plot_policy_summary(tmp_path / "bad.png", [incomplete])
    with pytest.raises(ValueError, match="success"):
        plot_policy_summary(tmp_path / "bad.png", [{**summary_row("x"), "success": "high"}])
    assert not (tmp_path / "bad.png").exists()


def test_style_comparison_has_a_panel_per_metric(tmp_path: Path) -> None:
    groups = {
        "demonstrator": {
            "path_length_m": (1.2, 1.1, 1.3),
            "jerk_mps3": (4.0, 3.5, 4.6),
            "grasp_fingers": (3.1, 2.9, 3.3),
        },
        "planner": {
            "path_length_m": (0.9, 0.85, 0.95),
            "jerk_mps3": (math.nan, math.nan, math.nan),
        },
        "diagnostic policy": {
            "path_length_m": (1.0, 0.8, 1.2),
            "jerk_mps3": (5.0, 4.0, 6.0),
            "grasp_fingers": (2.5, 2.2, 2.8),
            "pause_s": (0.4, 0.3, 0.5),
            "approach_speed_mps": (0.2, 0.18, 0.22),
        },
    }
    assert_png(plot_style_comparison(tmp_path / "style.png", groups))
    with pytest.raises(ValueError, match="at least one group"):
        plot_style_comparison(tmp_path / "none.png", {})
