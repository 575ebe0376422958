"""Plot results/datagen_throughput.json: successes/min per configuration, commit by commit.

Run: ``python bench/plot_datagen_throughput.py`` (writes the PNG beside the JSON). Each bar is a
bench run (``bench/bench_datagen.py``, 2 workers); the dashed line is the issue's goal.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULT = Path(__file__).resolve().parents[1] / "results" / "datagen_throughput.json"
SUFFIX = "_successes_per_min_2_workers"


def runs_by_commit(data: dict) -> dict[str, dict[str, list[float]]]:
    """Commit → configuration → successes/min of each run (earlier runs first)."""
    commits: dict[str, dict[str, list[float]]] = {}
    for commit, rates in data["earlier"].items():
        commits[commit] = {
            name: list(v) if isinstance(v, list) else [v] for name, v in rates.items()
        }
    latest: dict[str, list[float]] = {}
    for run in data["runs"]:
        for figure in run["figures"]:
            name = figure["name"]
            if name.endswith(SUFFIX) and name != "successes_per_min_2_workers":
                latest.setdefault(name[: -len(SUFFIX)], []).append(float(figure["value"]))
    commits[data["commit"]] = latest
    return commits


def main() -> None:
    """One group of bars per configuration, one shade per commit, a dot per run."""
    data = json.loads(RESULT.read_text())
    commits = runs_by_commit(data)
    configurations = list(commits[data["commit"]])
    width = 0.8 / len(commits)
    figure, axes = plt.subplots(figsize=(8, 4))
    for index, (commit, rates) in enumerate(commits.items()):
        for position, name in enumerate(configurations):
            values = rates.get(name, [])
            if not values:
                continue
            x = position - 0.4 + width * (index + 0.5)
            mean = sum(values) / len(values)
            axes.bar(
                x, mean, width * 0.9, color=f"C{index}", label=commit if position == 0 else None
            )
            axes.plot([x] * len(values), values, "k.", markersize=4)
    goal = data["goal"]["successes_per_min_2_workers"]
    axes.axhline(goal, color="k", linestyle="--", linewidth=1, label=f"goal {goal}")
    axes.set_xticks(range(len(configurations)), [c.replace("_", "\n") for c in configurations])
    axes.set_ylabel("successful episodes / min (2 workers)")
    axes.set_title("Generation throughput on the 2-core machine (bench/bench_datagen.py)")
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    out = RESULT.with_suffix(".png")
    figure.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
