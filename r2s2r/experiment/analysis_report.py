"""The analysis report of a finished experiment: measures per policy, table, figures.

Computed from the cached analysis stages (:mod:`r2s2r.experiment.analysis`); written to
``EXPDIR/analysis/report/`` whole or not at all (a hidden partial folder renamed into place).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
from r2s2r_common.files import move_into_place
from r2s2r_policy.evaluation.report import SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL

from r2s2r.experiment.analysis import (
    AnalysisError,
    AnalysisOptions,
    AnalysisSession,
    analysis_protocol,
    condition_groups,
    read_finished,
    signature_of,
    training_datasets,
)
from r2s2r.experiment.config import real_reference

REPORT_DIR = "report"
MEASURE_LABELS = {
    "knn_real_share": "state: kNN real share",
    "probe_p_real": "state: probe p(real)",
    "nearest_real_ratio": "state: distance to nearest real / real spacing",
    "behavior_real_likeness": "behavior: real-likeness",
}
"""Per-step measures (the report's keys) and how figures and tables name them."""


def _triple(values: tuple[float, float, float]) -> list[float | None]:
    return [None if not math.isfinite(v) else round(float(v), 4) for v in values]


def _nan(triple: list[float | None]) -> tuple[float, float, float]:
    """Return a stored ``[value, lo, hi]`` (None: missing) as floats, NaN for missing."""
    a, b, c = (math.nan if v is None else float(v) for v in triple)
    return a, b, c


def _probe_interval(probe: Any) -> list[float | None]:
    """Return ``[accuracy, lo, hi]`` of a probe (95 % Wilson over its held-out latents)."""
    from r2s2r_policy.evaluation.stats import wilson_interval

    correct = round(probe.accuracy * probe.tested)
    low, high = wilson_interval(correct, probe.tested)
    return _triple((probe.accuracy, low, high))


def _subsample(latents: np.ndarray, count: int, seed: int) -> np.ndarray:
    if len(latents) <= count:
        return latents
    rng = np.random.default_rng(seed)
    return latents[np.sort(rng.permutation(len(latents))[:count])]


def _success(evaluation: dict[str, Any]) -> dict[str, list[int]]:
    summary = evaluation["summary"]
    return {
        group: [int(summary[group]["successes"]), int(summary[group]["trials"])]
        for group in (NOMINAL, SHIFTED, "all")
        if group in summary
    }


def analyse_policy(
    session: AnalysisSession,
    name: str,
    reference: Path,
    trials_dir: Path,
    frames: tuple[Path, Path],
    groups: dict[int, str],
    outcomes: dict[int, bool],
    figures: Path,
) -> dict[str, Any]:
    """Measure one co-trained policy (see :mod:`r2s2r.experiment.analysis`).

    ``groups``: trial index → condition group; ``outcomes``: trial index → success.
    """
    from r2s2r_policy.analysis.attribution import (
        behavior_real_likeness,
        group_interval,
        spearman,
        state_attribution,
    )
    from r2s2r_policy.analysis.domain import (
        bootstrap_interval,
        fit_probe,
        mmd_rbf,
        sliced_wasserstein,
    )
    from r2s2r_policy.analysis.embeddings import (
        embed_frames,
        load_frame_set,
        observation_keys,
        predict_chunks,
    )
    from r2s2r_policy.analysis.plots import plot_attribution_timeline, plot_latent_map
    from r2s2r_policy.analysis.projection import ProjectionKind, make_projection
    from r2s2r_policy.checkpoint import load_checkpoint
    from r2s2r_policy.evaluation.rollouts import load_rollout

    options = session.options
    finished = session.finished
    policy = load_checkpoint(finished.policies[name].checkpoint).policy
    reference_name = real_reference(finished.config)
    real_policy = load_checkpoint(finished.policies[reference_name].checkpoint).policy
    sim_policy = load_checkpoint(reference).policy
    for other, what in ((real_policy, "real-only"), (sim_policy, "sim-only")):
        if observation_keys(other.spec) != observation_keys(policy.spec):
            raise ValueError(f"{name}: the {what} policy reads other inputs")
    real_frames, sim_frames = (load_frame_set(path) for path in frames)
    z_real = embed_frames(policy, real_frames)
    z_sim = embed_frames(policy, sim_frames)
    seed = options.seed
    probe_real = _subsample(z_real, options.probe_frames, seed)
    probe_sim = _subsample(z_sim, options.probe_frames, seed + 1)
    linear = fit_probe(probe_real, probe_sim, "linear", seed=seed)
    mlp = fit_probe(probe_real, probe_sim, "mlp", seed=seed)
    alignment = bootstrap_interval(
        lambda a, b: sliced_wasserstein(a, b, seed=seed), probe_real, probe_sim, resamples=50
    )
    mmd = mmd_rbf(_subsample(probe_real, 1000, seed), _subsample(probe_sim, 1000, seed + 1))
    per_trial: dict[str, dict[str, list[np.ndarray]]] = {
        m: {NOMINAL: [], SHIFTED: []} for m in MEASURE_LABELS
    }
    steps: list[dict[str, Any]] = []
    keys = observation_keys(policy.spec)
    trial_files = sorted(trials_dir.glob("trial_*.npz"))
    if not trial_files:
        raise ValueError(f"{trials_dir}: no rollout")
    rollout_latents, rollout_shifted, trial_of_step = [], [], []
    for path in trial_files:
        rollout = load_rollout(path, policy)
        ran = rollout.ran()
        if ran.size == 0:
            continue
        latents = rollout.trace.arrays["latent"][ran].astype(np.float64)
        observations = rollout.observations(keys)
        state = state_attribution(z_real, z_sim, latents, mlp, options.k, seed)
        behavior = behavior_real_likeness(
            predict_chunks(policy, observations),
            predict_chunks(real_policy, observations),
            predict_chunks(sim_policy, observations),
        )
        group = groups[rollout.trial_index]
        values = {
            "knn_real_share": state.knn_real_share,
            "probe_p_real": state.probe_p_real,
            "nearest_real_ratio": state.nearest_real_ratio,
            "behavior_real_likeness": behavior,
        }
        for measure, series in values.items():
            per_trial[measure][group].append(series)
        started = float(rollout.trace.metadata.get("started_at_s", 0.0))
        steps.append(
            {
                "trial": rollout.trial_index,
                "group": group,
                "time_s": rollout.trace.arrays["engine_s"][ran] - started,
                "values": values,
                "events": {k: v - started for k, v in rollout.events().items()},
                "success": outcomes.get(rollout.trial_index, False),
            }
        )
        rollout_latents.append(latents)
        rollout_shifted.append(np.full(len(latents), group == SHIFTED))
        trial_of_step.append(np.full(len(latents), rollout.trial_index))
    if not steps:
        raise ValueError(f"{name}: no rollout step ran the policy")
    attribution = {
        m: {g: _triple(group_interval(per_trial[m][g], seed=seed)) for g in (NOMINAL, SHIFTED)}
        for m in MEASURE_LABELS
    }
    every = {m: np.concatenate([s["values"][m] for s in steps]) for m in MEASURE_LABELS}
    correlation = {
        "knn_share_vs_behavior": spearman(every["knn_real_share"], every["behavior_real_likeness"]),
        "probe_vs_behavior": spearman(every["probe_p_real"], every["behavior_real_likeness"]),
        "nearest_real_vs_behavior": spearman(
            every["nearest_real_ratio"], every["behavior_real_likeness"]
        ),
    }
    # Projection: fit on balanced training latents, rollouts transformed into that map.
    projection, note = make_projection(cast(ProjectionKind, options.projection), seed)
    if note:
        session.log(note)
    fit_real = _subsample(z_real, 1500, seed)
    fit_sim = _subsample(z_sim, 1500, seed + 1)
    train_xy = projection.fit(np.vstack([fit_real, fit_sim]))
    all_rollouts = np.vstack(rollout_latents)
    rollout_xy = projection.transform(all_rollouts)

    # The rollout whose behavior attribution moves most along it (smoothed over 5 steps).
    def swing(step: dict[str, Any]) -> float:
        series = step["values"]["behavior_real_likeness"]
        if len(series) < 5:
            return 0.0
        smooth = np.convolve(series, np.ones(5) / 5, mode="valid")
        return float(smooth.max() - smooth.min())

    shown = max(steps, key=swing)
    trial_mask = np.concatenate(trial_of_step) == shown["trial"]
    map_path = figures / f"latent_map_{name}.png"
    plot_latent_map(
        map_path,
        f"{name}: latents ({projection.kind}); training frames, rollouts",
        train_xy,
        np.r_[np.ones(len(fit_real), bool), np.zeros(len(fit_sim), bool)],
        rollout_xy,
        np.concatenate(rollout_shifted),
        rollout_trial=trial_mask,
        axis_labels=projection.axis_labels,
    )
    timeline_path = figures / f"timeline_{name}.png"
    plot_attribution_timeline(
        timeline_path,
        f"{name}, trial {shown['trial']} ({shown['group']})",
        shown["time_s"],
        {MEASURE_LABELS[m]: shown["values"][m] for m in MEASURE_LABELS},
        shown["events"],
        "success" if shown["success"] else "failure",
    )
    return {
        "frames": {"real": len(real_frames), "sim": len(sim_frames)},
        "latent_dim": int(z_real.shape[1]),
        "alignment": {"sliced_wasserstein": _triple(alignment), "mmd_rbf": round(mmd, 5)},
        # Held-out accuracy with its 95 % Wilson interval over the held-out latents.
        "probe_accuracy": {probe.kind: _probe_interval(probe) for probe in (linear, mlp)},
        "probe_tested": linear.tested,
        "rollout_steps": int(sum(len(s["time_s"]) for s in steps)),
        "attribution": attribution,
        "correlation": {
            k: (None if not math.isfinite(v) else round(v, 3)) for k, v in correlation.items()
        },
        "timeline": {
            "trial": shown["trial"],
            "group": shown["group"],
            "behavior_swing": round(swing(shown), 3),
        },
        "projection": projection.kind,
        "figures": {"latent_map": map_path.name, "timeline": timeline_path.name},
    }


def _table(policies: dict[str, dict[str, Any]]) -> str:
    """Return a readable table of the report."""
    lines = [
        "policy              success(rollouts)  probe lin/mlp  SW [95% CI]           "
        "state kNN real share nominal | shifted        behavior real-likeness nominal | shifted",
    ]

    def fmt(triple: list[float | None]) -> str:
        if triple[0] is None:
            return "   n/a          "
        return f"{triple[0]:.2f} [{triple[1]:.2f},{triple[2]:.2f}]"

    for name, row in policies.items():
        success = row["success"]["rollouts"].get("all", [0, 0])
        rate = f"{success[0]:>2}/{success[1]:<2}"
        if "attribution" not in row:
            lines.append(f"{name:<20}{rate:<19}(no sim data: the real reference)")
            continue
        probe = {kind: value[0] for kind, value in row["probe_accuracy"].items()}
        sw = row["alignment"]["sliced_wasserstein"]
        attribution = row["attribution"]
        lines.append(
            f"{name:<20}{rate:<19}{probe['linear']:.2f}/{probe['mlp']:.2f}      "
            f"{fmt(sw):<22}"
            f"{fmt(attribution['knn_real_share'][NOMINAL])} | "
            f"{fmt(attribution['knn_real_share'][SHIFTED])}   "
            f"{fmt(attribution['behavior_real_likeness'][NOMINAL])} | "
            f"{fmt(attribution['behavior_real_likeness'][SHIFTED])}"
        )
    return "\n".join(lines)


def write_report(
    session: AnalysisSession,
    references: dict[str, Path],
    rollouts: dict[str, Path],
    frames: dict[str, tuple[Path, Path]],
    groups: dict[int, str],
    command: str = "",
    wall_s: float = 0.0,
) -> dict[str, Any]:
    """Compute every policy's measures and write the report folder; its data.

    The folder is built under a hidden name and renamed into place: a failure leaves the
    previous report (or none), never a half-written one.
    """
    root = session.stages.root
    final = root / REPORT_DIR
    partial = root / f".{REPORT_DIR}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        data, table = _compute_report(session, references, rollouts, frames, groups, partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    data.update(command=command, wall_s=round(wall_s, 1))
    (partial / "latent.json").write_text(json.dumps(data, indent=1, default=str))
    (partial / "table.txt").write_text(table + "\n")
    if final.exists():
        shutil.rmtree(final)
    move_into_place(partial, final)
    session.log(table)
    session.log(f"report: {final}")
    return data


def _compute_report(
    session: AnalysisSession,
    references: dict[str, Path],
    rollouts: dict[str, Path],
    frames: dict[str, tuple[Path, Path]],
    groups: dict[int, str],
    partial: Path,
) -> tuple[dict[str, Any], str]:
    """Return the report's data and table; figures are written into ``partial``."""
    from r2s2r_policy.analysis.plots import plot_policy_summary

    policies: dict[str, dict[str, Any]] = {}
    for name, policy in session.finished.policies.items():
        evaluation = json.loads((rollouts[name].parent / "evaluation.json").read_text())
        row: dict[str, Any] = {
            "success": {
                "rollouts": _success(evaluation),
                "experiment": _success(policy.evaluation),
            },
            "execution": policy.inference.execution,
        }
        if name in references:
            session.log(f"[analysis/report] {name}")
            row.update(
                analyse_policy(
                    session,
                    name,
                    references[name],
                    rollouts[name],
                    frames[name],
                    groups,
                    {int(t["index"]): bool(t["success"]) for t in evaluation["trials"]},
                    partial,
                )
            )
        policies[name] = row
    summary_rows = []
    for name, row in policies.items():
        if "attribution" not in row:
            continue
        success = row["success"]["rollouts"]["all"]
        attribution = row["attribution"]
        summary_rows.append(
            {
                "name": name,
                "success": success[0] / max(success[1], 1),
                "state_real_likeness_nominal": _nan(attribution["knn_real_share"][NOMINAL]),
                "state_real_likeness_shifted": _nan(attribution["knn_real_share"][SHIFTED]),
                "behavior_real_likeness_nominal": _nan(
                    attribution["behavior_real_likeness"][NOMINAL]
                ),
                "behavior_real_likeness_shifted": _nan(
                    attribution["behavior_real_likeness"][SHIFTED]
                ),
                "probe_accuracy_linear": tuple(row["probe_accuracy"]["linear"]),
                "probe_accuracy_mlp": tuple(row["probe_accuracy"]["mlp"]),
                "alignment_sliced_wasserstein": _nan(row["alignment"]["sliced_wasserstein"]),
            }
        )
    if summary_rows:
        plot_policy_summary(partial / "summary.png", summary_rows)
    data = {
        "commit": session.commit,
        "experiment_dir": str(session.finished.directory),
        "options": vars(session.options),
        "groups": {NOMINAL: "nominal trials", SHIFTED: "shifted trials"},
        "measures": MEASURE_LABELS,
        "policies": policies,
    }
    return data, _table(policies)


def run_analysis(
    directory: str | Path,
    options: AnalysisOptions | None = None,
    log: Callable[[str], None] | None = None,
    progress_bars: bool = True,
    command: str = "",
) -> dict[str, Any]:
    """Analyse a finished experiment (see the module docstring); the report's data.

    Raises:
        AnalysisError: The experiment is not finished or an input does not fit.

    """
    import torch

    say = log or (lambda text: print(text, flush=True))
    options = options or AnalysisOptions()
    if options.threads > 0:
        torch.set_num_threads(options.threads)
    started = time.perf_counter()
    finished = read_finished(directory)
    session = AnalysisSession(finished, options, say, progress_bars)
    co_trained = [p for p in finished.policies.values() if p.configuration is not None]
    references = {p.name: session.reference(p.name) for p in co_trained}
    rollouts = {name: session.rollouts(p) for name, p in finished.policies.items()}
    real_only = finished.policies[real_reference(finished.config)]
    real_path = training_datasets(real_only).get("real")
    if real_path is None:
        raise AnalysisError(f"{real_only.train_config}: the real-only policy has no real dataset")
    frames: dict[str, tuple[Path, Path]] = {}  # co-trained policy -> (real, sim) frames
    # One sample of the real frames serves every policy that reads the same inputs.
    shared_real = session.frames("real", real_path, "real", real_only.checkpoint)
    for policy in co_trained:
        datasets = training_datasets(policy)
        if datasets.get("real") != real_path or "sim" not in datasets:
            raise AnalysisError(
                f"{policy.name} trained on real data {datasets.get('real')} and sim data "
                f"{datasets.get('sim')}; the real-only policy on {real_path}: not one experiment"
            )
        real_frames = shared_real
        if signature_of(policy.checkpoint) != signature_of(real_only.checkpoint):
            real_frames = session.frames(
                f"real_for_{policy.name}", real_path, "real", policy.checkpoint
            )
        sim_frames = session.frames(policy.name, datasets["sim"], "sim", policy.checkpoint)
        frames[policy.name] = (real_frames, sim_frames)
    return write_report(
        session,
        references,
        rollouts,
        frames,
        condition_groups(analysis_protocol(finished, options)),
        command=command,
        wall_s=time.perf_counter() - started,
    )
