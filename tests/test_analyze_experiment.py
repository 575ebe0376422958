"""``r2s2r analyze experiment`` end to end on the smoke experiment (tiny trained policies)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from r2s2r.cli import main
from r2s2r.cli.analyze_experiment import analyze_experiment_command

pytestmark = pytest.mark.graph  # the smoke experiment's fixtures; git for the commit


def test_analyze_experiment_end_to_end(smoke_cli_rerun: Any, tmp_path: Path) -> None:
    out = smoke_cli_rerun.out
    args = [str(out), "--trials", "1", "--stride", "2", "--no-progress"]
    args += ["--publish", str(tmp_path / "results"), "--publish-name", "latent_smoke"]
    result = CliRunner().invoke(analyze_experiment_command, args)
    assert result.exit_code == 0, result.output
    report = out / "analysis" / "report"
    data = json.loads((report / "latent.json").read_text())
    co_trained = ["grounded_mimicgen", "grounded_planner", "nominal_mimicgen", "nominal_planner"]
    assert set(data["policies"]) == {"real_only", *co_trained}
    assert "attribution" not in data["policies"]["real_only"]  # the real reference itself
    for name in co_trained:
        row = data["policies"][name]
        assert row["rollout_steps"] > 0 and row["frames"]["real"] > 0 and row["frames"]["sim"] > 0
        for measure in ("knn_real_share", "probe_p_real", "behavior_real_likeness"):
            mean, low, high = row["attribution"][measure]["nominal"]
            assert 0.0 <= low <= mean <= high <= 1.0
        accuracy, low, high = row["probe_accuracy"]["mlp"]
        assert 0.0 <= low <= accuracy <= high <= 1.0 and row["probe_tested"] > 0
        for figure in row["figures"].values():
            assert (report / figure).read_bytes()[:4] == b"\x89PNG"
            assert (tmp_path / "results" / f"latent_smoke_{figure}").exists()
        # The sim-only reference was trained on that configuration's data alone.
        reference = out / "analysis" / "references" / name / "train_config.yaml"
        assert "sim_ratio: 1.0" in reference.read_text()
    assert (tmp_path / "results" / "latent_smoke.json").exists()
    assert "real_only" in (report / "table.txt").read_text()
    # A rerun finds every analysis stage up to date and rewrites only the report.
    again = CliRunner().invoke(analyze_experiment_command, args)
    assert again.exit_code == 0, again.output
    assert "running" not in again.output
    assert again.output.count("up to date") == 4 + 5 + 5  # references, rollouts, frames


def test_analyze_refuses_what_is_not_a_finished_experiment(
    smoke_cli_rerun: Any, tmp_path: Path, capsys: object
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "experiment", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and "no experiment.yaml" in err
    unfinished = tmp_path / "unfinished"
    shutil.copytree(smoke_cli_rerun.out, unfinished, ignore=shutil.ignore_patterns("analysis"))
    (unfinished / "policies" / "nominal_planner" / "stage.json").unlink()
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "experiment", str(unfinished)])
    assert exited.value.code == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "training of nominal_planner not finished" in err and err.count("\n") == 1
    assert not (unfinished / "analysis" / "report").exists()
