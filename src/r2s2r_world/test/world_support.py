"""Shared paths of the r2s2r_world tests."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
