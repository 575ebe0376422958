"""The visual-translation experiment (the paper's third finding): few real + translated sim.

Preset ``translation`` (``config/experiment/translation.yaml``; its ``translation:`` section is
:class:`TranslationPlan`). On a cell whose cameras have a real look (a family twin sampled with
``--appearance``), in the lab's order of work, as stages of their own folders::

    grounding/, demos/              the cell grounded, then ``real_demos`` (100) recorded on it
    few_real/                       the first ``few_real_demos`` (25) successful ones
    generation/<configuration>/     ``sim_episodes_per_configuration`` (75) each; MimicGen from
                                    the few real demos
    translation/translator/         a translator trained on the few real demos' frames only
    translation/<configuration>/    that configuration's dataset translated
    translation/score_<configuration>/  rendered vs translated frames against real frames the
                                    translator never saw (the other demos): KID, alignment,
                                    probe, warping error, contact sheet
    policies/, selection/, evaluation/ <policy>/ as in the 2x2 experiment

Policies: ``real_only`` (all real demos), ``few_real``, and per configuration ``<c>`` (few real
+ rendered sim) and ``<c>_translated`` (few real + translated sim), every one with the same
training seed and the same 24 nominal + 26 shifted trials. The results name the contrasts the
finding is about: translated minus rendered, few real + translated minus all real, and what
the appearance gap costs (few real + rendered minus few real).
"""

from __future__ import annotations

import json
import shutil
import textwrap
import time
from pathlib import Path
from typing import Any

from r2s2r_common.config import dump_yaml
from r2s2r_policy.evaluation.report import ALL, SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL

from r2s2r.experiment.cell import first_demonstrations, real_demos
from r2s2r.experiment.config import FEW_REAL, TRANSLATED_SUFFIX, TranslationPlan, policy_names
from r2s2r.experiment.generation import simulated, split_world_behavior
from r2s2r.experiment.products import DatasetProduct, Unavailable
from r2s2r.experiment.results import GROUPS, REAL_ONLY, PolicyResult, contrast, pooled_groups
from r2s2r.experiment.runner import ground_if_needed, train_select_evaluate
from r2s2r.experiment.session import ExperimentSession
from r2s2r.pipeline.cache import StageError

TRANSLATOR_STAGE = "translation/translator"


def _policy_result(
    session: ExperimentSession, name: str, real: DatasetProduct, sim: DatasetProduct | None
) -> PolicyResult:
    world, behavior = (None, None)
    if sim is not None:
        world, behavior = split_world_behavior(name.removesuffix(TRANSLATED_SUFFIX))
    return train_select_evaluate(session, name, real, sim, world, behavior)


def train_translator_stage(
    session: ExperimentSession, plan: TranslationPlan, few: DatasetProduct
) -> Path | Unavailable:
    """Stage ``translation/translator``: a translator trained on the few real demos only."""
    from r2s2r_translation.frames import TranslationInputError
    from r2s2r_translation.structure_translator import StructureTrainConfig
    from r2s2r_translation.train import train_translator

    settings = StructureTrainConfig(steps=plan.translator_steps, seed=session.config.seed)

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        target = folder / "translator"
        shutil.rmtree(target, ignore_errors=True)
        if plan.translator == "colour":
            raise StageError("the colour translator needs a sim dataset; use translator: structure")
        try:
            train_translator(few.path, "structure", target, session.config.image_px, None, settings)
        except TranslationInputError as error:
            raise StageError(f"translator: {error}") from None
        meta = json.loads((target / "translator.json").read_text())
        info = {
            camera: {"holdout_l1": log["holdout_l1"][-1], "wall_s": log["wall_s"]}
            for camera, log in meta.get("log", {}).items()
        }
        return {"translator": str(target)}, info

    inputs = {
        "real": few.fingerprint,
        "plan": plan.model_dump(mode="json"),
        "image_px": session.config.image_px,
        "settings": settings.model_dump(mode="json"),
    }
    try:
        outcome = session.stages.run(TRANSLATOR_STAGE, inputs, body)
    except StageError as error:
        return Unavailable(str(error))
    session.state.note(TRANSLATOR_STAGE, outcome)
    return Path(outcome.outputs["translator"])


def translate_stage(
    session: ExperimentSession, configuration: str, sim: DatasetProduct, translator_path: Path
) -> DatasetProduct | Unavailable:
    """Stage ``translation/<configuration>``: the configuration's dataset translated."""
    from r2s2r_translation.checkpoint import load_translator
    from r2s2r_translation.dataset import translate_dataset

    from r2s2r.pipeline.cache import content_hash

    translator = load_translator(translator_path)

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        target = folder / "dataset.hdf5"
        if not target.exists():  # a stopped run's partial beside it is resumed
            translate_dataset(sim.path, target, translator)
        return {"dataset": str(target)}, {"translator_sha256": translator.identity}

    stage = f"translation/{configuration}"
    inputs = {"sim": sim.fingerprint, "translator": translator.identity}
    try:
        outcome = session.stages.run(stage, inputs, body)
    except StageError as error:
        return Unavailable(str(error))
    session.state.note(stage, outcome)
    path = outcome.outputs["dataset"]
    return DatasetProduct(path, content_hash(path))


def score_stage(
    session: ExperimentSession,
    configuration: str,
    sim: DatasetProduct,
    translator_path: Path,
    real: DatasetProduct,
    unseen_episodes: list[int],
    frames: int,
) -> dict[str, Any] | Unavailable:
    """Stage ``translation/score_<configuration>``: frames scored against unseen real ones."""
    from r2s2r_translation.checkpoint import load_translator
    from r2s2r_translation.score import score_translator

    translator = load_translator(translator_path)

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        sheet = folder / "contact_sheet.png"
        report = score_translator(
            translator,
            real.path,
            sim.path,
            frames,
            contact_sheet=sheet,
            real_episodes=unseen_episodes,
        )
        (folder / "scores.json").write_text(json.dumps(report, indent=2) + "\n")
        return {"scores": str(folder / "scores.json"), "contact_sheet": str(sheet)}, {}

    stage = f"translation/score_{configuration}"
    inputs = {
        "sim": sim.fingerprint,
        "translator": translator.identity,
        "real": real.fingerprint,
        "episodes": unseen_episodes,
        "frames": frames,
    }
    try:
        outcome = session.stages.run(stage, inputs, body)
    except StageError as error:
        return Unavailable(str(error))
    session.state.note(stage, outcome)
    report: dict[str, Any] = json.loads(Path(outcome.outputs["scores"]).read_text())
    report["contact_sheet"] = outcome.outputs["contact_sheet"]
    return report


def _unseen_real_episodes(real: DatasetProduct, few: DatasetProduct) -> list[int]:
    """Episodes of the full real dataset after the few-real subset (never trained on)."""
    from r2s2r_dataset import EpisodeDataset as EpisodeReader

    with EpisodeReader(real.path) as full, EpisodeReader(few.path) as subset:
        total, used = len(full), len(subset)
    if Path(real.path).resolve() == Path(few.path).resolve():
        return []
    return list(range(used, total))


def contrasts(policies: dict[str, PolicyResult], configurations: list[str]) -> dict[str, Any]:
    """Return the finding's contrasts per trial group, in points with 95 % intervals."""

    def rows(name: str, group: str) -> Any:
        policy = policies.get(name)
        if policy is None or not policy.ran or group not in policy.groups:
            return None
        return policy.groups[group]

    wanted: dict[str, tuple[list[str], list[str]]] = {
        "few_real - real_only": ([FEW_REAL], [REAL_ONLY]),
    }
    for c in configurations:
        wanted[f"{c}{TRANSLATED_SUFFIX} - {c}"] = ([f"{c}{TRANSLATED_SUFFIX}"], [c])
        wanted[f"{c}{TRANSLATED_SUFFIX} - real_only"] = ([f"{c}{TRANSLATED_SUFFIX}"], [REAL_ONLY])
        wanted[f"{c} - few_real"] = ([c], [FEW_REAL])
    out: dict[str, Any] = {}
    for group in GROUPS:
        out[group] = {}
        for label, (plus, minus) in wanted.items():
            a = [rows(n, group) for n in plus]
            b = [rows(n, group) for n in minus]
            if any(r is None for r in (*a, *b)):
                out[group][label] = None
                continue
            out[group][label] = contrast(a, b).to_dict()
    return out


def _label(name: str, plan: TranslationPlan, config: Any) -> str:
    if name == REAL_ONLY:
        return f"{config.real_demos} real"
    if name == FEW_REAL:
        return f"{plan.few_real_demos} real"
    base = name.removesuffix(TRANSLATED_SUFFIX)
    how = "translated" if name.endswith(TRANSLATED_SUFFIX) else "rendered"
    return f"{plan.few_real_demos} real + {config.sim_episodes_per_configuration} {how} {base}"


def format_translation_table(
    policies: list[PolicyResult], effects: dict[str, Any], labels: dict[str, str]
) -> str:
    """Return the table: success per trial group with 95 % intervals, then the contrasts."""
    lines = [f"{'policy':<52} {'nominal':>16} {'shifted':>16} {'all':>16}"]
    for policy in policies:
        cells = []
        for group in (NOMINAL, SHIFTED, ALL):
            result = policy.groups.get(group)
            if not policy.ran or result is None:
                cells.append("not run")
                continue
            low, high = result.ci95
            cells.append(f"{100 * result.rate:3.0f}% [{100 * low:.0f},{100 * high:.0f}]")
        lines.append(
            f"{labels.get(policy.name, policy.name):<52} " + " ".join(f"{c:>16}" for c in cells)
        )
    lines.append("")
    lines.append("contrasts, points [95 % CI]:")
    for label in effects.get(ALL, {}):
        parts = []
        for group in (NOMINAL, SHIFTED, ALL):
            effect = effects[group].get(label)
            if effect is None:
                parts.append("-")
                continue
            low, high = effect["ci95_points"]
            parts.append(f"{effect['points']:+.0f} [{low:+.0f},{high:+.0f}]")
        lines.append(f"  {label:<50} " + " ".join(f"{p:>16}" for p in parts))
    return "\n".join(lines)


def plot_translation(
    policies: list[PolicyResult], plan: TranslationPlan, config: Any, path: Path
) -> Path:
    """Bars of success per policy and trial group with 95 % intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 4.5))
    groups = (NOMINAL, SHIFTED, ALL)
    width = 0.8 / len(groups)
    for offset, group in enumerate(groups):
        rates, lows, highs = [], [], []
        for policy in policies:
            result = policy.groups.get(group) if policy.ran else None
            rate = result.rate if result else 0.0
            low, high = result.ci95 if result else (0.0, 0.0)
            rates.append(100 * rate)
            lows.append(100 * (rate - low))
            highs.append(100 * (high - rate))
        positions = [i + (offset - 1) * width for i in range(len(policies))]
        axes.bar(positions, rates, width, yerr=[lows, highs], capsize=2, label=group)
    axes.set_xticks(range(len(policies)))
    axes.set_xticklabels(
        ["\n".join(textwrap.wrap(_label(p.name, plan, config), 18)) for p in policies],
        fontsize=7,
    )
    axes.set_ylabel("success (%)")
    axes.set_ylim(0, 100)
    axes.set_title("visual translation: success on the real twin (95 % intervals)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def run_translation(
    session: ExperimentSession, plan: TranslationPlan, command: str
) -> list[PolicyResult]:
    """Run (or resume) the translation experiment; write its results; return the policies."""
    started = time.perf_counter()
    config = session.config
    session.directory.mkdir(parents=True, exist_ok=True)
    dump_yaml(config.model_dump(mode="json"), session.directory / "experiment.yaml")
    artifact = ground_if_needed(session)
    real = real_demos(session)
    few: DatasetProduct | Unavailable = real
    if isinstance(real, DatasetProduct):
        few = first_demonstrations(session, real, plan.few_real_demos, FEW_REAL)
    policies: list[PolicyResult] = []
    scores: dict[str, Any] = {}
    if isinstance(real, Unavailable) or isinstance(few, Unavailable):
        reason = real.reason if isinstance(real, Unavailable) else getattr(few, "reason", "")
        policies = [PolicyResult.not_run(n, reason) for n in policy_names(config)]
    else:
        translator = train_translator_stage(session, plan, few)
        unseen = _unseen_real_episodes(real, few)
        policies.append(_policy_result(session, REAL_ONLY, real, None))
        policies.append(_policy_result(session, FEW_REAL, few, None))
        for c in config.configurations:
            sim = simulated(session, c, few, artifact)
            translated: DatasetProduct | Unavailable = (
                translator if isinstance(translator, Unavailable) else sim
            )
            if isinstance(sim, DatasetProduct) and isinstance(translator, Path):
                translated = translate_stage(session, c, sim, translator)
                if unseen:
                    score = score_stage(
                        session, c, sim, translator, real, unseen, plan.score_frames
                    )
                    scores[c] = score if isinstance(score, dict) else {"not_run": score.reason}
            for name, data in ((c, sim), (f"{c}{TRANSLATED_SUFFIX}", translated)):
                if isinstance(data, Unavailable):
                    policies.append(PolicyResult.not_run(name, data.reason))
                else:
                    policies.append(_policy_result(session, name, few, data))
    by_name = {p.name: p for p in policies}
    effects = contrasts(by_name, list(config.configurations))
    labels = {p.name: _label(p.name, plan, config) for p in policies}
    table = format_translation_table(policies, effects, labels)
    stage_wall_s = session.state.stage_wall_s
    summary = {
        "commit": session.commit,
        "command": command,
        "evaluator": config.evaluator,
        "twin_config": config.twin_config,
        "wall_s": round(sum(stage_wall_s.values()), 1) if stage_wall_s else None,
        "session_wall_s": time.perf_counter() - started,
        "stage_wall_s": stage_wall_s,
        "stage_commit": session.state.stage_commit,
        "plan": plan.model_dump(mode="json"),
        "policies": {
            p.name: (dict(p.conditions) if p.ran else {"not_run": p.reason}) for p in policies
        },
        "labels": labels,
        "configurations": list(config.configurations),
        "execution": session.state.execution,
        "effects": effects,
        "translation_scores": {
            c: {k: v for k, v in s.items() if k != "contact_sheet_rows"} for c, s in scores.items()
        },
    }
    target = session.directory
    (target / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (target / "table.txt").write_text(table + "\n")
    (target / "command.txt").write_text(command + "\n")
    plot_translation(policies, plan, config, target / "results.png")
    session.log("")
    session.log(table)
    session.log("")
    session.log(f"reproduce: {command}")
    return policies


def pool_records(
    records: list[dict[str, Any]],
) -> tuple[list[PolicyResult], dict[str, Any], str]:
    """Pool translation records (seeds or cells): policies, their contrasts and the table.

    Raises:
        SystemExit: Records that name other policies, or a policy that did not run.

    """
    names = list(records[0]["policies"])
    for record in records[1:]:
        if list(record["policies"]) != names:
            raise SystemExit(f"records name other policies: {names} vs {list(record['policies'])}")
    policies = [PolicyResult(name=name, groups=pooled_groups(records, name)) for name in names]
    configurations = [
        name
        for name in names
        if name not in (REAL_ONLY, FEW_REAL) and TRANSLATED_SUFFIX not in name
    ]
    effects = contrasts({p.name: p for p in policies}, configurations)
    return policies, effects, format_translation_table(policies, effects, records[0]["labels"])
