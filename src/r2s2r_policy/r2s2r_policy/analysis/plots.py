"""Figures of the mixture analysis: latent maps, attribution timelines, per-policy summaries.

Every function draws one small PNG (matplotlib's Agg canvas, no pyplot state; saved as a
256-colour palette image) and writes it whole or not at all
(:func:`r2s2r_common.files.write_atomic`); it returns the path written.
A value given as NaN is drawn as missing (a gap, or ``n/a``), never as zero. An interval is a
``(value, low, high)`` triple.

- :func:`plot_latent_map`: training frames (real and sim) on a 2-D map with rollout frames
  over them (:mod:`.projection` gives the map);
- :func:`plot_attribution_timeline`: one trial's attribution series over time, with its events;
- :func:`plot_policy_summary`: success, state and behavior real-likeness, probe accuracy and
  alignment, per policy;
- :func:`plot_style_comparison`: style metrics of groups (demonstrator, planner, policy).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray
from PIL import Image
from r2s2r_common.files import write_atomic

Interval = tuple[float, float, float]
"""``(value, low, high)``; NaN bounds draw no interval, a NaN value draws ``n/a``."""

DPI = 100
REAL_COLOR = "#c44e52"
SIM_COLOR = "#4c72b0"
NOMINAL_COLOR = "#222222"
SHIFTED_COLOR = "#55a868"
MISSING_COLOR = "#999999"
EVENT_COLORS = ("#8172b3", "#55a868", "#c44e52", "#937860", "#4c72b0", "#da8bc3")

SUMMARY_METRICS = (
    "success",
    "state_real_likeness_nominal",
    "state_real_likeness_shifted",
    "behavior_real_likeness_nominal",
    "behavior_real_likeness_shifted",
    "probe_accuracy_linear",
    "probe_accuracy_mlp",
    "alignment_sliced_wasserstein",
)
"""Keys of a :func:`plot_policy_summary` row besides ``name``: each a value or an interval."""


def _save(figure: Figure, path: str | Path) -> Path:
    """Write ``figure`` as a PNG at ``path`` through a temporary name."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    # A figure has few colours: a 256-colour palette keeps a map of thousands of translucent
    # dots under ~150 kB where full RGBA takes more.
    image = Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB").quantize(256)
    png = io.BytesIO()
    image.save(png, format="PNG", optimize=True)
    return write_atomic(target, png.getvalue())


def _vector(values: NDArray | Sequence[Any], what: str, length: int | None = None) -> NDArray:
    array = np.asarray(values)
    if array.ndim != 1 or (length is not None and len(array) != length):
        expected = f"({length},)" if length is not None else "a 1-D array"
        raise ValueError(f"{what}: expected {expected}, got shape {array.shape}")
    return array


def _points(xy: NDArray, what: str) -> NDArray[np.float64]:
    array = np.asarray(xy, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"{what}: expected an (N, 2) array, got shape {array.shape}")
    return array


def _finite_rows(xy: NDArray[np.float64]) -> NDArray[np.bool_]:
    return np.asarray(np.isfinite(xy).all(axis=1))


def plot_latent_map(
    path: str | Path,
    title: str,
    train_xy: NDArray,
    train_is_real: NDArray,
    rollout_xy: NDArray,
    rollout_is_shifted: NDArray,
    rollout_trial: NDArray | None = None,
    axis_labels: tuple[str, str] | None = None,
) -> Path:
    """Draw training frames (real, sim) on a 2-D map with rollout frames over them.

    Args:
        path: PNG to write.
        title: Figure title (say which policy and projection).
        train_xy: ``(N, 2)`` map positions of the training frames.
        train_is_real: ``(N,)`` booleans, True for a real frame.
        rollout_xy: ``(M, 2)`` map positions of the rollout frames (M may be 0).
        rollout_is_shifted: ``(M,)`` booleans, True for a frame of a shifted-condition trial.
        rollout_trial: Rollout frames of one trial to draw as a line, in time order: integer
            indices into ``rollout_xy`` or an ``(M,)`` boolean mask.
        axis_labels: Labels of the two map axes (e.g. :attr:`Projection.axis_labels`).

    Returns:
        ``path``. Rows with a NaN coordinate are not drawn nor counted.

    Raises:
        ValueError: If an array has the wrong shape, or an index is out of range.

    """
    train = _points(train_xy, "train_xy")
    is_real = _vector(train_is_real, "train_is_real", len(train)).astype(bool)
    rollout = _points(rollout_xy, "rollout_xy")
    is_shifted = _vector(rollout_is_shifted, "rollout_is_shifted", len(rollout)).astype(bool)
    trial: NDArray[np.intp] | None = None
    if rollout_trial is not None:
        selector = _vector(rollout_trial, "rollout_trial")
        if selector.dtype == bool:
            trial = np.flatnonzero(_vector(selector, "rollout_trial mask", len(rollout)))
        elif np.issubdtype(selector.dtype, np.integer):
            trial = selector.astype(np.intp)
            if len(trial) and (trial.min() < -len(rollout) or trial.max() >= len(rollout)):
                raise ValueError(
                    f"rollout_trial: indices must lie in [0, {len(rollout)}), "
                    f"got {trial.min()}..{trial.max()}"
                )
        else:
            raise ValueError(
                f"rollout_trial: expected integer indices or a boolean mask, got {selector.dtype}"
            )

    figure = Figure(dpi=DPI, figsize=(6.0, 5.0), layout="constrained")
    axes = figure.subplots()
    train_ok = _finite_rows(train)
    rollout_ok = _finite_rows(rollout)
    layers: tuple[tuple[NDArray, NDArray, str, dict[str, Any]], ...] = (
        (train, train_ok & ~is_real, "sim training", dict(s=3, c=SIM_COLOR, alpha=0.25)),
        (train, train_ok & is_real, "real training", dict(s=3, c=REAL_COLOR, alpha=0.35)),
        (
            rollout,
            rollout_ok & ~is_shifted,
            "rollout, nominal",
            dict(s=14, marker="o", facecolors="none", edgecolors=NOMINAL_COLOR, linewidths=0.6),
        ),
        (
            rollout,
            rollout_ok & is_shifted,
            "rollout, shifted",
            dict(s=16, marker="^", facecolors="none", edgecolors=SHIFTED_COLOR, linewidths=0.7),
        ),
    )
    for points, keep, label, style in layers:
        axes.scatter(
            points[keep, 0], points[keep, 1], label=f"{label} (n={int(keep.sum())})", **style
        )
    if trial is not None and len(trial):
        line = rollout[trial]
        axes.plot(line[:, 0], line[:, 1], color="black", linewidth=1.2, label="one trial")
        ends = line[_finite_rows(line)]
        if len(ends):
            axes.scatter(ends[0, 0], ends[0, 1], s=40, marker="o", color="black", zorder=3)
            axes.scatter(ends[-1, 0], ends[-1, 1], s=50, marker="X", color="black", zorder=3)
    if axis_labels is not None:
        axes.set_xlabel(axis_labels[0])
        axes.set_ylabel(axis_labels[1])
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=7, loc="best", markerscale=1.5, framealpha=0.8)
    return _save(figure, path)


def _share_range(values: NDArray[np.float64]) -> bool:
    finite = values[np.isfinite(values)]
    return bool(len(finite)) and bool(finite.min() >= 0.0) and bool(finite.max() <= 1.0)


def plot_attribution_timeline(
    path: str | Path,
    title: str,
    time_s: NDArray,
    series: Mapping[str, NDArray],
    events: Mapping[str, float],
    outcome: str,
) -> Path:
    """Draw one trial's attribution series over time, one panel each, with its events.

    Args:
        path: PNG to write.
        title: Figure title (policy, trial); the outcome is appended.
        time_s: ``(T,)`` times of the steps.
        series: Panel name -> ``(T,)`` values (NaN draws a gap), in panel order. A series
            whose values all lie in [0, 1] (a share or probability) is drawn on a fixed [0, 1]
            axis, any other on its own range.
        events: Event name -> time in s (NaN: did not happen, not drawn), drawn on every panel.
        outcome: The trial's outcome (``success``, or the failure reason).

    Returns:
        ``path``.

    Raises:
        ValueError: If ``series`` is empty or a series does not match ``time_s``.

    """
    time = _vector(time_s, "time_s").astype(np.float64)
    if not series:
        raise ValueError("series: expected at least one series to draw")
    panels = {
        name: _vector(values, f"series {name!r}", len(time)).astype(np.float64)
        for name, values in series.items()
    }
    figure = Figure(dpi=DPI, figsize=(7.0, 1.2 * len(panels) + 1.0), layout="constrained")
    axes_list = np.atleast_1d(figure.subplots(len(panels), 1, sharex=True))
    # An event's colour follows its place in ``events``, whichever others happened.
    happened = {
        name: (float(t), EVENT_COLORS[number % len(EVENT_COLORS)])
        for number, (name, t) in enumerate(events.items())
        if math.isfinite(float(t))
    }
    for index, (axes, (name, values)) in enumerate(zip(axes_list, panels.items(), strict=True)):
        axes.plot(time, values, color=SIM_COLOR, linewidth=1.2)
        if not np.isfinite(values).any():
            axes.text(
                0.5,
                0.5,
                "no values",
                transform=axes.transAxes,
                ha="center",
                va="center",
                fontsize=8,
                color=MISSING_COLOR,
            )
            axes.set_yticks([])
        elif _share_range(values):
            axes.set_ylim(-0.03, 1.03)
            axes.axhline(0.5, color=MISSING_COLOR, linewidth=0.6, linestyle=":")
        for event, (t, color) in happened.items():
            axes.axvline(t, color=color, linewidth=1.0, linestyle="--")
            if index == 0:
                axes.annotate(
                    event,
                    (t, 1.0),
                    xycoords=("data", "axes fraction"),
                    xytext=(2, 2),
                    textcoords="offset points",
                    fontsize=7,
                    color=color,
                    rotation=30,
                )
        axes.set_ylabel(name, fontsize=7, rotation=0, ha="right", va="center")
        axes.tick_params(labelsize=7)
    axes_list[-1].set_xlabel("time (s)")
    figure.suptitle(f"{title}: {outcome}", fontsize=10)
    return _save(figure, path)


def _interval(value: float | Sequence[float], what: str) -> Interval:
    if isinstance(value, int | float | np.floating | np.integer):
        return float(value), math.nan, math.nan
    try:
        triple = tuple(float(v) for v in value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{what}: expected a value or (value, low, high), got {value!r}"
        ) from error
    if len(triple) != 3:
        raise ValueError(f"{what}: expected a value or (value, low, high), got {value!r}")
    return triple[0], triple[1], triple[2]


def _draw_intervals(
    axes: Axes,
    positions: NDArray[np.float64],
    intervals: Sequence[Interval],
    color: str,
    label: str | None = None,
    bars: bool = False,
    width: float = 0.6,
) -> None:
    """Draw values (points or bars) with their intervals; NaN values as ``n/a``."""
    for x, (value, low, high) in zip(positions, intervals, strict=True):
        if not math.isfinite(value):
            axes.text(
                x,
                0.02,
                "n/a",
                transform=axes.get_xaxis_transform(),  # x in data, y in axes fraction
                ha="center",
                va="bottom",
                fontsize=6,
                color=MISSING_COLOR,
            )
            continue
        if bars:
            axes.bar(x, value, width=width, color=color, label=label)
        else:
            axes.plot(x, value, marker="o", markersize=4, color=color, label=label, linestyle="")
        label = None  # one legend entry per call
        if math.isfinite(low) and math.isfinite(high):
            axes.vlines(x, low, high, color="black" if bars else color, linewidth=1.0)
            axes.plot(
                [x, x],
                [low, high],
                marker="_",
                markersize=6,
                color="black" if bars else color,
                linestyle="",
            )


def plot_policy_summary(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Draw per policy its success and the mixture measures, one small panel per measure.

    Args:
        path: PNG to write.
        rows: One per policy: ``name`` and every key of :data:`SUMMARY_METRICS`, each a value
            or a ``(value, low, high)`` interval (NaN: not measured, drawn as ``n/a``).

    Returns:
        ``path``.

    Raises:
        ValueError: If ``rows`` is empty, or a row lacks a key, has an unknown one or a value
            that is neither a number nor a triple.

    """
    if not rows:
        raise ValueError("rows: expected at least one policy")
    names: list[str] = []
    values: dict[str, list[Interval]] = {key: [] for key in SUMMARY_METRICS}
    for number, row in enumerate(rows):
        expected = {"name", *SUMMARY_METRICS}
        missing, unknown = expected - set(row), set(row) - expected
        if missing or unknown:
            raise ValueError(
                f"rows[{number}]: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}"
            )
        names.append(str(row["name"]))
        for key in SUMMARY_METRICS:
            values[key].append(_interval(row[key], f"rows[{number}][{key!r}]"))

    x = np.arange(len(names), dtype=np.float64)
    width = max(1.8, 0.4 * len(names) + 1.0)
    figure = Figure(dpi=DPI, figsize=(5 * width, 3.4), layout="constrained")
    success, state, behavior, probe, alignment = figure.subplots(1, 5)
    _draw_intervals(success, x, values["success"], SIM_COLOR, bars=True)
    success.set_title("success rate", fontsize=9)
    for axes, prefix, title in (
        (state, "state_real_likeness", "state real-likeness"),
        (behavior, "behavior_real_likeness", "behavior real-likeness"),
    ):
        _draw_intervals(axes, x - 0.12, values[f"{prefix}_nominal"], NOMINAL_COLOR, "nominal")
        _draw_intervals(axes, x + 0.12, values[f"{prefix}_shifted"], SHIFTED_COLOR, "shifted")
        axes.set_title(title, fontsize=9)
    _draw_intervals(probe, x - 0.12, values["probe_accuracy_linear"], SIM_COLOR, "linear")
    _draw_intervals(probe, x + 0.12, values["probe_accuracy_mlp"], REAL_COLOR, "MLP")
    probe.axhline(0.5, color=MISSING_COLOR, linewidth=0.8, linestyle=":")
    probe.set_title("probe accuracy (0.5 = chance)", fontsize=9)
    _draw_intervals(alignment, x, values["alignment_sliced_wasserstein"], SIM_COLOR, bars=True)
    alignment.set_title("alignment (sliced W.)", fontsize=9)
    for axes in (success, state, behavior, probe):
        axes.set_ylim(0.0, 1.02)
    alignment.set_ylim(bottom=0.0)
    for axes in (state, behavior, probe):
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=6, loc="lower right")
    for axes in (success, state, behavior, probe, alignment):
        axes.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
        axes.set_xlim(-0.6, len(names) - 0.4)
        axes.tick_params(axis="y", labelsize=7)
    return _save(figure, path)


def plot_style_comparison(
    path: str | Path, groups: Mapping[str, Mapping[str, tuple[float, float, float]]]
) -> Path:
    """Draw each style metric's ``(mean, low, high)`` per group, one small panel per metric.

    Args:
        path: PNG to write.
        groups: Group (``demonstrator``, ``planner``, a policy) -> metric -> interval. A metric
            a group lacks, or a NaN mean, is drawn as ``n/a``. Panels follow the metrics' first
            appearance.

    Returns:
        ``path``.

    Raises:
        ValueError: If there is no group or no metric, or a value is not a triple.

    """
    metrics = list(dict.fromkeys(metric for group in groups.values() for metric in group))
    if not groups or not metrics:
        raise ValueError("groups: expected at least one group with at least one metric")
    names = list(groups)
    columns = min(4, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    width = max(2.2, 0.5 * len(names) + 1.0)
    figure = Figure(dpi=DPI, figsize=(width * columns, 2.4 * rows + 0.3), layout="constrained")
    grid = np.atleast_1d(figure.subplots(rows, columns)).ravel()
    x = np.arange(len(names), dtype=np.float64)
    for axes, metric in zip(grid, metrics, strict=False):
        intervals = [
            _interval(groups[name].get(metric, math.nan), f"groups[{name!r}][{metric!r}]")
            for name in names
        ]
        for index, interval in enumerate(intervals):
            color = EVENT_COLORS[index % len(EVENT_COLORS)]
            _draw_intervals(axes, x[index : index + 1], [interval], color)
        axes.set_title(metric, fontsize=8)
        axes.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
        axes.set_xlim(-0.6, len(names) - 0.4)
        axes.tick_params(axis="y", labelsize=7)
    for axes in grid[len(metrics) :]:
        axes.set_axis_off()
    return _save(figure, path)
