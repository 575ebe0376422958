"""Paths the r2s2r_datagen tests share (generation inputs: r2s2r_testing.generation)."""

from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent
REPO = TEST_DIR.parents[2]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
