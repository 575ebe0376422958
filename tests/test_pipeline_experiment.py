"""The pipeline's experiment: caching, presets, the smoke pipeline, unavailable inputs.

Stage caching, presets and the reproduce command, the smoke pipeline end to end (with a cached
rerun), inputs that cannot be produced.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner
from r2s2r_policy.experiment import ExperimentConfig, load_preset

import r2s2r.pipeline.experiment as runner_module
from r2s2r.cli.experiment import config_from_options, experiment_command, reproduce_command
from r2s2r.graph import load_graph, parse_launch_arguments, resolve_graph
from r2s2r.pipeline.cache import StageError, StageRunner, current_commit
from r2s2r.pipeline.experiment import run_experiment

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src/r2s2r_policy/test"))

from experiment_fixtures import write_robot_dataset  # noqa: E402


def test_stage_runner_skips_up_to_date_stages_and_resumes_partial_ones(tmp_path: Path) -> None:
    calls: list[str] = []

    def body(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        calls.append(folder.name)
        partial = folder / "partial.txt"
        previous = partial.read_text() if partial.exists() else ""
        partial.write_text(previous + "x")
        out = folder / "out.txt"
        out.write_text("done")
        return {"out": str(out)}, {"partial": partial.read_text()}

    runner = StageRunner(tmp_path)
    first = runner.run("a", {"n": 1, "size": 3}, body, resume_inputs={"n": 1})
    again = runner.run("a", {"n": 1, "size": 3}, body, resume_inputs={"n": 1})
    assert not first.cached and again.cached and calls == ["a"]
    assert runner.ran == ["a"] and runner.skipped == ["a"]
    # A changed input re-runs; unchanged resume inputs keep partial outputs.
    grown = runner.run("a", {"n": 1, "size": 4}, body, resume_inputs={"n": 1})
    assert not grown.cached and grown.record.info["partial"] == "xx"
    # Changed resume inputs empty the folder first.
    fresh = runner.run("a", {"n": 2, "size": 4}, body, resume_inputs={"n": 2})
    assert fresh.record.info["partial"] == "x"
    # A deleted output re-runs the stage.
    Path(fresh.outputs["out"]).unlink()
    assert not runner.run("a", {"n": 2, "size": 4}, body, resume_inputs={"n": 2}).cached
    assert len(calls) == 4

    def failing(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        raise StageError("no cell")

    with pytest.raises(StageError, match="no cell"):
        runner.run("b", {"n": 1}, failing)
    assert not (tmp_path / "b" / "stage.json").exists()
    # A stage keeps the commit of the code that made it; a cached one is not re-attributed.
    by_old_code = StageRunner(tmp_path, commit="1" * 40).run("c", {"n": 1}, body)
    cached_later = StageRunner(tmp_path, commit="2" * 40).run("c", {"n": 1}, body)
    assert by_old_code.record.commit == "1" * 40
    assert cached_later.cached and cached_later.record.commit == "1" * 40


@pytest.mark.graph  # runs git
def test_current_commit_marks_uncommitted_changes(tmp_path: Path) -> None:
    assert current_commit(tmp_path) == ""  # not a git checkout

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "preset.yaml").write_text("palm: false\n")
    git("add", "preset.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "preset")
    clean = current_commit(tmp_path)
    assert len(clean) == 40
    (tmp_path / "untracked.txt").write_text("run output")  # untracked files do not count
    assert current_commit(tmp_path) == clean
    (tmp_path / "preset.yaml").write_text("palm: true\n")  # an edited tracked file does
    assert current_commit(tmp_path) == clean + "-dirty"


def test_presets_and_reproduce_command_round_trip(tmp_path: Path) -> None:
    reduced, paper, smoke = (load_preset(n) for n in ("reduced", "paper", "smoke"))
    assert (reduced.real_demos, reduced.sim_episodes_per_configuration) == (20, 200)
    assert (paper.real_demos, paper.sim_episodes_per_configuration) == (100, 1500)
    assert sum(reduced.trials_per_condition.values()) == 50
    assert reduced.trials_per_condition["nominal"] == 24
    assert smoke.train_steps <= 20 and sum(smoke.trials_per_condition.values()) == 8
    options = {
        "preset": "reduced",
        "smoke": False,
        "config_path": None,
        "real_demos": 7,
        "sim_episodes": 30,
        "steps": 11,
        "image_px": 48,
        "batch_size": None,
        "sim_ratio": 0.25,
        "seed": 5,
        "workers": None,
        "trials": ("nominal=3", "lighting=2"),
        "configurations": ("nominal_planner",),
        "ros": True,
        "real_time_factor": None,
        "twin_config": None,
        "real_dataset": str(tmp_path / "real.hdf5"),
        "artifact": None,
        "sim_datasets": (f"nominal_planner={tmp_path / 'np.hdf5'}",),
    }
    config = config_from_options(**options)  # type: ignore[arg-type]
    command = reproduce_command(config, tmp_path / "exp")
    assert command.startswith(f"r2s2r experiment --out {tmp_path / 'exp'} --preset reduced")
    context = experiment_command.make_context("experiment", shlex.split(command)[2:])
    skip = ("out_dir", "no_progress", "publish", "publish_name")
    params = {k: v for k, v in context.params.items() if k not in skip}
    assert config_from_options(**params) == config
    # Fields no option covers: the command names the saved experiment.yaml.
    custom = config.model_copy(update={"demo_seed": 9})
    assert "--config" in reproduce_command(custom, tmp_path / "exp")
    bad = CliRunner().invoke(experiment_command, ["--trials", "nominal"])
    assert bad.exit_code != 0 and "NAME=COUNT" in bad.output


# ---- the pipeline end to end --------------------------------------------------------------


GROUNDING_FIXTURE = REPO / "tests" / "data" / "grounding_default_twin.yaml"
"""``r2s2r ground``'s artifact of the shipped twin (grounded in process)."""


def short_twin(tmp_path: Path, timeout_s: float = 0.5) -> Path:
    """The shipped twin with a short trial limit and the object arriving at once."""
    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["task"]["trial_timeout_s"] = timeout_s
    data["randomization"]["arrival_time_s"] = [0.0, 0.0]
    path = tmp_path / "short_twin.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture()
def smoke_config(tmp_path: Path) -> ExperimentConfig:
    torch.set_num_threads(1)
    data = tmp_path / "data"
    data.mkdir()
    sims = {
        name: str(write_robot_dataset(data / f"{name}.hdf5", "sim", seed))
        for seed, name in enumerate(
            ["grounded_mimicgen", "grounded_planner", "nominal_mimicgen", "nominal_planner"], 1
        )
    }
    return load_preset("smoke").model_copy(
        update={
            "real_dataset": str(write_robot_dataset(data / "real.hdf5", "real", 0)),
            "sim_datasets": sims,
            "train_steps": 4,
            "batch_size": 4,
            "trials_per_condition": {
                "nominal": 1,
                "lighting": 1,
                "belt_speed": 1,
                "unseen_object": 1,
            },
            "twin_config": str(short_twin(tmp_path)),
            "capacity_trials": 1,
            "capacity_world": str(short_twin(tmp_path)),
        }
    )


@pytest.mark.graph
def test_smoke_pipeline_end_to_end_and_cached_rerun(
    tmp_path: Path, smoke_config: ExperimentConfig
) -> None:
    out = tmp_path / "exp"
    lines: list[str] = []
    results = run_experiment(smoke_config, out, "r2s2r experiment ...", lines.append, False)
    names = [p.name for p in results.policies]
    assert names == [
        "real_only",
        "grounded_mimicgen",
        "grounded_planner",
        "nominal_mimicgen",
        "nominal_planner",
    ]
    for policy in results.policies:
        assert policy.ran, policy.reason
        assert policy.groups["all"].trials == 4
        assert policy.groups["nominal"].trials == 1 and policy.groups["shifted"].trials == 3
        assert (Path(policy.checkpoint) / "model.safetensors").is_file()
    # Four co-trained policies ran: both main effects exist (whatever their values).
    assert results.effects["all"].world is not None
    assert results.effects["all"].behavior is not None
    for kind in ("results.json", "results.png", "table.txt", "command.txt", "experiment.yaml"):
        assert (out / kind).is_file(), kind
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"
    table = (out / "table.txt").read_text()
    assert "real + grounded world, mimicgen" in table and "world (main)" in table
    saved = json.loads((out / "results.json").read_text())
    trained = saved["metadata"]["training"]
    assert set(trained) == {*names, "capacity"}
    assert all(t["steps"] == 4 for t in trained.values())
    # Same real demos and seed for every policy; co-trained ones add their own sim dataset.
    configs = [
        yaml.safe_load((out / "policies" / n / "train_config.yaml").read_text()) for n in names
    ]
    assert {c["real_dataset"] for c in configs} == {smoke_config.real_dataset}
    assert {c["seed"] for c in configs} == {smoke_config.seed}
    assert configs[0]["sim_ratio"] == 0.0 and configs[1]["sim_dataset"].endswith(
        "grounded_mimicgen.hdf5"
    )
    assert not (out / "demos").exists() and not (out / "grounding").exists()
    # The capacity check: sim data alone, evaluated in its own world; and the summary record.
    assert results.capacity is not None and results.capacity.ran
    capacity_config = yaml.safe_load(
        (out / "policies" / "capacity" / "train_config.yaml").read_text()
    )
    assert capacity_config["sim_ratio"] == 1.0 and capacity_config["real_dataset"] is None
    summary = json.loads((out / "summary.json").read_text())
    assert summary["capacity"]["trials"] == 1 and summary["command"] == "r2s2r experiment ..."
    # The wall time is the stages' (what making the results took), this session's beside it.
    assert summary["wall_s"] == pytest.approx(sum(summary["stage_wall_s"].values()), abs=0.1)
    # (wall_s is rounded to 0.1 s in the record, session_wall_s is not.)
    assert 0 < summary["wall_s"] <= summary["session_wall_s"] + 0.05
    assert set(summary["policies"]) == set(names)
    # The code that ran is named, the same one for every stage this session ran.
    assert summary["commit"] == current_commit(Path(runner_module.__file__).parent)
    assert set(summary["stage_commit"].values()) == {summary["commit"]}
    for conditions in summary["policies"].values():
        assert set(conditions) == {"nominal", "lighting", "belt_speed", "unseen_object"}
        for entry in conditions.values():
            assert entry["trials"] == 1
            assert entry["successes"] + sum(entry["failures"].values()) == 1

    # The console: each stage once as running, then done in N s; one count per evaluation,
    # not a line per trial.
    ran = results.metadata["stages_run_this_session"]
    stage_lines = [line for line in lines if line.startswith("[")]
    for stage in ran:
        mine = [line for line in stage_lines if line.startswith(f"[{stage}] ")]
        assert mine[0] == f"[{stage}] running", lines
        assert sum(line.startswith(f"[{stage}] done in ") for line in mine) == 1, lines
    assert not [line for line in lines if " trial " in line], lines

    # Second run, same inputs: no stage does any work, same table.
    lines.clear()
    again = run_experiment(smoke_config, out, "r2s2r experiment ...", lines.append, False)
    assert again.metadata["stages_run_this_session"] == []
    assert len(again.metadata["stages_skipped_this_session"]) == 12
    assert again.table() == results.table()
    # A cached rerun (e.g. one that only publishes) keeps the wall time of the stages.
    assert again.summary()["wall_s"] == summary["wall_s"]
    assert again.summary()["session_wall_s"] < summary["wall_s"]
    # Its console: one line per stage, then the table.
    assert [line for line in lines if line.startswith("[")] == [
        f"[{stage}] up to date" for stage in again.metadata["stages_skipped_this_session"]
    ], lines

    # The command line, same inputs but a changed protocol: only the evaluations re-run.
    args = ["--smoke", "--out", str(out), "--steps", "4", "--batch-size", "4", "--no-progress"]
    args += ["--real-dataset", smoke_config.real_dataset, "--trials", "nominal=1"]
    args += ["--twin-config", smoke_config.twin_config]
    for name, path in smoke_config.sim_datasets.items():
        args += ["--sim-dataset", f"{name}={path}"]
    result = CliRunner().invoke(experiment_command, args)
    assert result.exit_code == 0, result.output
    third = json.loads((out / "results.json").read_text())
    ran = third["metadata"]["stages_run_this_session"]
    # The capacity check's own world and trials are the preset's: its evaluation re-runs too.
    assert sorted(ran) == sorted(f"evaluation/{n}" for n in [*names, "capacity"])
    assert all(p["groups"]["all"]["trials"] == 1 for p in third["policies"])
    assert "world (main)" in result.output and "reproduce: r2s2r experiment" in result.output
    assert third["command"] == (out / "command.txt").read_text().strip()
    assert "--preset smoke" in third["command"] and "--trials nominal=1" in third["command"]


def test_validation_seeds_of_the_execution_selection_stay_apart_from_the_evaluation() -> None:
    reduced = load_preset("reduced").model_dump()
    ExperimentConfig.model_validate(reduced | {"execution_selection_trials": 20})
    with pytest.raises(ValueError, match="overlap the evaluation"):
        ExperimentConfig.model_validate(
            reduced | {"execution_selection_trials": 20, "validation_base_seed": 10_040}
        )


@pytest.mark.graph
def test_execution_is_chosen_per_policy_on_validation_seeds(
    tmp_path: Path, smoke_config: ExperimentConfig
) -> None:
    config = ExperimentConfig.model_validate(
        smoke_config.model_dump()
        | {"configurations": ["nominal_planner"], "execution_selection_trials": 1}
    )
    out = tmp_path / "exp"
    results = run_experiment(config, out, "r2s2r experiment ...", lambda line: None, False)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["execution"]) == {"capacity", "real_only", "nominal_planner"}
    for name, entry in summary["execution"].items():
        selection = json.loads((out / "selection" / name / "selection.json").read_text())
        counts = selection["validation_successes"]
        assert list(counts) == ["temporal_ensemble", "receding_3"]  # the preset's first
        assert all(trials == 1 for _, trials in counts.values())
        best = max(counts, key=lambda label: counts[label][0])
        assert selection["chosen"] == best and entry["chosen"] == selection["settings"]
        assert selection["validation_base_seed"] == config.validation_base_seed
        evaluated = json.loads((out / "evaluation" / name / "evaluation.json").read_text())
        assert evaluated["metadata"]["execution"] == entry["chosen"]["execution"]
        # The line that deploys this checkpoint as evaluated, valid for the real_deploy graph.
        launch, _, arguments = entry["deploy"].partition(" real_deploy.launch.py ")
        assert launch == "ros2 launch r2s2r"
        values = parse_launch_arguments(shlex.split(arguments))
        policy = {n.name: n for n in resolve_graph(load_graph("real_deploy"), values)}[
            "policy_inference"
        ].parameter_overrides
        assert Path(str(policy["checkpoint_path"])).is_relative_to(
            (out / "policies" / name).resolve()
        )
        assert policy["execution"] == entry["chosen"]["execution"]
        assert policy["executed_steps"] == entry["chosen"]["executed_steps"]
        assert policy["image_height_px"] == config.image_px
    assert "selection/real_only" in results.metadata["stages_run_this_session"]
    again = run_experiment(config, out, "r2s2r experiment ...", lambda line: None, False)
    assert again.metadata["stages_run_this_session"] == []
    assert again.summary()["execution"] == summary["execution"]


@pytest.mark.graph
def test_unavailable_inputs_are_reported_not_faked(
    tmp_path: Path, smoke_config: ExperimentConfig
) -> None:
    fail = [sys.executable, "-c", "import sys; print('no cell'); sys.exit(4)"]
    # The ground command stands in for `r2s2r ground`: it writes a real artifact (of the
    # default twin) where the experiment asks.
    ground = [
        sys.executable,
        "-c",
        "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])",
        str(GROUNDING_FIXTURE),
        "{artifact}",
    ]
    # The demos command records its command line, to show the cell it ran was grounded.
    make_demos = [
        sys.executable,
        "-c",
        f"import sys; sys.path.insert(0, {str(REPO / 'src/r2s2r_policy/test')!r}); "
        "from experiment_fixtures import write_robot_dataset; from pathlib import Path; "
        "write_robot_dataset(Path(sys.argv[1]) / 'dataset.hdf5', 'real', int(sys.argv[2])); "
        "(Path(sys.argv[1]) / 'argv.txt').write_text(' '.join(sys.argv[3:]))",
        "{out_dir}",
        "{seed}",
        "--artifact",
        "{artifact}",
    ]
    config = smoke_config.model_copy(
        update={
            "real_dataset": "",
            "demos_command": make_demos,
            "sim_datasets": {"nominal_planner": smoke_config.sim_datasets["nominal_planner"]},
            "configurations": ["nominal_planner"],
            "ground_command": ground,
            "trials_per_condition": {"nominal": 1},
        }
    )
    lines: list[str] = []
    results = run_experiment(config, tmp_path / "exp", "", lines.append, False)
    by_name = {p.name: p for p in results.policies}
    assert by_name["real_only"].ran and by_name["nominal_planner"].ran
    # Ground first, then record on the grounded cell, then evaluate on it.
    demos_args = (tmp_path / "exp" / "demos" / "argv.txt").read_text()
    artifact = tmp_path / "exp" / "grounding" / "artifact.yaml"
    assert demos_args == f"--artifact {artifact}"
    evaluation = json.loads(
        (tmp_path / "exp" / "evaluation" / "real_only" / "evaluation.json").read_text()
    )
    assert evaluation["metadata"]["perception_knowledge"] == f"grounding artifact {artifact}"
    assert (tmp_path / "exp" / "demos" / "dataset.hdf5").is_file()
    assert results.effects["all"].world is None

    # Grounding fails: nothing is recorded on an ungrounded cell, and nothing is faked.
    ungrounded = config.model_copy(
        update={"ground_command": fail, "configurations": ["grounded_planner", "nominal_planner"]}
    )
    none = run_experiment(ungrounded, tmp_path / "exp3", "", lines.append, False)
    for policy in none.policies:
        assert not policy.ran and policy.groups == {}
        assert "grounding artifact not produced" in policy.reason, policy.reason
        assert "exited with 4" in policy.reason
    assert not (tmp_path / "exp3" / "demos").exists()
    assert "NOT RUN" in (tmp_path / "exp3" / "table.txt").read_text()

    # No real demonstrations at all: nothing is trained.
    no_demos = config.model_copy(update={"demos_command": fail, "demo_seed": 1})
    nothing = run_experiment(no_demos, tmp_path / "exp2", "", lines.append, False)
    assert not any(p.ran for p in nothing.policies)
    assert all("real demonstrations not recorded" in p.reason for p in nothing.policies)
    # Only the capacity check, which needs no real data, trained.
    assert [p.name for p in (tmp_path / "exp2" / "policies").iterdir()] == ["capacity"]
