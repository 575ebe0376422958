"""The main job's prerequisites (ground, then record demos) with a fake command runner.

Missing → produced, present → reused (a file given from outside, or one this job made from the
same inputs: ``stage.json``), changed inputs → made again, failing → reported and its
configurations not run.
"""

import json
import sys
from pathlib import Path

import pytest
from r2s2r_common.errors import ExitCode
from r2s2r_datagen.config import GenerateConfig
from r2s2r_datagen.configurations import load_datagen_config

from r2s2r.pipeline.commands import command_runner
from r2s2r.pipeline.main_job import prepare_prerequisites, run_main_job
from r2s2r.pipeline.stages import ground_argv, runnable

GROUNDING_FIXTURE = Path(__file__).resolve().parent / "data" / "grounding_default_twin.yaml"
"""A real artifact (the shipped twin's) for the fake ``r2s2r ground`` to write."""
TWIN = Path(__file__).resolve().parents[1] / "config" / "twin" / "perturbed.yaml"


class FakeRunner:
    """Plays the commands: writes the output file (a real artifact for ground) or fails."""

    def __init__(self, code: int = 0, write: bool = True) -> None:
        self.code, self.write = code, write
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], timeout_s: float, log: Path) -> tuple[int, str]:
        self.commands.append(command)
        assert command[:3] == [sys.executable, "-m", "r2s2r.cli"] and timeout_s > 0
        if self.code == 0 and self.write:
            target = command[
                command.index("--dataset" if "--dataset" in command else "--output") + 1
            ]
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            if command[3] == "ground":
                Path(target).write_text(GROUNDING_FIXTURE.read_text())
            else:
                Path(target).write_text("written by the command\n")
            return 0, "bag2dataset → x: 6 converted (600 frames), 0 skipped {}, 0 errors"
        return self.code, "line 1\nrecord-demos: no episode converted; the dataset is empty"


class _WritesThenFails(FakeRunner):
    """``r2s2r ground`` that writes a partial artifact and exits 1 (steps failed)."""

    def __call__(self, command: list[str], timeout_s: float, log: Path) -> tuple[int, str]:
        target = Path(command[command.index("--output") + 1])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("schema_version: 1\n")
        return 1, "step belt failed: residual 17.8 %\nsome traceback line"


def _config(tmp_path: Path, configurations_file: Path, **fields: object) -> GenerateConfig:
    return GenerateConfig(
        configurations_path=str(configurations_file),
        output_dir=str(tmp_path / "run"),
        progress=False,
        demos_dataset_path=str(tmp_path / "demos" / "dataset.hdf5"),
        **fields,  # type: ignore[arg-type]
    )


def test_missing_demos_are_recorded_then_used(tmp_path: Path, configurations_file: Path) -> None:
    config = _config(
        tmp_path, configurations_file, prepare_demos=True, demos_episodes=4, demos_seed=9
    )
    datagen = load_datagen_config(configurations_file)
    runner = FakeRunner()
    report = prepare_prerequisites(config, datagen, tmp_path / "logs", lambda _: None, runner)
    dataset = tmp_path / "demos" / "dataset.hdf5"
    (command,) = runner.commands
    assert command[3:] == [
        "record-demos", "--out", str(dataset.parent), "--successes", "4", "--seed", "9",
        "--dataset", str(dataset), "--real-time-factor", "1.0", "--quiet",
    ]  # fmt: skip
    (step,) = report.steps
    assert step.status == "produced" and step.path == str(dataset)
    assert step.affects == ["grounded_mimicgen", "nominal_mimicgen"]
    assert "6 converted" in step.detail
    assert report.datagen.behavior_options["mimicgen"]["source_dataset"] == str(dataset)
    assert datagen.behavior_options == {}  # the loaded file's content is not changed


def test_present_demos_are_reused_without_recording(
    tmp_path: Path, configurations_file: Path
) -> None:
    dataset = tmp_path / "demos" / "dataset.hdf5"
    dataset.parent.mkdir()
    dataset.write_text("recorded earlier\n")
    config = _config(tmp_path, configurations_file, prepare_demos=True)
    runner = FakeRunner()
    report = prepare_prerequisites(
        config, load_datagen_config(configurations_file), tmp_path, lambda _: None, runner
    )
    assert runner.commands == []
    assert [s.status for s in report.steps] == ["present"]
    assert report.datagen.behavior_options["mimicgen"]["source_dataset"] == str(dataset)


def test_demos_this_job_made_are_cached_by_their_inputs(
    tmp_path: Path, configurations_file: Path
) -> None:
    datagen = load_datagen_config(configurations_file)
    config = _config(tmp_path, configurations_file, prepare_demos=True, demos_episodes=4)
    first = FakeRunner()
    (made,) = prepare_prerequisites(config, datagen, tmp_path, print, first).steps
    record = json.loads((tmp_path / "demos" / "stage.json").read_text())
    assert made.status == "produced" and record["inputs"]["episodes"] == 4
    assert record["outputs"] == {"dataset": str(tmp_path / "demos" / "dataset.hdf5")}

    again = FakeRunner()
    (cached,) = prepare_prerequisites(config, datagen, tmp_path, print, again).steps
    assert cached.status == "present" and again.commands == []
    assert "same inputs" in cached.detail

    more = config.model_copy(update={"demos_episodes": 5})
    runner = FakeRunner()
    (remade,) = prepare_prerequisites(more, datagen, tmp_path, print, runner).steps
    (command,) = runner.commands
    assert remade.status == "produced" and command[command.index("--successes") + 1] == "5"


def test_demos_another_tool_made_are_given_and_its_record_kept(
    tmp_path: Path, configurations_file: Path
) -> None:
    """An experiment's ``demos`` stage (its own record, other inputs) is never remade over.

    Found when bench_datagen, pointed at an experiment's dataset, removed that stage's record.
    """
    dataset = tmp_path / "demos" / "dataset.hdf5"
    dataset.parent.mkdir()
    dataset.write_text("recorded by an experiment\n")
    experiment_record = {
        "name": "demos",
        "inputs_hash": "be63c6ad",
        "inputs": {"episodes": 100, "seed": 0, "twin": "t", "command": ["r2s2r"], "artifact": "a"},
        "outputs": {"dataset": str(dataset)},
        "wall_s": 1709.0,
        "finished_unix_s": 0.0,
        "info": {},
        "commit": "12fc8b2",
    }
    record_text = json.dumps(experiment_record)
    (dataset.parent / "stage.json").write_text(record_text)
    config = _config(tmp_path, configurations_file, prepare_demos=True, demos_episodes=6)
    runner = FakeRunner()
    report = prepare_prerequisites(
        config, load_datagen_config(configurations_file), tmp_path, lambda _: None, runner
    )
    assert runner.commands == []
    assert [s.status for s in report.steps] == ["present"]
    assert (dataset.parent / "stage.json").read_text() == record_text
    assert dataset.read_text() == "recorded by an experiment\n"
    assert report.datagen.behavior_options["mimicgen"]["source_dataset"] == str(dataset)


def test_nothing_is_prepared_when_disabled_or_not_needed(
    tmp_path: Path, configurations_file: Path
) -> None:
    datagen = load_datagen_config(configurations_file)
    runner = FakeRunner()
    disabled = prepare_prerequisites(
        _config(tmp_path, configurations_file), datagen, tmp_path, print, runner
    )
    assert disabled.steps == [] and disabled.datagen is datagen
    planner_only = _config(
        tmp_path,
        configurations_file,
        configurations=["nominal_planner"],
        prepare_demos=True,
        prepare_grounding=True,
    )
    report = prepare_prerequisites(planner_only, datagen, tmp_path, print, runner)
    assert [s.status for s in report.steps] == ["not_needed", "not_needed"]
    assert report.notes() == [] and runner.commands == []


def test_failed_demos_are_reported_and_mimicgen_not_run(
    tmp_path: Path, configurations_file: Path
) -> None:
    config = _config(
        tmp_path, configurations_file, configurations=["nominal_mimicgen"], prepare_demos=True
    )
    summary = run_main_job(config, log=lambda _: None, runner=FakeRunner(code=1), commit="")
    assert summary.exit_code == ExitCode.NOTHING_DONE
    (note,) = [n for n in summary.notes if n.startswith("prerequisite demos")]
    assert "failed (exit code 1)" in note and "no episode converted" in note
    assert note.endswith(
        "nominal_mimicgen not run (log: "
        + str(tmp_path / "run" / "logs" / "record_demos.log")
        + ")"
    )
    assert any(n.startswith("nominal_mimicgen: not run: ") for n in summary.notes)
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert note in saved["notes"]
    steps = json.loads((tmp_path / "run" / "prerequisites.json").read_text())["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [("demos", "failed")]


def test_grounding_runs_ground_with_the_cell_and_sets_a_partial_artifact_aside(
    tmp_path: Path, configurations_file: Path
) -> None:
    artifact = tmp_path / "grounding" / "artifact.yaml"
    twin = tmp_path / "twin.yaml"
    config = _config(
        tmp_path,
        configurations_file,
        configurations=["grounded_planner"],
        prepare_grounding=True,
        grounding_artifact_path=str(artifact),
        cell_launch_args=[f"cell_file:={twin}"],
    )
    datagen = load_datagen_config(configurations_file)

    runner = FakeRunner()
    (step,) = prepare_prerequisites(config, datagen, tmp_path, print, runner).steps
    assert step.status == "produced" and artifact.is_file()
    assert runner.commands[-1][3:] == [
        "ground", "--output", str(artifact), "--launch", "real_deploy",
        "--launch-arg", f"cell_file:={twin}",
    ]  # fmt: skip
    artifact.unlink()

    partial_step = prepare_prerequisites(config, datagen, tmp_path, print, _WritesThenFails()).steps
    assert partial_step[0].status == "failed" and not artifact.exists()
    assert "step belt failed: residual" in partial_step[0].detail
    assert (artifact.parent / "artifact.failed.yaml").is_file()  # set aside, not used

    summary = run_main_job(
        config, log=lambda _: None, runner=FakeRunner(code=ExitCode.TIMEOUT), commit=""
    )
    assert summary.exit_code == ExitCode.NOTHING_DONE
    (note,) = [n for n in summary.notes if n.startswith("prerequisite grounding")]
    assert "failed (timed out)" in note
    assert any(n.startswith("grounded_planner: not run: ") for n in summary.notes)


def test_ground_command_passes_cell_launch_args_on() -> None:
    command = runnable(ground_argv(Path("/a.yaml"), ["x:=1", "y:=2"]))
    assert command[3:] == [
        "ground", "--output", "/a.yaml", "--launch", "real_deploy",
        "--launch-arg", "x:=1", "--launch-arg", "y:=2",
    ]  # fmt: skip


def test_the_console_gets_one_stage_line_per_step(
    tmp_path: Path, configurations_file: Path
) -> None:
    config = _config(
        tmp_path,
        configurations_file,
        prepare_demos=True,
        prepare_grounding=True,
        grounding_artifact_path=str(tmp_path / "grounding" / "artifact.yaml"),
    )
    said: list[str] = []
    prepare_prerequisites(
        config, load_datagen_config(configurations_file), tmp_path, said.append, FakeRunner()
    )
    # Ground first, then record on the grounded cell.
    assert said[0].startswith("[grounding] running: r2s2r ground against the twin (log ")
    assert said[1].startswith("[grounding] done in ")
    assert said[2].startswith("[demos] running: recording 6 demonstrations (log ")
    assert said[3].startswith("[demos] done in ")
    assert len(said) == 4, said

    again: list[str] = []
    runner = FakeRunner()
    prepare_prerequisites(
        config, load_datagen_config(configurations_file), tmp_path, again.append, runner
    )
    assert again == ["[grounding] up to date", "[demos] up to date"]
    assert runner.commands == []


def test_demos_are_recorded_on_the_grounded_cell(tmp_path: Path, configurations_file: Path) -> None:
    artifact = tmp_path / "grounding" / "artifact.yaml"
    config = _config(
        tmp_path,
        configurations_file,
        configurations=["nominal_mimicgen"],
        prepare_demos=True,
        prepare_grounding=True,
        grounding_artifact_path=str(artifact),
        cell_launch_args=[f"twin_config:={TWIN}"],
    )
    runner = FakeRunner()
    report = prepare_prerequisites(
        config, load_datagen_config(configurations_file), tmp_path, print, runner
    )
    assert [(s.name, s.status) for s in report.steps] == [
        ("grounding", "produced"),
        ("demos", "produced"),
    ]
    ground, record = runner.commands
    assert ground[3] == "ground" and record[3] == "record-demos"
    # On the grounded cell: record-demos --artifact (its grounded_cell_arguments).
    assert record[record.index("--artifact") + 1] == str(artifact)
    assert record[record.index("--launch-arg") + 1] == f"twin_config:={TWIN}"

    # Grounding fails: nothing is recorded on an ungrounded cell.
    failing = _config(
        tmp_path / "b",
        configurations_file,
        configurations=["nominal_mimicgen"],
        prepare_demos=True,
        prepare_grounding=True,
        grounding_artifact_path=str(tmp_path / "b" / "grounding" / "artifact.yaml"),
    )
    runner = FakeRunner(code=1)
    report = prepare_prerequisites(
        failing, load_datagen_config(configurations_file), tmp_path / "b", print, runner
    )
    assert [(s.name, s.status) for s in report.steps] == [
        ("grounding", "failed"),
        ("demos", "failed"),
    ]
    assert "not grounded" in report.steps[1].detail
    assert [c[3] for c in runner.commands] == ["ground"]


@pytest.mark.graph
def test_a_command_s_output_goes_to_its_log_once_and_only_problems_to_the_console(
    tmp_path: Path,
) -> None:
    lines = [
        "[INFO] [1796148686.58] [calibration]: intrinsics: rms 0.04 px",
        "[WARN] [1796148686.68] [calibration]: a view is out of reach",
        "[real_twin] WARN: belt slipping",
        "plain progress text",
    ]
    said: list[str] = []
    log = tmp_path / "ground.log"
    code, tail = command_runner(said.append, progress=False)(
        [sys.executable, "-m", "r2s2r_testing.stand_ins", "print-lines", *lines], 60.0, log
    )
    assert code == 0
    assert said == [
        "[grounding] WARN: a view is out of reach",
        "[grounding] [real_twin] WARN: belt slipping",
    ]
    text = log.read_text()
    for line in lines:
        assert text.splitlines().count(line) == 1, text
    assert tail.splitlines() == lines
