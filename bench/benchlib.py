"""What every benchmark shares: its figures, their table and JSON line, and the common flags.

A benchmark measures figures (name, value, unit, goal), prints a readable table of them and ends
with one JSON line, ``{"benchmark": NAME, "figures": [{"name", "value", "unit", "goal"}, ...]}``
(:func:`report` does both; :func:`print_json_line` alone after a table of the benchmark's own).
A figure is a :class:`Figure` or a dict with those keys (benchmarks whose figures say more, e.g.
the twin each one was measured on, keep their extra keys in the JSON line).

Benchmarks run as scripts, ``python bench/bench_NAME.py``: Python puts the script's folder first
on the import path, so ``import benchlib`` (and one benchmark importing another) needs no path
edit. Their parsers come from :func:`parser`; the flags several benchmarks take, with one
meaning and one default, from the ``add_*`` functions.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
"""The workspace (the benchmarks read its config/ and write under its runs/)."""
DEFAULT_TWIN = REPO / "config" / "twin" / "default.yaml"
"""The twin benchmarks run against unless told otherwise."""
NOMINAL_WORLD = REPO / "config" / "world" / "nominal.yaml"
"""The pipeline's nominal knowledge of the cell."""


@dataclass(frozen=True)
class Figure:
    """One measured figure: its value in ``unit`` and the goal it is held to (None: none).

    ``note`` is shown in the table only (what the figure is measured on, a caveat).
    """

    name: str
    value: Any
    unit: str = ""
    goal: Any = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Return the figure as it goes into the JSON line (without its note)."""
        return {"name": self.name, "value": self.value, "unit": self.unit, "goal": self.goal}


FigureLike = Figure | Mapping[str, Any]
"""A :class:`Figure` or a dict with at least ``name`` and ``value``."""


def as_dict(figure: FigureLike) -> dict[str, Any]:
    """Return a figure as a JSON-ready dict."""
    return figure.as_dict() if isinstance(figure, Figure) else dict(figure)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) and abs(value) < 1e6 else str(value)
    return "-" if value is None else str(value)


def print_table(figures: Iterable[FigureLike], title: str = "") -> None:
    """Print figures as a table: name, value, unit, goal (and a note where there is one)."""
    rows = []
    for figure in figures:
        data = as_dict(figure)
        note = figure.note if isinstance(figure, Figure) else ""
        name = str(data.get("name", data.get("figure", "?")))
        goal = data.get("goal", data.get("target"))
        rows.append(
            (name, _shown(data.get("value")), str(data.get("unit", "")), _shown(goal), note)
        )
    if title:
        print(title)
    width = max([len("figure"), *(len(row[0]) for row in rows)])
    print(f"{'figure':<{width}}  {'value':>12}  {'unit':<12} {'goal':<10} note")
    for name, value, unit, goal, note in rows:
        print(f"{name:<{width}}  {value:>12}  {unit:<12} {goal:<10} {note}".rstrip())


def json_line(benchmark: str, figures: Iterable[FigureLike], **about: Any) -> str:
    """Return the benchmark's one JSON line (NumPy numbers written as floats).

    ``about`` adds what the whole run was measured on (e.g. the seeds) before the figures.
    """
    line = {"benchmark": benchmark, **about, "figures": [as_dict(f) for f in figures]}
    return json.dumps(line, default=float)


def print_json_line(benchmark: str, figures: Iterable[FigureLike], **about: Any) -> None:
    """Print the benchmark's one JSON line (its last line of output)."""
    print(json_line(benchmark, figures, **about), flush=True)


def report(benchmark: str, figures: Iterable[FigureLike], title: str = "", **about: Any) -> None:
    """Print the figures' table, then the JSON line."""
    figures = list(figures)
    print_table(figures, title)
    print_json_line(benchmark, figures, **about)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """Return a benchmark's argument parser; ``--help`` shows its docstring as written."""
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_twin(parser: argparse.ArgumentParser, default: Path = DEFAULT_TWIN) -> None:
    """``--twin``: the twin (world file) to run against."""
    parser.add_argument(
        "--twin", type=Path, default=default, help=f"twin world file (default: {default.name})"
    )


def add_nominal(parser: argparse.ArgumentParser) -> None:
    """``--nominal``: the pipeline's nominal world (what it knows before grounding)."""
    parser.add_argument(
        "--nominal",
        type=Path,
        default=NOMINAL_WORLD,
        help="nominal world file (default: config/world/nominal.yaml)",
    )


def add_artifact(parser: argparse.ArgumentParser) -> None:
    """``--artifact``: a grounding artifact to compare with the nominal knowledge."""
    parser.add_argument(
        "--artifact", type=Path, help="grounding artifact YAML to compare (r2s2r ground's output)"
    )


def add_threads(parser: argparse.ArgumentParser) -> None:
    """``--threads``: torch intra-op threads (1, as the reduced experiment trains)."""
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
