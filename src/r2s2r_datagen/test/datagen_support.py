"""Paths and helpers the r2s2r_datagen tests share (generation inputs: r2s2r_testing.generation)."""

from pathlib import Path
from typing import Any

TEST_DIR = Path(__file__).resolve().parent
REPO = TEST_DIR.parents[2]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"


def close_recording(recorder: Any, behavior_source: str, provenance: dict | None = None) -> Any:
    """Close a recording of a successful cube trial on the nominal world into an Episode."""
    return recorder.to_episode(
        world_config_id="nominal",
        behavior_source=behavior_source,
        task="pick_sort",
        object_type="cube",
        belt_speed_mps=0.1,
        success=True,
        provenance=provenance or {},
    )
