"""A tidy-up changes no behaviour: the same experiment, data and training at two commits.

Issue 51 moved code between modules and packages; this checks that nothing a user gets
changed, against a checkout of the earlier commit (set up with its own ``scripts/setup.sh``):

1. **records**: the smoke experiment made from nothing by the earlier commit
   (``BEFORE_RECORDS``: a copy of its ``results.json``, ``table.txt``, ``command.txt``), rerun by
   this tree on the same folder (``EXPERIMENT``): the table and the reproduce command
   byte-identical, every differing result field listed (``compare_experiment_records``);
2. **generated data**: a copy of that folder without its ``generation/`` rerun by this tree
   (``REGENERATED``): every configuration's dataset compared array by array with the earlier
   commit's (``r2s2r_datagen.compare``), and its table with the earlier one;
3. **training**: ``bench/training_reference.py`` (40 steps, one thread) in both trees, on the
   synthetic datasets and on ``EXPERIMENT``'s grounded + MimicGen training config: the SHA-256
   of the losses.

    python bench/behaviour_identity.py --before-tree /work/before \\
        --before-records /work/runs/equiv_before --experiment /work/runs/equiv_smoke \\
        --regenerated /work/runs/equiv_gen --record results/behaviour_identity.json

The last line is one JSON object: {"benchmark": "behaviour_identity", "figures": [...]}.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import benchlib
from compare_experiment_records import SESSION_FIELDS, differences
from r2s2r_datagen.compare import compare_datasets

REPO = Path(__file__).resolve().parents[1]


def _commit(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _losses_sha256(tree: Path, config: Path | None) -> str:
    """Run the tree's training reference in its own environment; its losses' SHA-256."""
    extra = f" --config {config}" if config is not None else ""
    script = f"source {tree}/scripts/env.sh && python {tree}/bench/training_reference.py{extra}"
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True, cwd=tree
    ).stdout
    figures = json.loads(out.strip().splitlines()[-1])["figures"]
    return next(f["value"] for f in figures if f["name"] == "losses_sha256")


def main() -> None:
    """Compare the two commits and print (and record) the figures."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--before-tree", type=Path, required=True)
    parser.add_argument("--before-records", type=Path, required=True)
    parser.add_argument("--experiment", type=Path, required=True)
    parser.add_argument("--regenerated", type=Path, required=True)
    parser.add_argument("--record", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    before = json.loads((args.before_records / "results.json").read_text())
    after = json.loads((args.experiment / "results.json").read_text())
    changed = [d for d in differences(before, after) if not d.startswith(SESSION_FIELDS)]
    tables = {
        name: (args.before_records / "table.txt").read_bytes() == (run / "table.txt").read_bytes()
        for name, run in (("rerun", args.experiment), ("regenerated", args.regenerated))
    }
    command_same = (args.before_records / "command.txt").read_bytes() == (
        args.experiment / "command.txt"
    ).read_bytes()

    datasets: dict[str, Any] = {}
    for folder in sorted((args.experiment / "generation").iterdir()):
        name = folder.name
        old = folder / "run" / "datasets" / f"{name}.hdf5"
        new = args.regenerated / "generation" / name / "run" / "datasets" / f"{name}.hdf5"
        comparison = compare_datasets(old, new)
        datasets[name] = {
            "episodes": len(comparison.episodes_a),
            "arrays_bit_identical": comparison.bit_identical_arrays,
            "arrays_compared": comparison.arrays_compared,
            "differences": list(comparison.differences),
        }

    config = args.experiment / "policies" / "grounded_mimicgen" / "train_config.yaml"
    hashes = {
        kind: {
            "before": _losses_sha256(args.before_tree, path),
            "after": _losses_sha256(REPO, path),
        }
        for kind, path in (("synthetic", None), ("smoke_grounded_mimicgen", config))
    }
    identical_arrays = sum(d["arrays_bit_identical"] for d in datasets.values())
    compared_arrays = sum(d["arrays_compared"] for d in datasets.values())
    figures = [
        benchlib.Figure("table_identical_after_rerun", tables["rerun"], "", True),
        benchlib.Figure("table_identical_after_regeneration", tables["regenerated"], "", True),
        benchlib.Figure("command_identical", command_same, "", True),
        benchlib.Figure("result_fields_differing", len(changed), "fields"),
        benchlib.Figure(
            "dataset_arrays_bit_identical", identical_arrays, "arrays", compared_arrays
        ),
        benchlib.Figure(
            "training_losses_identical",
            all(h["before"] == h["after"] for h in hashes.values()),
            "",
            True,
        ),
    ]
    benchlib.print_table(figures)
    for path in changed:
        print(f"  differs  {path}")
    about = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "before_commit": _commit(args.before_tree),
        "after_commit": _commit(REPO),
        "differing": changed,
        "datasets": datasets,
        "training_losses_sha256": hashes,
    }
    line = benchlib.json_line("behaviour_identity", figures, **about)
    print(line)
    if args.record is not None:
        args.record.write_text(json.dumps(json.loads(line), indent=1) + "\n")


if __name__ == "__main__":
    main()
