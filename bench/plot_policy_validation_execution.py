"""Plot results/policy_validation_execution.json: receding vs temporal ensembling per policy.

Run: ``python bench/plot_policy_validation_execution.py`` (writes the PNG beside the JSON).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULT = Path(__file__).resolve().parents[1] / "results" / "policy_validation_execution.json"
LABELS = [
    "capacity\n(sim, own world)",
    "real only\n20 demos",
    "real only\n60 demos",
    "grounded +\nMimicGen",
    "pooled",
]


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a success rate."""
    rate = successes / trials
    denominator = 1 + z * z / trials
    center = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return center - half, center + half


def main() -> None:
    """Draw one bar pair per policy with Wilson intervals."""
    data = json.loads(RESULT.read_text())
    rows = data["execution_comparison"]
    modes = {
        "receding_3": ("receding, 3 steps per chunk", "#999999"),
        "temporal_ensemble": ("temporal ensembling", "#1f77b4"),
    }
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.38
    for offset, (key, (label, color)) in zip((-width / 2, width / 2), modes.items(), strict=True):
        counts = [tuple(row[key]) for row in rows] + [tuple(data["pooled"][key])]
        rates = [k / n for k, n in counts]
        low = [100 * (r - wilson(k, n)[0]) for r, (k, n) in zip(rates, counts, strict=True)]
        high = [100 * (wilson(k, n)[1] - r) for r, (k, n) in zip(rates, counts, strict=True)]
        positions = [i + offset for i in range(len(counts))]
        ax.bar(positions, [100 * r for r in rates], width, yerr=[low, high], capsize=3,
               label=label, color=color)  # fmt: skip
        for position, (k, n) in zip(positions, counts, strict=True):
            ax.text(position, 2, f"{k}/{n}", ha="center", fontsize=8, color="white")
    ax.set_xticks(range(len(LABELS)))
    ax.set_xticklabels(LABELS, fontsize=8)
    ax.set_ylabel("success on validation seeds (%)")
    ax.set_ylim(0, 100)
    ax.set_title(
        "Chunk execution chosen on validation seeds (20000+, nominal; 95% Wilson CIs)", fontsize=9
    )
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(RESULT.with_suffix(".png"), dpi=100)


if __name__ == "__main__":
    main()
