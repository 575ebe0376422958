"""Does the safety layer change a trained policy's outcomes? Its selection trials, run again.

An experiment's ``selection/<policy>`` stage ran the policy's checkpoint on validation trials
(nominal, seeds from ``validation_base_seed``) in process; this runs the chosen execution on the
same trials with today's engine (the safety layer on, its defaults) and prints both success
counts, every trial's reason and the safety layer's stops. The experiment's twin and grounding
artifact are used as its evaluation used them.

    python bench/safety_layer_outcomes.py --experiment /work/runs/translation_default \\
        --policy real_only [--twin-config twin/default_appearance.yaml]

The last line is one JSON object: {"benchmark": "safety_layer_outcomes", "figures": [...]}.
"""

from __future__ import annotations

import json
from pathlib import Path

import benchlib
import yaml
from r2s2r_policy.evaluation.in_process import evaluate_in_process
from r2s2r_policy.evaluation.trials import NOMINAL, EvaluationConfig
from r2s2r_policy.inference.engine import InferenceConfig


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--experiment", type=Path, required=True)
    parser.add_argument("--policy", required=True)
    args = parser.parse_args()
    run = args.experiment
    selection = json.loads((run / "selection" / args.policy / "selection.json").read_text())
    stage = json.loads((run / "policies" / args.policy / "stage.json").read_text())
    experiment = yaml.safe_load((run / "experiment.yaml").read_text())
    checkpoint = stage["outputs"]["checkpoint"]
    before, trials = selection["validation_successes"][selection["chosen"]]
    report = evaluate_in_process(
        checkpoint,
        EvaluationConfig(
            trials_per_condition={NOMINAL: trials}, base_seed=selection["validation_base_seed"]
        ),
        twin_config_path=experiment["twin_config"],
        inference=InferenceConfig(**selection["settings"]),
        grounding_artifact=run / "grounding" / "artifact.yaml",
    )
    after = sum(record.success for record in report.records)
    stops = [record for record in report.records if record.safety_stop]
    for record in report.records:
        stop = f" ({record.safety_stop})" if record.safety_stop else ""
        print(f"seed {record.seed}: {record.reason}{stop}")
    benchlib.report(
        "safety_layer_outcomes",
        [
            benchlib.Figure("successes_without_layer", before, "trials", None, "selection stage"),
            benchlib.Figure("successes_with_layer", after, "trials", before),
            benchlib.Figure("trials_stopped", len(stops), "trials"),
            benchlib.Figure("trials", trials, "trials"),
        ],
        f"{args.policy}: {selection['chosen']} on {trials} validation trials",
        experiment=str(run),
        policy=args.policy,
    )


if __name__ == "__main__":
    main()
