"""Read an exported dataset back with LeRobot's own ``LeRobotDataset`` and compare (test helper).

Run by ``test_lerobot_export.py`` with the interpreter of a separate virtual environment that
holds LeRobot (``lerobot-dataset`` from PyPI, imported as ``ledataset``, or ``lerobot``), never
the workspace's: ``PYTHON lerobot_reader_check.py EXPORT EXPECTED.npz``. It prints one JSON
object: what the reader returned and how it compares with the expected arrays.

Two things of the reader cannot run beside a CPU-only torch, and are replaced here in the open:

- ``import torchvision`` (module level in LeRobot 0.4's dataset utils, used for image
  transforms and its legacy video reader): PyPI's torchvision links ``libtorch_cuda``. When
  it does not import, a stand-in module is put in its place whose every attribute raises, so
  any real use fails the check instead of passing silently.
- Video decoding: LeRobot's decoders are torchcodec (PyPI's wheels link CUDA) and
  torchvision's ``VideoReader``. When neither loads, ``decode_video_frames`` is replaced by a
  PyAV decoder with the same contract (the frame nearest each queried timestamp, an error when
  it is more than ``tolerance_s`` away, float32 (C, H, W) in [0, 1]); the JSON says which
  decoder ran. The timestamps queried, the video file and the episode's offset in it are
  LeRobot's.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _guard_torchvision() -> bool:
    """Import torchvision, or put a stand-in that raises on use; True when the real one loaded."""
    try:
        importlib.import_module("torchvision")
        return True
    except Exception:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]

    class _Unavailable(types.ModuleType):
        def __getattr__(self, attribute: str) -> Any:
            if attribute.startswith("__"):
                raise AttributeError(attribute)
            raise RuntimeError(
                f"{self.__name__}.{attribute} used, but torchvision does not load beside this "
                "torch (the check cannot vouch for that path)"
            )

    root = _Unavailable("torchvision")
    transforms = _Unavailable("torchvision.transforms")
    for module in (root, transforms):
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    root.transforms = transforms  # type: ignore[attr-defined]
    sys.modules["torchvision"] = root
    sys.modules["torchvision.transforms"] = transforms
    return False


def _lerobot_modules() -> tuple[Any, str]:
    """Return LeRobot's dataset module and its package name."""
    for package in ("ledataset", "lerobot"):
        try:
            return importlib.import_module(f"{package}.datasets.lerobot_dataset"), package
        except ModuleNotFoundError as error:
            if error.name is not None and error.name.split(".")[0] != package:
                raise
    raise SystemExit("neither ledataset (lerobot-dataset) nor lerobot is installed")


def _pyav_decode(video_path: Any, timestamps: list[float], tolerance_s: float, *_: Any) -> Any:
    """PyAV stand-in for LeRobot's decoders (same contract; see the module docstring)."""
    import av
    import numpy as np
    import torch

    frames: list[np.ndarray] = []
    times: list[float] = []
    with av.open(str(video_path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            times.append(float(frame.time))
            frames.append(frame.to_ndarray(format="rgb24"))
            if times[-1] > max(timestamps) + tolerance_s:
                break
    loaded = np.array(times)
    out = []
    for query in timestamps:
        nearest = int(np.argmin(np.abs(loaded - query)))
        if abs(loaded[nearest] - query) > tolerance_s:
            raise RuntimeError(
                f"{video_path}: no frame within {tolerance_s} s of {query} s "
                f"(nearest {loaded[nearest]} s)"
            )
        out.append(torch.from_numpy(frames[nearest]).permute(2, 0, 1).float() / 255.0)
    return torch.stack(out)


def _psnr_db(a: Any, b: Any) -> float:
    import numpy as np

    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0.0 else 10.0 * np.log10(255.0**2 / mse)


def main() -> None:
    """Load the export with LeRobotDataset and compare every frame with the expected arrays."""
    import numpy as np

    export, expected_path = Path(sys.argv[1]), Path(sys.argv[2])
    torchvision_loaded = _guard_torchvision()
    dataset_module, package = _lerobot_modules()
    decoder = "lerobot"
    if not torchvision_loaded and importlib.util.find_spec("torchcodec") is None:
        dataset_module.decode_video_frames = _pyav_decode
        decoder = "pyav stand-in (LeRobot's decoders need torchcodec or torchvision)"
    dataset = dataset_module.LeRobotDataset("r2s2r/export", root=export)
    expected = np.load(expected_path)
    result: dict[str, Any] = {
        "package": package,
        "version": importlib.metadata.version(
            "lerobot-dataset" if package == "ledataset" else "lerobot"
        ),
        "decoder": decoder,
        "torchvision_loaded": torchvision_loaded,
        "fps": dataset.fps,
        "num_frames": len(dataset),
        "num_episodes": dataset.num_episodes,
        "features": {
            k: {"dtype": v["dtype"], "shape": list(v["shape"])} for k, v in dataset.features.items()
        },
        "video_keys": list(dataset.meta.video_keys),
        "tasks": list(dataset.meta.tasks.index),
        "stats_keys": sorted(dataset.meta.stats) if dataset.meta.stats is not None else [],
        "episode_sources": list(dataset.meta.episodes["r2s2r/source"]),
    }
    low_dim = [k for k in expected.files if not k.startswith("video:")]
    mismatched: dict[str, int] = {k: 0 for k in low_dim}
    max_abs_diff: dict[str, int] = {}
    min_psnr: dict[str, float] = {}
    for index in range(len(dataset)):
        item = dataset[index]
        for key in low_dim:
            got = item[key].numpy() if hasattr(item[key], "numpy") else np.asarray(item[key])
            want = expected[key][index]
            if got.shape != np.shape(want) or not np.array_equal(got, want):
                mismatched[key] += 1
        for key in dataset.meta.video_keys:
            frame = item[key].numpy()  # float32 (C, H, W) in [0, 1]
            pixels = np.clip(np.round(frame * 255.0), 0, 255).astype(np.uint8).transpose(1, 2, 0)
            want = expected[f"video:{key}"][index]
            diff = int(np.abs(pixels.astype(np.int16) - want.astype(np.int16)).max())
            max_abs_diff[key] = max(max_abs_diff.get(key, 0), diff)
            min_psnr[key] = min(min_psnr.get(key, float("inf")), _psnr_db(pixels, want))
        if item["task"] != result["tasks"][int(item["task_index"])]:
            mismatched.setdefault("task", 0)
            mismatched["task"] += 1
    result["mismatched_frames"] = mismatched
    result["max_abs_pixel_diff"] = max_abs_diff
    result["min_psnr_db"] = {k: (None if v == float("inf") else v) for k, v in min_psnr.items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
