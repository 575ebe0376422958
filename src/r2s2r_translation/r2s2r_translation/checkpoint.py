"""A translator checkpoint: every camera of one real dataset, one kind, one working size.

A checkpoint is a folder (written under a hidden name and renamed into place, so it is whole
or absent)::

    translator.json       kind, working size, each camera's source size, what it was trained
                          on (dataset, its source, episodes, frames' SHA-256), settings, log
    weights.safetensors   the arrays of every camera (``<camera_key>/<name>``)

Every translator answers one call, :meth:`Translator.translate` (camera key, frames at the
camera's source size) → frames at the working size, whatever its kind: ``colour`` (fitted
transfer), ``structure`` (the structure-to-real network) or ``cut`` (the unpaired generator).
A translator's identity (:attr:`Translator.identity`) is the SHA-256 of its two files, carried
into every dataset it translates.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from r2s2r_common.files import move_into_place
from r2s2r_policy.data.chunks import resize_image
from safetensors.numpy import load_file, save_file

from .colour import ColourTransfer
from .diffusion import DiffusionSettings, PipelineCall, load_pipeline, translate_video
from .frames import TranslationInputError
from .network import StructureToReal, channels_last
from .structure import STRUCTURE_CHANNELS, StructureStats
from .structure_translator import translate_frames
from .unpaired import translate_unpaired

FORMAT = "r2s2r-translator"
VERSION = 1
META_FILE = "translator.json"
WEIGHTS_FILE = "weights.safetensors"
TranslatorKind = Literal["colour", "structure", "cut", "diffusion"]
KINDS: tuple[str, ...] = ("colour", "structure", "cut", "diffusion")
UNPAIRED_KINDS: tuple[str, ...] = ("colour", "cut")
"""Kinds fitted on sim frames beside the real ones (``--sim``)."""


@dataclass
class Translator:
    """A loaded translator (see the module docstring)."""

    path: Path
    meta: dict[str, Any]
    identity: str
    colour: dict[str, ColourTransfer]
    networks: dict[str, StructureToReal]
    references: dict[str, NDArray[np.uint8]] = field(default_factory=dict)
    pipeline: PipelineCall | None = None  # the diffusion model, loaded on first use

    @property
    def kind(self) -> str:
        """``colour`` or ``structure``."""
        return str(self.meta["kind"])

    @property
    def image_px(self) -> int:
        """The working (and output) size, square."""
        return int(self.meta["image_px"])

    @property
    def cameras(self) -> dict[str, tuple[int, int]]:
        """Camera key → the source size (H, W) its frames must have."""
        return {k: (int(v[0]), int(v[1])) for k, v in self.meta["source_image_px"].items()}

    def check_cameras(self, shapes: Mapping[str, tuple[int, int]], where: str) -> None:
        """Refuse a dataset whose cameras or sizes are not the ones this translator knows.

        Raises:
            TranslationInputError: A camera the translator was not trained for, or another size.

        """
        for key, size in shapes.items():
            if key not in self.cameras:
                raise TranslationInputError(
                    f"{where}: camera {key} has no translator in {self.path} (trained for "
                    f"{sorted(self.cameras)})"
                )
            if tuple(size) != self.cameras[key]:
                raise TranslationInputError(
                    f"{where}: {key} is {size[0]}x{size[1]} px; the translator {self.path} was "
                    f"trained on {self.cameras[key][0]}x{self.cameras[key][1]} px frames"
                )

    def resize(self, frames: NDArray[np.uint8]) -> NDArray[np.uint8]:
        """Frames resized to the working size, as the policies resize them."""
        px = self.image_px
        if len(frames) == 0:
            return np.zeros((0, px, px, 3), np.uint8)
        return np.stack([resize_image(frame, px, px) for frame in frames])

    def translate(
        self, camera_key: str, frames: NDArray[np.uint8], stats: StructureStats | None = None
    ) -> NDArray[np.uint8]:
        """Translate frames ``(N, H, W, 3)`` of one camera at its source size.

        Args:
            camera_key: The camera.
            frames: Its rendered frames.
            stats: The simulated domain's statistics at the working size (``structure``
                translators; None: those of ``frames``).

        Returns:
            uint8 ``(N, image_px, image_px, 3)``.

        """
        self.check_cameras({camera_key: (frames.shape[1], frames.shape[2])}, "frames")
        sized = self.resize(frames)
        if self.kind == "colour":
            return self.colour[camera_key].apply(sized)
        if self.kind == "cut":
            return translate_unpaired(self.networks[camera_key], sized)
        if self.kind == "diffusion":
            settings = DiffusionSettings.model_validate(self.meta["config"])
            if self.pipeline is None:
                self.pipeline = load_pipeline(settings)
            return translate_video(self.pipeline, sized, self.references[camera_key], settings)
        return translate_frames(self.networks[camera_key], sized, stats)


def file_digest(*paths: Path) -> str:
    """SHA-256 over files' bytes, in order."""
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def save_translator(
    out: str | Path,
    meta: dict[str, Any],
    colour: Mapping[str, ColourTransfer] | None = None,
    networks: Mapping[str, StructureToReal] | None = None,
    references: Mapping[str, NDArray[np.uint8]] | None = None,
) -> Path:
    """Write a checkpoint folder whole (hidden name, then renamed); return its path.

    Raises:
        FileExistsError: If ``out`` exists.

    """
    target = Path(out)
    if target.exists():
        raise FileExistsError(f"{target}: exists already (not overwritten); choose another --out")
    arrays: dict[str, NDArray] = {}
    for key, transfer in (colour or {}).items():
        arrays.update({f"{key}/{name}": value for name, value in transfer.arrays().items()})
    for key, reference in (references or {}).items():
        arrays[f"{key}/reference"] = np.ascontiguousarray(reference, dtype=np.uint8)
    for key, network in (networks or {}).items():
        for name, tensor in network.state_dict().items():
            arrays[f"{key}/{name}"] = tensor.detach().cpu().contiguous().numpy()
    staging = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(staging / WEIGHTS_FILE))
    full = {"format": FORMAT, "version": VERSION, **meta}
    (staging / META_FILE).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    move_into_place(staging, target)  # both files synced, then renamed
    return target


def load_translator(path: str | Path) -> Translator:
    """Load and check a checkpoint folder; nothing is half-loaded.

    Raises:
        TranslationInputError: Not a translator folder, another format or version, a translator
            not trained on real frames, or weights that do not fit its description.

    """
    folder = Path(path)
    meta_path, weights_path = folder / META_FILE, folder / WEIGHTS_FILE
    if not meta_path.is_file() or not weights_path.is_file():
        raise TranslationInputError(
            f"{folder}: not a translator checkpoint (expected {META_FILE} and {WEIGHTS_FILE})"
        )
    try:
        meta = json.loads(meta_path.read_text())
        arrays = load_file(str(weights_path))
    except Exception as error:
        raise TranslationInputError(
            f"{folder}: unreadable translator checkpoint: {str(error).splitlines()[0]}"
        ) from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise TranslationInputError(
            f"{folder}: format {meta.get('format')!r} version {meta.get('version')!r}; expected "
            f"{FORMAT!r} version {VERSION}"
        )
    if meta.get("kind") not in KINDS:
        raise TranslationInputError(f"{folder}: kind {meta.get('kind')!r}; expected one of {KINDS}")
    source = meta.get("trained_on", {}).get("source")
    if source != "real":
        raise TranslationInputError(
            f"{folder}: trained on {source!r} frames; a sim-to-real translator learns the real "
            "camera's look from real frames only"
        )
    colour: dict[str, ColourTransfer] = {}
    networks: dict[str, StructureToReal] = {}
    references: dict[str, NDArray[np.uint8]] = {}
    for key in meta["source_image_px"]:
        own = {
            name.split("/", 1)[1]: value
            for name, value in arrays.items()
            if name.startswith(f"{key}/")
        }
        try:
            if meta["kind"] == "colour":
                colour[key] = ColourTransfer.from_arrays(own)
            elif meta["kind"] == "diffusion":
                references[key] = np.asarray(own["reference"], dtype=np.uint8)
            else:
                channels = 3 if meta["kind"] == "cut" else STRUCTURE_CHANNELS
                network = StructureToReal(channels, int(meta["config"]["width"]))
                network.load_state_dict(
                    {k: torch.from_numpy(v) for k, v in own.items()}, strict=True
                )
                networks[key] = channels_last(network).eval()
        except (KeyError, RuntimeError) as error:
            raise TranslationInputError(
                f"{folder}: the weights of {key} do not fit a {meta['kind']} translator: "
                f"{str(error).splitlines()[0]}"
            ) from None
    identity = file_digest(meta_path, weights_path)
    return Translator(folder, meta, identity, colour, networks, references)
