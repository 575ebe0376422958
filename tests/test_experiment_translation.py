"""The visual-translation preset: few real demos + translated sim, end to end on tiny data.

The preset's policies (all real, few real, few real + rendered and + translated sim of each
configuration) are trained and evaluated; the translator is trained on the few real demos only
and scored against the real demos it never saw; the translated datasets keep the sim data's
labels; the results name the finding's contrasts; a rerun reuses every stage.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from r2s2r_testing.episodes import write_robot_dataset

from r2s2r.experiment.analysis import read_finished
from r2s2r.experiment.config import ExperimentConfig, TranslationPlan, load_preset, real_reference
from r2s2r.experiment.runner import open_session
from r2s2r.experiment.translation import pool_records, run_translation
from r2s2r_dataset import EpisodeDataset


def test_the_translation_preset_is_the_papers_design() -> None:
    preset = load_preset("translation")
    reduced = load_preset("reduced")
    assert preset.translation is not None
    assert (preset.real_demos, preset.translation.few_real_demos) == (100, 25)
    assert preset.sim_episodes_per_configuration == 75
    assert preset.configurations == ["grounded_mimicgen", "grounded_planner"]
    assert preset.trials_per_condition == reduced.trials_per_condition
    assert preset.twin_config == "twin/default_appearance.yaml"
    assert reduced.translation is None


@pytest.mark.graph
def test_few_real_and_translated_sim_end_to_end(
    tmp_path: Path, smoke_config: ExperimentConfig
) -> None:
    real = write_robot_dataset(
        tmp_path / "real8.hdf5", "real", 0, episodes=8, frames=48, images="blocks"
    )
    sims = {
        name: str(
            write_robot_dataset(tmp_path / f"{name}.hdf5", "sim", seed, frames=12, images="blocks")
        )
        for seed, name in enumerate(["grounded_mimicgen", "grounded_planner"], 1)
    }
    config = smoke_config.model_copy(
        update={
            "real_dataset": str(real),
            "real_demos": 8,
            "configurations": ["grounded_mimicgen", "grounded_planner"],
            "capacity_configuration": "",
            "sim_datasets": sims,
            "trials_per_condition": {"nominal": 1, "lighting": 1},
            "translation": TranslationPlan(few_real_demos=4, translator_steps=5, score_frames=20),
        }
    )
    out = tmp_path / "exp"
    lines: list[str] = []
    policies = run_translation(
        open_session(config, out, lines.append, False), config.translation, "cmd"
    )
    expected = [
        ("real_only", True),
        ("few_real", True),
        ("grounded_mimicgen", True),
        ("grounded_mimicgen_translated", True),
        ("grounded_planner", True),
        ("grounded_planner_translated", True),
    ]
    assert [(p.name, p.ran) for p in policies] == expected
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["labels"]["grounded_planner_translated"] == "4 real + 2 translated grounded_planner"
    )
    assert "grounded_mimicgen_translated - real_only" in summary["effects"]["all"]
    scores = summary["translation_scores"]["grounded_planner"]
    assert scores["real_episodes"] == [4, 5, 6, 7]  # the demos the translator never saw
    head = scores["cameras"]["head_camera_rgb"]
    assert set(head) >= {"rendered", "translated", "warping_error"}
    assert (out / "translation" / "score_grounded_planner" / "contact_sheet.png").stat().st_size > 0
    translator = json.loads(
        (out / "translation" / "translator" / "translator" / "translator.json").read_text()
    )
    assert translator["trained_on"]["dataset"] == str((out / "few_real" / "dataset.hdf5").resolve())
    with (
        EpisodeDataset(sims["grounded_planner"]) as source,
        EpisodeDataset(out / "translation" / "grounded_planner" / "dataset.hdf5") as translated,
    ):
        assert np.array_equal(source.episode(0).actions, translated.episode(0).actions)
        assert translated.episode(0).images["head_camera_rgb"].shape[1:] == (32, 32, 3)
    assert "contrasts, points" in (out / "table.txt").read_text()
    # r2s2r analyze reads it: the co-trained policies against the few real demos they share.
    finished = read_finished(out)
    assert list(finished.policies) == [name for name, _ in expected]
    co_trained = [p.name for p in finished.policies.values() if p.configuration is not None]
    assert co_trained == [name for name, _ in expected[2:]]
    assert real_reference(finished.config) == "few_real"
    again: list[str] = []
    run_translation(open_session(config, out, again.append, False), config.translation, "cmd")
    assert not any("running" in line for line in again), again


def test_runs_pool_into_one_table_with_the_contrasts() -> None:
    def record(commit: str, successes: dict[str, int]) -> dict[str, object]:
        policies = {
            name: {
                "nominal": {"successes": s, "trials": 24},
                "lighting": {"successes": s // 3, "trials": 9},
            }
            for name, s in successes.items()
        }
        return {
            "commit": commit,
            "plan": {},
            "policies": policies,
            "labels": {n: n for n in policies},
        }

    counts = {
        "real_only": 20,
        "few_real": 10,
        "grounded_planner": 12,
        "grounded_planner_translated": 18,
    }
    policies, effects, table = pool_records([record("a", counts), record("b", counts)])
    by_name = {p.name: p for p in policies}
    assert by_name["few_real"].groups["nominal"].successes == 20
    assert by_name["few_real"].groups["all"].trials == 66
    gain = effects["nominal"]["grounded_planner_translated - grounded_planner"]
    assert gain["points"] == pytest.approx(100 * (36 - 24) / 48)
    assert "grounded_planner_translated - real_only" in table
    with pytest.raises(SystemExit, match="other policies"):
        pool_records([record("a", counts), record("b", {"real_only": 1})])
