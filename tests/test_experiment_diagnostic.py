"""The diagnostic preset: one co-trained configuration on the first real demonstrations.

The experiment with a single configuration (``nominal_planner``) and no capacity check runs and
writes its table; a given real dataset with more successful demonstrations than ``real_demos``
is cut to the first ones; ``r2s2r analyze diagnostic`` records the policy's rollouts, keeps the
trials already recorded by the same policy, and refuses in one line what it cannot measure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from r2s2r_common.config import read_yaml
from r2s2r_testing.episodes import write_robot_dataset

from r2s2r.cli.analyze_diagnostic import analyze_diagnostic_command
from r2s2r.experiment.config import ExperimentConfig, load_preset
from r2s2r.experiment.diagnostic import DIAGNOSTIC_DIR, REPORT_FILE, RUN_FIRST, capped_protocol
from r2s2r.experiment.evaluation import evaluation_protocol
from r2s2r.experiment.runner import run_experiment
from r2s2r_dataset import EpisodeDataset


def test_the_diagnostic_preset_is_ten_demos_and_the_nominal_planner() -> None:
    preset = load_preset("diagnostic")
    reduced = load_preset("reduced")
    assert (preset.real_demos, preset.configurations) == (10, ["nominal_planner"])
    assert preset.sim_episodes_per_configuration == reduced.sim_episodes_per_configuration
    assert preset.capacity_configuration == ""
    same = ("train_steps", "image_px", "batch_size", "sim_ratio", "train_overrides", "execution")
    assert {k: getattr(preset, k) for k in same} == {k: getattr(reduced, k) for k in same}
    assert preset.trials_per_condition == reduced.trials_per_condition
    # --trials N caps each condition: the first N rounds of the interleaved plan.
    protocol = evaluation_protocol(preset)
    assert capped_protocol(protocol, 9).trials_per_condition == {
        "nominal": 9,
        "lighting": 9,
        "belt_speed": 9,
        "unseen_object": 8,
    }


def test_analyze_diagnostic_refuses_a_folder_without_the_policy(tmp_path: Path) -> None:
    result = CliRunner().invoke(analyze_diagnostic_command, [str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and RUN_FIRST in lines[0], result.output
    assert not (tmp_path / DIAGNOSTIC_DIR).exists()


@pytest.mark.graph
def test_one_configuration_on_the_first_demonstrations_then_its_rollouts(
    tmp_path: Path, smoke_config: ExperimentConfig
) -> None:
    real = write_robot_dataset(tmp_path / "real3.hdf5", "real", 0, episodes=3)
    config = smoke_config.model_copy(
        update={
            "real_dataset": str(real),
            "real_demos": 2,
            "configurations": ["nominal_planner"],
            "capacity_configuration": "",
            "sim_datasets": {"nominal_planner": smoke_config.sim_datasets["nominal_planner"]},
            "trials_per_condition": {"nominal": 2},
            "execution_selection_trials": 1,
        }
    )
    out = tmp_path / "exp"
    lines: list[str] = []
    results = run_experiment(config, out, "r2s2r experiment ...", lines.append, False)
    assert [(p.name, p.ran) for p in results.policies] == [
        ("real_only", True),
        ("nominal_planner", True),
    ]
    assert results.capacity is None and not (out / "policies" / "capacity").exists()
    effects = results.effects["all"]
    assert effects.world is None and effects.behavior is None
    assert list(effects.over_real_only) == ["nominal_planner"]
    assert "real + nominal world, planner" in (out / "table.txt").read_text()
    # Trained on the first 2 of the given 3 demonstrations, for both policies.
    subset = out / "real_subset" / "dataset.hdf5"
    with EpisodeDataset(subset) as reader:
        assert len(reader) == 2
    for policy in ("real_only", "nominal_planner"):
        trained = read_yaml(out / "policies" / policy / "train_config.yaml")
        assert trained["real_dataset"] == str(subset)

    # The analysis: rollouts recorded, then the 0.5 s trials are too short to measure.
    folder = out / DIAGNOSTIC_DIR / "rollouts"
    first = CliRunner().invoke(analyze_diagnostic_command, [str(out), "--no-progress"])
    assert first.exit_code == 1
    assert "no measurable trajectory in ['diagnostic']" in first.output.strip().splitlines()[-1]
    assert "recording 2 of 2 trials" in first.output
    assert sorted(p.name for p in folder.iterdir()) == [
        "trial_000.json",
        "trial_000.npz",
        "trial_001.json",
        "trial_001.npz",
    ]
    assert not (out / DIAGNOSTIC_DIR / REPORT_FILE).exists()  # nothing half-written
    # Resumable: only the missing trial runs again, filed under its own index and seed.
    kept = (folder / "trial_000.npz").stat().st_mtime_ns
    seed = json.loads((folder / "trial_001.json").read_text())["seed"]
    (folder / "trial_001.npz").unlink()
    again = CliRunner().invoke(analyze_diagnostic_command, [str(out), "--no-progress"])
    assert "recording 1 of 2 trials" in again.output, again.output
    assert (folder / "trial_000.npz").stat().st_mtime_ns == kept
    from r2s2r_policy.evaluation.rollouts import load_rollout

    redone = load_rollout(folder / "trial_001.npz")
    assert redone.trial_index == 1 and redone.trace.metadata["seed"] == seed
    assert not (folder / ".one_trial").exists()
