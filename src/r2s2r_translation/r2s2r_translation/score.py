"""Score a translator on held-out real frames (``r2s2r translate score``).

Per camera, rendered sim frames and the same frames translated are each compared with the real
frames the translator never saw (the checkpoint's held-out episodes): KID on ImageNet features
with its interval, alignment (sliced Wasserstein, with a bootstrap interval) and the held-out
accuracy of a real-vs-sim probe on the same features (0.5: indistinguishable), and temporal
consistency on whole sim episodes. A contact sheet shows held-out real frames, rendered frames
and the same rendered frames translated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray
from r2s2r_policy.analysis.domain import bootstrap_interval, fit_probe, sliced_wasserstein
from r2s2r_policy.data.chunks import resize_image

from .checkpoint import Translator
from .frames import TranslationInputError, dataset_cameras, read_frames
from .metrics import ImageNetFeatures, kernel_inception_distance, warping_error


def _domain_scores(real: NDArray, other: NDArray) -> dict[str, Any]:
    kid = kernel_inception_distance(real, other)
    swd, low, high = bootstrap_interval(sliced_wasserstein, real, other, resamples=100)
    probe = fit_probe(real, other, kind="linear")
    accuracy = probe.accuracy
    tested = probe.tested
    half = 1.96 * np.sqrt(max(accuracy * (1 - accuracy), 1e-9) / max(tested, 1))
    return {
        "kid": {
            "value": kid.value,
            "low": kid.low,
            "high": kid.high,
            "subset_size": kid.subset_size,
        },
        "sliced_wasserstein": {"value": swd, "low": low, "high": high},
        "probe_accuracy": {
            "value": accuracy,
            "low": accuracy - half,
            "high": accuracy + half,
            "tested": tested,
        },
    }


def score_translator(
    translator: Translator,
    real_dataset: str | Path,
    sim_dataset: str | Path,
    max_frames: int = 600,
    stride: int = 2,
    temporal_episodes: int = 3,
    contact_sheet: str | Path | None = None,
    real_episodes: list[int] | None = None,
) -> dict[str, Any]:
    """Score ``translator`` (see the module docstring); return the figures per camera.

    Args:
        translator: The translator.
        real_dataset: Real frames: the dataset it was trained on (its held-out episodes are
            used), or another real dataset with ``real_episodes``.
        sim_dataset: The rendered frames to translate.
        max_frames: Frames per set at most.
        stride: Every ``stride``-th real frame (sim frames: every ``3 * stride``-th).
        temporal_episodes: Sim episodes whose warping error is measured.
        contact_sheet: Where to write the PNG (None: none).
        real_episodes: Episodes of ``real_dataset`` the translator never saw (the caller
            vouches for it: e.g. demos recorded after the ones it was trained on).

    Raises:
        TranslationInputError: The real dataset is not the one the translator was trained on
            and no episodes are named, or a dataset's cameras do not fit the translator.

    """
    trained_on = Path(translator.meta["trained_on"]["dataset"])
    if real_episodes is None and Path(real_dataset).resolve() != trained_on:
        raise TranslationInputError(
            f"{real_dataset}: the translator's held-out episodes are of {trained_on}; score it "
            "on that dataset (its training episodes are never scored), or name unseen episodes"
        )
    translator.check_cameras(dataset_cameras(sim_dataset).shapes, str(sim_dataset))
    holdout = (
        real_episodes
        if real_episodes is not None
        else translator.meta["trained_on"]["holdout_episodes"]
    )
    px = translator.image_px
    features = ImageNetFeatures()
    report: dict[str, Any] = {
        "translator": str(translator.path),
        "kind": translator.kind,
        "real_dataset": str(real_dataset),
        "real_episodes": list(holdout),
        "cameras": {},
    }
    sheet_rows = []
    for key in sorted(translator.cameras):
        real = read_frames(real_dataset, key, holdout, stride, px, max_frames)
        rendered_full = read_frames(sim_dataset, key, None, stride * 3, None, max_frames)
        rendered = np.stack([resize_image(f, px, px) for f in rendered_full])
        translated = translator.translate(key, rendered_full)
        real_f, rendered_f, translated_f = features(real), features(rendered), features(translated)
        temporal_t, temporal_r = [], []
        for index in range(temporal_episodes):
            try:
                episode = read_frames(sim_dataset, key, [index], 1, None, 60)
            except (TranslationInputError, IndexError):
                break
            sized = np.stack([resize_image(f, px, px) for f in episode])
            err_t, err_r = warping_error(sized, translator.translate(key, episode))
            temporal_t.append(err_t)
            temporal_r.append(err_r)
        report["cameras"][key] = {
            "real_frames": len(real),
            "sim_frames": len(rendered),
            "rendered": _domain_scores(real_f, rendered_f),
            "translated": _domain_scores(real_f, translated_f),
            "warping_error": {
                "translated": float(np.mean(temporal_t)) if temporal_t else None,
                "rendered": float(np.mean(temporal_r)) if temporal_r else None,
                "episodes": len(temporal_t),
            },
        }
        picks = np.linspace(0, len(rendered) - 1, 6).astype(int)
        real_picks = np.linspace(0, len(real) - 1, 6).astype(int)
        sheet_rows += [
            np.hstack(list(real[real_picks])),
            np.hstack(list(rendered[picks])),
            np.hstack(list(translated[picks])),
        ]
    if contact_sheet is not None:
        sheet = np.vstack(sheet_rows)
        scale = max(1, 256 // px)
        sheet = cv2.resize(sheet, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
        Path(contact_sheet).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(contact_sheet), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
        report["contact_sheet"] = str(contact_sheet)
        report["contact_sheet_rows"] = [
            f"{key}: {row}"
            for key in sorted(translator.cameras)
            for row in ("held-out real", "rendered", "translated")
        ]
    return report
