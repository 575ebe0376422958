"""The pipeline's experiment: caching, presets, execution selection, unavailable inputs.

Stage caching, presets and the reproduce command, the execution chosen on validation seeds,
inputs that cannot be produced (the smoke pipeline end to end: tests/test_experiment_smoke_*).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from r2s2r_common.errors import Terminated
from r2s2r_testing.episodes import write_robot_dataset

from r2s2r.cli.experiment import experiment_command
from r2s2r.experiment.config import ExperimentConfig, load_preset
from r2s2r.experiment.options import config_from_options, reproduce_command
from r2s2r.experiment.runner import run_experiment
from r2s2r.graph import load_graph, parse_launch_arguments, resolve_graph
from r2s2r.pipeline.cache import StageError, StageRunner, current_commit, interrupted_note
from r2s2r.pipeline.commands import CommandRunner

REPO = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize(
    "stop", [KeyboardInterrupt(), Terminated("SIGTERM")], ids=["ctrl_c", "sigterm"]
)
def test_a_stopped_stage_stays_pending_and_says_how_to_resume(
    tmp_path: Path, stop: BaseException
) -> None:
    said: list[str] = []
    runner = StageRunner(tmp_path, said.append)

    def stopped(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        (folder / "part_1").write_text("finished work")
        raise stop

    with pytest.raises(type(stop)) as raised:
        runner.run("generation/x", {"n": 1, "size": 3}, stopped, resume_inputs={"n": 1})
    assert raised.value.__notes__ == [interrupted_note("generation/x")]
    assert "stage generation/x was interrupted" in interrupted_note("generation/x")
    assert not (tmp_path / "generation/x/stage.json").exists()
    assert (tmp_path / "generation/x/stage.pending").exists()

    def finish(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        assert (folder / "part_1").read_text() == "finished work"  # kept for the resume
        return {"part": str(folder / "part_1")}, {}

    said.clear()
    assert not runner.run("generation/x", {"n": 1, "size": 3}, finish, {"n": 1}).cached
    assert said[0] == "[generation/x] running (resuming)", said


def test_a_resumed_stage_counts_the_wall_time_of_every_sitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from r2s2r.pipeline import cache

    monkeypatch.setattr(cache, "CLOCK_PERIOD_S", 0.05)
    runner = StageRunner(tmp_path)
    clock = tmp_path / "training/x" / cache.CLOCK_RECORD

    def stopped(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        time.sleep(0.3)
        raise Terminated("SIGTERM")

    with pytest.raises(Terminated):
        runner.run("training/x", {"n": 1}, stopped)
    first = json.loads(clock.read_text())
    assert first["sittings"] == 1 and first["wall_s"] >= 0.3

    # A killed machine: the clock holds what its heartbeat last wrote, nothing more.
    def killed(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        time.sleep(0.3)
        before_kill = json.loads(clock.read_text())
        assert before_kill["sittings"] == 2 and before_kill["wall_s"] > first["wall_s"]
        raise SystemExit("killed")  # stands for SIGKILL: no handler, the clock as written

    with pytest.raises(SystemExit):
        runner.run("training/x", {"n": 1}, killed)
    second = json.loads(clock.read_text())

    def finish(folder: Path) -> tuple[dict[str, str], dict[str, object]]:
        (folder / "out").write_text("done")
        return {"out": str(folder / "out")}, {}

    outcome = runner.run("training/x", {"n": 1}, finish)
    assert outcome.record.sittings == 3
    assert outcome.record.wall_s >= second["wall_s"] >= 0.6
    assert not clock.exists()
    stored = json.loads((tmp_path / "training/x/stage.json").read_text())
    assert stored["sittings"] == 3 and stored["wall_s"] == outcome.record.wall_s
    # Different inputs start the count again.
    fresh = runner.run("training/x", {"n": 2}, finish)
    assert fresh.record.sittings == 1 and fresh.record.wall_s < 0.3


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


PAPER_SECONDS_PER_STEP = 0.06
"""Training step at the paper preset's size on the 2-core machine (config/experiment/paper.yaml):
18.6 ms measured on a quiet machine (results/learning_curve_paper_gm64.json), 3x for a loaded
one."""


def test_a_paper_scale_training_killed_loses_at_most_three_minutes() -> None:
    from r2s2r.experiment.products import DatasetProduct
    from r2s2r.experiment.training import train_config_for

    data = DatasetProduct("demos.hdf5", "real"), DatasetProduct("sim.hdf5", "sim")
    train = train_config_for(load_preset("paper"), *data)
    assert train["steps"] == 30000
    assert train["checkpoint_every_steps"] * PAPER_SECONDS_PER_STEP <= 180.0


def test_presets_and_reproduce_command_round_trip(tmp_path: Path) -> None:
    reduced, paper, smoke = (load_preset(n) for n in ("reduced", "paper", "smoke"))
    assert (reduced.real_demos, reduced.sim_episodes_per_configuration) == (20, 200)
    assert (paper.real_demos, paper.sim_episodes_per_configuration) == (100, 1500)
    assert sum(reduced.trials_per_condition.values()) == 50
    assert reduced.trials_per_condition["nominal"] == 24
    assert smoke.train_steps <= 20 and sum(smoke.trials_per_condition.values()) == 8
    options = {
        "real_demos": 7,
        "sim_episodes": 30,
        "steps": 11,
        "image_px": 48,
        "batch_size": None,
        "sim_ratio": 0.25,
        "seed": 5,
        "workers": None,
        "trials": ("nominal=3", "lighting=2"),
        "configuration": ("nominal_planner",),
        "ros": True,
        "real_time_factor": None,
        "twin_config": None,
        "real_dataset": str(tmp_path / "real.hdf5"),
        "artifact": None,
        "sim_dataset": (f"nominal_planner={tmp_path / 'np.hdf5'}",),
    }
    config = config_from_options("reduced", None, options)
    command = reproduce_command(config, tmp_path / "exp")
    assert command.startswith(f"r2s2r experiment --out {tmp_path / 'exp'} --preset reduced")
    context = experiment_command.make_context("experiment", shlex.split(command)[2:])
    assert config_from_options("reduced", None, context.params) == config
    # Fields no option covers: the command names the saved experiment.yaml.
    custom = config.model_copy(update={"demo_seed": 9})
    assert "--config" in reproduce_command(custom, tmp_path / "exp")
    bad = CliRunner().invoke(experiment_command, ["--trials", "nominal"])
    assert bad.exit_code != 0 and "NAME=COUNT" in bad.output


# ---- the pipeline end to end --------------------------------------------------------------


GROUNDING_FIXTURE = REPO / "tests" / "data" / "grounding_default_twin.yaml"
"""``r2s2r ground``'s artifact of the shipped twin (grounded in process)."""


def argument(command: list[str], option: str) -> str:
    """The value of ``option`` in a command line."""
    return command[command.index(option) + 1]


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
    commands: list[list[str]] = []

    def cell_commands(failing: tuple[str, ...] = ()) -> CommandRunner:
        """Stand in for `r2s2r ground` and `r2s2r record-demos`, or fail as a dead cell does.

        The ground command writes a real artifact (of the default twin) where the experiment
        asks; the demos command writes a real dataset.
        """

        def run(command: list[str], _timeout_s: float, _log: Path) -> tuple[int, str]:
            commands.append(command)
            verb = command[3]  # python -m r2s2r.cli VERB ...
            if verb in failing:
                return 4, "no cell"
            if verb == "ground":
                shutil.copy(GROUNDING_FIXTURE, argument(command, "--output"))
            else:
                out = Path(argument(command, "--out"))
                write_robot_dataset(out / "dataset.hdf5", "real", int(argument(command, "--seed")))
            return 0, "done"

        return run

    config = smoke_config.model_copy(
        update={
            "real_dataset": "",
            "sim_datasets": {"nominal_planner": smoke_config.sim_datasets["nominal_planner"]},
            "configurations": ["nominal_planner"],
            "trials_per_condition": {"nominal": 1},
        }
    )
    lines: list[str] = []
    results = run_experiment(config, tmp_path / "exp", "", lines.append, False, cell_commands())
    by_name = {p.name: p for p in results.policies}
    assert by_name["real_only"].ran and by_name["nominal_planner"].ran
    # Ground first, then record on the grounded cell, then evaluate on it.
    ground, demos = commands
    artifact = tmp_path / "exp" / "grounding" / "artifact.yaml"
    assert ground[3] == "ground" and argument(ground, "--output") == str(artifact)
    assert demos[3] == "record-demos" and argument(demos, "--artifact") == str(artifact)
    evaluation = json.loads(
        (tmp_path / "exp" / "evaluation" / "real_only" / "evaluation.json").read_text()
    )
    assert evaluation["metadata"]["perception_knowledge"] == f"grounding artifact {artifact}"
    assert (tmp_path / "exp" / "demos" / "dataset.hdf5").is_file()
    assert results.effects["all"].world is None

    # Grounding fails: nothing is recorded on an ungrounded cell, and nothing is faked.
    ungrounded = config.model_copy(
        update={"configurations": ["grounded_planner", "nominal_planner"]}
    )
    none = run_experiment(
        ungrounded, tmp_path / "exp3", "", lines.append, False, cell_commands(("ground",))
    )
    for policy in none.policies:
        assert not policy.ran and policy.groups == {}
        assert "grounding artifact not produced" in policy.reason, policy.reason
        assert "exited with 4" in policy.reason
    assert not (tmp_path / "exp3" / "demos").exists()
    assert "NOT RUN" in (tmp_path / "exp3" / "table.txt").read_text()

    # No real demonstrations at all: nothing is trained.
    no_demos = config.model_copy(update={"demo_seed": 1})
    nothing = run_experiment(
        no_demos, tmp_path / "exp2", "", lines.append, False, cell_commands(("record-demos",))
    )
    assert not any(p.ran for p in nothing.policies)
    assert all("real demonstrations not recorded" in p.reason for p in nothing.policies)
    # Only the capacity check, which needs no real data, trained.
    assert [p.name for p in (tmp_path / "exp2" / "policies").iterdir()] == ["capacity"]
