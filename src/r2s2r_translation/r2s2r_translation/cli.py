"""``r2s2r translate``: train a sim-to-real translator, translate a dataset, score a translator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import click
from r2s2r_common.console import progress_reporter

from .checkpoint import KINDS, TranslatorKind, load_translator
from .dataset import translate_dataset
from .diffusion import DiffusionSettings
from .structure_translator import StructureTrainConfig
from .train import train_translator
from .unpaired import UnpairedTrainConfig


@click.group("translate")
def translate_group() -> None:
    """Sim-to-real visual translation (the paper's third finding)."""


@translate_group.command("train")
@click.argument("real_dataset", type=click.Path(exists=True))
@click.option("--model", "kind", type=click.Choice(KINDS), required=True, help="Translator kind.")
@click.option("--out", required=True, type=click.Path(), help="Checkpoint folder to create.")
@click.option(
    "--sim", "sim_dataset", type=click.Path(exists=True), help="colour, cut: sim frames (unpaired)."
)
@click.option("--image-px", type=int, default=64, show_default=True, help="Working size.")
@click.option("--steps", type=int, default=None, help="structure, cut: optimiser steps.")
@click.option(
    "--diffusion-model",
    type=click.Path(),
    default=None,
    help="diffusion (unverified, needs a CUDA GPU): a local diffusers WanVACE model folder.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Training seed.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def train_command(
    real_dataset: str,
    kind: str,
    out: str,
    sim_dataset: str | None,
    image_px: int,
    steps: int | None,
    diffusion_model: str | None,
    seed: int,
    no_progress: bool,
) -> None:
    """Train a translator on REAL_DATASET's frames (real episodes only), every camera."""
    diffusion = (
        DiffusionSettings(model_path=str(Path(diffusion_model).resolve()), seed=seed)
        if diffusion_model
        else None
    )
    config = StructureTrainConfig(seed=seed, **({"steps": steps} if steps else {}))
    unpaired = UnpairedTrainConfig(seed=seed, **({"steps": steps} if steps else {}))
    bars: dict[str, object] = {}

    def progress(camera: str, step: int, note: str) -> None:
        bar = bars.get(camera)
        if bar is None:
            bar = bars[camera] = progress_reporter(
                camera, config.steps, not no_progress, unit="step"
            )
        bar.update(step, note)  # type: ignore[attr-defined]

    path = train_translator(
        real_dataset,
        cast(TranslatorKind, kind),
        out,
        image_px,
        sim_dataset,
        config,
        unpaired,
        diffusion,
        split_seed=seed,
        progress=progress,
    )
    for bar in bars.values():
        bar.close()  # type: ignore[attr-defined]
    meta = json.loads((path / "translator.json").read_text())
    for camera, log in meta.get("log", {}).items():
        click.echo(
            f"{camera}: held-out L1 {log['holdout_l1'][-1]:.4f} after {log['steps'][-1]} steps "
            f"({log['wall_s']:.0f} s, {log['training_frames']} frames)"
        )
    click.echo(f"wrote {path}")


@translate_group.command("dataset")
@click.argument("source", type=click.Path(exists=True))
@click.argument("out", type=click.Path())
@click.option("--translator", "checkpoint", required=True, type=click.Path(exists=True))
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def dataset_command(source: str, out: str, checkpoint: str, no_progress: bool) -> None:
    """Translate every camera of the simulated dataset SOURCE into OUT (resumable)."""
    translator = load_translator(checkpoint)
    bar = progress_reporter("translate", None, not no_progress, unit="episode")
    path = translate_dataset(
        source, out, translator, lambda done, total: bar.update(done, f"of {total}")
    )
    bar.close()
    click.echo(f"wrote {path}")


@translate_group.command("score")
@click.argument("real_dataset", type=click.Path(exists=True))
@click.argument("sim_dataset", type=click.Path(exists=True))
@click.option("--translator", "checkpoint", required=True, type=click.Path(exists=True))
@click.option("--out", type=click.Path(), default=None, help="JSON report (default: stdout).")
@click.option(
    "--contact-sheet", type=click.Path(), default=None, help="PNG: real / rendered / translated."
)
@click.option("--max-frames", type=int, default=600, show_default=True)
def score_command(
    real_dataset: str,
    sim_dataset: str,
    checkpoint: str,
    out: str | None,
    contact_sheet: str | None,
    max_frames: int,
) -> None:
    """Score a translator on REAL_DATASET's held-out episodes against SIM_DATASET's frames."""
    from .score import score_translator

    report = score_translator(
        load_translator(checkpoint),
        real_dataset,
        sim_dataset,
        max_frames,
        contact_sheet=contact_sheet,
    )
    text = json.dumps(report, indent=2)
    if out:
        Path(out).write_text(text + "\n")
        click.echo(f"wrote {out}")
    else:
        click.echo(text)
    for camera, figures in report["cameras"].items():
        for which in ("rendered", "translated"):
            kid = figures[which]["kid"]
            probe = figures[which]["probe_accuracy"]["value"]
            click.echo(
                f"{camera} {which:>10}: KID {kid['value']:.4f} "
                f"[{kid['low']:.4f}, {kid['high']:.4f}], probe {probe:.2f}",
                err=True,
            )
