"""``r2s2r evaluate`` (the bring-up's verb) with the in-process evaluator."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import yaml
from click.testing import CliRunner, Result
from r2s2r_policy.checkpoint import save_checkpoint
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec, untrained_policy

from r2s2r.cli.evaluate import deployed_inference_config, evaluate_command

os.environ.setdefault("MUJOCO_GL", "egl")
REPO = Path(__file__).resolve().parents[1]


def short_twin(tmp_path: Path, timeout_s: float) -> Path:
    """The shipped twin with a short trial limit and the object arriving at once."""
    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["task"]["trial_timeout_s"] = timeout_s
    data["randomization"]["arrival_time_s"] = [0.0, 0.0]
    path = tmp_path / "short_twin.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def tiny_checkpoint(tmp_path: Path) -> Path:
    """An untrained 32 px checkpoint for this robot."""
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    return save_checkpoint(tmp_path / "ckpt", policy)


def evaluate_in_process_one_trial(
    tmp_path: Path, checkpoint: Path, timeout_s: float, *options: str
) -> Result:
    """``r2s2r evaluate CHECKPOINT --in-process`` on one nominal trial of a short twin."""
    return CliRunner().invoke(
        evaluate_command,
        [
            str(checkpoint),
            "--in-process",
            *options,
            "--trials",
            "nominal=1",
            "--twin-config",
            str(short_twin(tmp_path, timeout_s)),
            "--out",
            str(tmp_path / "out"),
        ],
    )


def test_evaluate_command_in_process(tmp_path: Path) -> None:
    checkpoint = tiny_checkpoint(tmp_path)
    result = evaluate_in_process_one_trial(tmp_path, checkpoint, 0.5)
    assert result.exit_code == 0, result.output
    assert "nominal" in result.output and (tmp_path / "out" / "evaluation.png").is_file()
    data = json.loads((tmp_path / "out" / "evaluation.json").read_text())
    assert data["summary"]["all"]["trials"] == 1
    bad = CliRunner().invoke(evaluate_command, [str(checkpoint), "--in-process", "--trials", "x"])
    assert bad.exit_code != 0 and "CONDITION=COUNT" in bad.output


def test_in_process_evaluation_executes_chunks_as_the_node_does(tmp_path: Path) -> None:
    node = yaml.safe_load((REPO / "config" / "nodes" / "policy_inference.yaml").read_text())
    params = node["policy_inference"]["ros__parameters"]
    deployed = deployed_inference_config()
    assert deployed.execution == params["execution"]
    assert deployed.executed_steps == params["executed_steps"]
    assert deployed.ensemble_weight_decay == params["ensemble_weight_decay"]
    chosen = deployed_inference_config("receding", 5)
    assert (chosen.execution, chosen.executed_steps) == ("receding", 5)
    checkpoint = tiny_checkpoint(tmp_path)
    result = evaluate_in_process_one_trial(
        tmp_path, checkpoint, 0.3, "--execution", "receding", "--executed-steps", "2"
    )
    assert result.exit_code == 0, result.output
    metadata = json.loads((tmp_path / "out" / "evaluation.json").read_text())["metadata"]
    assert (metadata["execution"], metadata["executed_steps"]) == ("receding", 2)
    # A running graph's node keeps its parameters: asking to change them is refused.
    refused = CliRunner().invoke(
        evaluate_command, [str(checkpoint), "--no-launch", "--execution", "receding"]
    )
    assert refused.exit_code == 2 and "keeps its own parameters" in refused.output
