"""Shared constants and helpers of the r2s2r_datagen tests (imported by tests and conftest)."""

from pathlib import Path

import yaml

TEST_DIR = Path(__file__).resolve().parent
REPO = TEST_DIR.parents[2]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"

FACTORY = "datagen_test_generators:make_scripted_generator"
OVERRIDES = [f"planner={FACTORY}", f"mimicgen={FACTORY}"]
ARTIFACT_OVERRIDES = {
    "belt": {"speed_mps": 0.104},
    "cameras": {"head": {"fx_px": 123.0, "fy_px": 122.5}},
}


def write_configurations(path: Path, behavior_options: dict | None = None) -> Path:
    data = {
        "schema_version": 1,
        "task": "pick_sort",
        "nominal_world_path": str(NOMINAL),
        "grounding_artifact_path": str(path.parent / "artifact.yaml"),
        "recording": {"rate_hz": 10.0, "image_width_px": 16, "image_height_px": 16},
        "configurations": [
            {"name": "grounded_mimicgen", "world": "grounded", "behavior": "mimicgen"},
            {"name": "grounded_planner", "world": "grounded", "behavior": "planner"},
            {"name": "nominal_mimicgen", "world": "nominal", "behavior": "mimicgen"},
            {"name": "nominal_planner", "world": "nominal", "behavior": "planner"},
        ],
        "behavior_options": behavior_options or {},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path
