"""What the policy saw and sent, step by step: the inference trace of one trial.

Both evaluation paths run the same :class:`~.engine.InferenceEngine`; with a trace attached
(:attr:`~.engine.InferenceEngine.trace`) every engine step that ran the policy or held is
recorded:

- ``engine_s``: the engine clock at the step (the cell's time in process, the wall clock in
  the node), ``latency_s`` (snapshot + model + safety filter) and the step's status;
- ``stamp_s``: per input, the *source* stamp of the value used (the cell time it was taken:
  a frame's or message's ``header.stamp``; the in-process evaluator passes the cell time),
  which puts both paths on one time axis;
- ``age_s``: per input, the engine-clock time since it was received (what staleness judges);
- the observation itself (joint positions, belt speed, tracked-object vector) and the command
  sent (its points' ``time_from_start`` and positions, NaN-padded to the chunk length);
- the policy's latent (:meth:`~r2s2r_policy.models.Policy.embed`) of every step it ran, and
  its real-likeness when a monitor is attached (NaN otherwise);
- with ``keep_images``, the camera images the policy read (uint8 at the spec's size): what
  latent-space analysis needs to re-run other policies on the same observations
  (:mod:`r2s2r_policy.analysis`); ~1 MB per 15 s trial at 64 px, compressed.

Extra per-trial arrays (:meth:`InferenceTrace.attach`, e.g. the cell's joint trajectory at the
control rate) are stored beside them. A trial's trace is one ``.npz``
(:meth:`InferenceTrace.save`, written whole or not at all); :func:`load_trace` reads it back.
Without images a trace of a 15 s trial is a few hundred kB at most.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..npz_files import write_npz

TRACE_FORMAT = 2
"""Version of the trace file layout (2: latents, real-likeness, images, extra arrays)."""
READABLE_FORMATS = (1, 2)
"""Trace formats :func:`load_trace` reads (1: without latents, images or extras)."""
IMAGE_PREFIX = "image_"
"""Array name prefix of a kept camera image stack (``image_<camera key>``)."""
EXTRA_PREFIX = "extra_"
"""Array name prefix of an attached per-trial array."""

STATUS_CODES: tuple[str, ...] = ("commanded", "hold", "dropped")
"""Statuses a trace records (index = the stored code)."""


@dataclass
class InferenceTrace:
    """Step records of one trial (see the module docstring).

    Args:
        input_keys: The policy's inputs, in the order their columns are stored.
        chunk_length: Points of a full chunk (commands are NaN-padded to it).
        action_dim: Action width.
        image_keys: Camera keys whose images :meth:`record` keeps (empty: none kept).

    """

    input_keys: list[str]
    chunk_length: int
    action_dim: int
    image_keys: tuple[str, ...] = ()
    metadata: dict[str, float | int | str] = field(default_factory=dict)
    _rows: list[dict[str, object]] = field(default_factory=list)
    _extras: dict[str, np.ndarray] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget every record, attached array and the metadata (a new trial)."""
        self._rows = []
        self._extras = {}
        self.metadata = {}

    def attach(self, name: str, values: np.ndarray) -> None:
        """Store a per-trial array with the trace (saved as ``extra_<name>``)."""
        self._extras[name] = np.asarray(values)

    def __len__(self) -> int:
        return len(self._rows)

    def record(
        self,
        engine_s: float,
        status: str,
        latency_s: float,
        stamps_s: Mapping[str, float],
        ages_s: Mapping[str, float],
        joint_pos: np.ndarray,
        belt_speed: float,
        object_track: np.ndarray | None,
        times_s: np.ndarray | None,
        positions: np.ndarray | None,
        latent: np.ndarray | None = None,
        real_likeness: float = float("nan"),
        images: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Append one step (``times_s``/``positions``: the command sent, None if none).

        ``latent``: the policy's latent when it ran; ``images``: the observation's camera
        images (kept for :attr:`image_keys` only).
        """
        kept = {key: np.array(images[key]) for key in self.image_keys} if images else {}
        self._rows.append(
            {
                "engine_s": engine_s,
                "status": STATUS_CODES.index(status),
                "latency_s": latency_s,
                "stamp_s": [stamps_s.get(key, np.nan) for key in self.input_keys],
                "age_s": [ages_s.get(key, np.nan) for key in self.input_keys],
                "joint_pos": np.asarray(joint_pos, dtype=np.float32),
                "belt_speed": belt_speed,
                "object_track": None if object_track is None else np.asarray(object_track),
                "times_s": times_s,
                "positions": positions,
                "latent": None if latent is None else np.asarray(latent, dtype=np.float32),
                "real_likeness": real_likeness,
                "images": kept,
            }
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Return the records as arrays (one row per step)."""
        rows = self._rows
        n, h, a = len(rows), self.chunk_length, self.action_dim
        times = np.full((n, h), np.nan, dtype=np.float32)
        positions = np.full((n, h, a), np.nan, dtype=np.float32)
        for i, row in enumerate(rows):
            if row["times_s"] is not None:
                count = min(len(row["times_s"]), h)  # type: ignore[arg-type]
                times[i, :count] = np.asarray(row["times_s"])[:count]
                positions[i, :count] = np.asarray(row["positions"])[:count]
        tracks = [row["object_track"] for row in rows if row["object_track"] is not None]
        width = int(np.asarray(tracks[0]).size) if tracks else 0
        object_track = np.full((n, width), np.nan, dtype=np.float32)
        for i, row in enumerate(rows):
            if row["object_track"] is not None and width:
                object_track[i] = np.asarray(row["object_track"]).reshape(-1)[:width]
        joint_width = int(np.asarray(rows[0]["joint_pos"]).size) if rows else 0
        latents = [row["latent"] for row in rows if row["latent"] is not None]
        latent_width = int(np.asarray(latents[0]).size) if latents else 0
        latent = np.full((n, latent_width), np.nan, dtype=np.float32)
        for i, row in enumerate(rows):
            if row["latent"] is not None and latent_width:
                latent[i] = np.asarray(row["latent"])
        images: dict[str, np.ndarray] = {}
        for key in self.image_keys:
            frames = [row["images"].get(key) for row in rows]  # type: ignore[attr-defined]
            shapes = [f.shape for f in frames if f is not None]
            if shapes:
                stack = np.zeros((n, *shapes[0]), dtype=np.uint8)
                for i, frame in enumerate(frames):
                    if frame is not None:
                        stack[i] = frame
                images[IMAGE_PREFIX + key] = stack
        return {
            "engine_s": np.array([r["engine_s"] for r in rows], dtype=np.float64),
            "status": np.array([r["status"] for r in rows], dtype=np.int8),
            "latency_s": np.array([r["latency_s"] for r in rows], dtype=np.float32),
            "stamp_s": np.array([r["stamp_s"] for r in rows], dtype=np.float64).reshape(
                n, len(self.input_keys)
            ),
            "age_s": np.array([r["age_s"] for r in rows], dtype=np.float32).reshape(
                n, len(self.input_keys)
            ),
            "joint_pos": np.array([r["joint_pos"] for r in rows], dtype=np.float32).reshape(
                n, joint_width
            ),
            "belt_speed": np.array([r["belt_speed"] for r in rows], dtype=np.float32),
            "object_track": object_track,
            "command_times_s": times,
            "command_positions": positions,
            "latent": latent,
            "real_likeness": np.array([r["real_likeness"] for r in rows], dtype=np.float32),
            **images,
            **{EXTRA_PREFIX + name: values for name, values in self._extras.items()},
        }

    def save(self, path: str | Path) -> Path:
        """Write the trace as one ``.npz`` (via a hidden partial file renamed into place)."""
        header = {
            "format": TRACE_FORMAT,
            "input_keys": self.input_keys,
            "statuses": list(STATUS_CODES),
            "image_keys": list(self.image_keys),
            "metadata": self.metadata,
        }
        return write_npz(path, header, self.arrays(), compressed=True)


@dataclass(frozen=True)
class LoadedTrace:
    """A trace read back: its header and arrays (see :meth:`InferenceTrace.arrays`)."""

    input_keys: list[str]
    metadata: dict[str, float | int | str]
    arrays: dict[str, np.ndarray]
    image_keys: tuple[str, ...] = ()

    def images(self, key: str) -> np.ndarray:
        """Return the kept images of camera ``key``, ``(steps, H, W, 3)`` uint8.

        Raises:
            KeyError: If the trace kept no images of that camera.

        """
        name = IMAGE_PREFIX + key
        if name not in self.arrays:
            raise KeyError(f"trace kept no images of {key!r} (kept: {list(self.image_keys)})")
        return self.arrays[name]

    def extra(self, name: str) -> np.ndarray:
        """Return an attached per-trial array (:meth:`InferenceTrace.attach`)."""
        return self.arrays[EXTRA_PREFIX + name]

    def column(self, name: str, key: str) -> np.ndarray:
        """Column of input ``key`` of a per-input array (``stamp_s`` or ``age_s``)."""
        return self.arrays[name][:, self.input_keys.index(key)]

    def commanded(self) -> np.ndarray:
        """Boolean mask of the steps that sent a chunk."""
        return self.arrays["status"] == STATUS_CODES.index("commanded")


def load_trace(path: str | Path) -> LoadedTrace:
    """Read a trace file written by :meth:`InferenceTrace.save`.

    Raises:
        ValueError: If the file is not a trace of a format this code reads.

    """
    with np.load(path, allow_pickle=False) as data:
        if "header" not in data:
            raise ValueError(f"{path}: not an inference trace (no header)")
        header = json.loads(str(data["header"]))
        if header.get("format") not in READABLE_FORMATS:
            raise ValueError(
                f"{path}: trace format {header.get('format')}, this code reads "
                f"{list(READABLE_FORMATS)}"
            )
        arrays = {key: data[key] for key in data.files if key != "header"}
    return LoadedTrace(
        list(header["input_keys"]),
        dict(header["metadata"]),
        arrays,
        tuple(header.get("image_keys", ())),
    )
