"""Translate a simulated dataset (``r2s2r translate dataset IN OUT --translator CKPT``).

Every camera of every episode is translated (a ``structure`` translator with the statistics of
the whole source dataset, :class:`~.structure.StructureStats`, whose digest the provenance
records, so an episode translates the same alone or in a resumed run); actions, states,
timestamps, the tracked object and the metadata are copied untouched, and each episode's
``provenance`` gains a ``translation`` entry (the translator, its SHA-256, what it was trained
on, the source episode). The output is written as ``.<OUT>.partial`` beside ``OUT``, one episode
at a time (each listed in the file's manifest with the translator's identity), and renamed to
``OUT`` when every episode is there: a stopped run leaves the partial, and the same command
resumes it; a partial of another translator is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from r2s2r_common.files import move_into_place
from r2s2r_dataset.hdf5 import EpisodeDataset, EpisodeWriter, partial_path

from .checkpoint import Translator
from .frames import TranslationInputError, dataset_cameras, read_frames
from .structure import structure_statistics

TRANSLATION_KEY = "translation"
"""The key of an episode's ``provenance`` that says how its frames were translated."""
DOMAIN_STRIDE = 5
DOMAIN_FRAMES = 2000
"""The simulated domain's statistics come from every 5th frame, up to 2000, per camera."""


def translate_dataset(
    source: str | Path,
    out: str | Path,
    translator: Translator,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write ``out``: ``source`` with every camera translated (see the module docstring).

    Raises:
        TranslationInputError: ``out`` exists, ``source`` is not simulated, a camera or image
            size the translator does not know, or a partial output of another translator.

    """
    target = Path(out)
    if target.exists():
        raise TranslationInputError(f"{target}: exists already (not overwritten)")
    cameras = dataset_cameras(source)
    cameras.require_source("sim", "sim-to-real translation takes simulated episodes")
    translator.check_cameras(cameras.shapes, str(source))
    stats = {
        key: structure_statistics(
            translator.resize(read_frames(source, key, None, DOMAIN_STRIDE, None, DOMAIN_FRAMES))
        )
        for key in cameras.shapes
    }
    partial = partial_path(target)
    with (
        EpisodeDataset(source) as dataset,
        EpisodeWriter(partial, append_existing=partial.exists()) as writer,
    ):
        done = writer.keep_listed()
        foreign = [e for e in done if e.content_hash != translator.identity]
        if foreign:
            raise TranslationInputError(
                f"{partial}: a partial translation by another translator "
                f"({foreign[0].content_hash[:12]}); remove it to start again"
            )
        total = len(dataset)
        for index in range(len(done), total):
            episode = dataset.episode(index)
            images = {
                key: translator.translate(key, frames, stats[key])
                for key, frames in episode.images.items()
            }
            provenance = dict(episode.metadata.provenance)
            provenance[TRANSLATION_KEY] = {
                "translator": str(translator.path.resolve()),
                "translator_sha256": translator.identity,
                "kind": translator.kind,
                "image_px": translator.image_px,
                "trained_on": translator.meta["trained_on"]["dataset"],
                "trained_on_frames_sha256": translator.meta["trained_on"]["frames_sha256"],
                "source_dataset": str(Path(source).resolve()),
                "source_episode": index,
                "domain_stats_sha256": {key: value.digest() for key, value in stats.items()},
            }
            metadata = episode.metadata.model_copy(update={"provenance": provenance})
            writer.append(
                replace(episode, images=images, metadata=metadata),
                content_hash=translator.identity,
                source=dataset.where(index),
            )
            if progress is not None:
                progress(index + 1, total)
    move_into_place(partial, target)
    return target
