"""Camera calibration in the ROS ``camera_calibration`` YAML format, typed.

The file format is the one written by ``camera_calibration`` / ``camera_info_manager``::

    image_width: 640
    image_height: 480
    camera_name: head_camera
    camera_matrix: {rows: 3, cols: 3, data: [fx, 0, cx, 0, fy, cy, 0, 0, 1]}
    distortion_model: plumb_bob
    distortion_coefficients: {rows: 1, cols: 5, data: [k1, k2, t1, t2, k3]}
    rectification_matrix: {rows: 3, cols: 3, data: [...]}
    projection_matrix: {rows: 3, cols: 4, data: [...]}

:class:`CameraCalibration` validates it; :func:`camera_info_fields` gives the plain fields of a
``sensor_msgs/CameraInfo`` and :func:`to_camera_info_msg` builds the message (importing
``sensor_msgs`` lazily, so this module stays ROS-free).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, model_validator

from r2s2r_common.config import ConfigError, ConfigModel, dump_yaml, parse_config, read_yaml

if TYPE_CHECKING:
    from sensor_msgs.msg import CameraInfo

DISTORTION_COEFFICIENT_COUNTS: dict[str, tuple[int, ...]] = {
    "plumb_bob": (5,),
    "rational_polynomial": (8, 12, 14),
    "equidistant": (4,),
}
"""Coefficient counts accepted per ``distortion_model`` (``sensor_msgs/distortion_models``)."""


class CalibrationResolutionError(ValueError):
    """A calibration was made for another image resolution than the one in use."""


class YamlMatrix(ConfigModel):
    """A row-major matrix as written in camera_calibration YAML (``rows``, ``cols``, ``data``)."""

    rows: int = Field(ge=1, description="Number of rows.")
    cols: int = Field(ge=1, description="Number of columns.")
    data: list[float] = Field(description="rows * cols values, row-major.")

    @model_validator(mode="after")
    def _check_size(self) -> YamlMatrix:
        if len(self.data) != self.rows * self.cols:
            raise ValueError(
                f"data has {len(self.data)} values, expected rows x cols = "
                f"{self.rows} x {self.cols} = {self.rows * self.cols}"
            )
        return self

    @classmethod
    def from_array(cls, values: np.ndarray | list[list[float]]) -> YamlMatrix:
        """Build from a 2D array (a 1D array becomes one row)."""
        matrix = np.atleast_2d(np.asarray(values, dtype=float))
        return cls(
            rows=matrix.shape[0], cols=matrix.shape[1], data=[float(v) for v in matrix.ravel()]
        )

    def to_array(self) -> np.ndarray:
        """Return the matrix as a (rows, cols) float64 array."""
        return np.asarray(self.data, dtype=float).reshape(self.rows, self.cols)


class CameraCalibration(ConfigModel):
    """Intrinsic calibration of one camera, as in the ROS camera_calibration YAML file."""

    image_width: int = Field(gt=0, description="Image width the calibration is valid for, px.")
    image_height: int = Field(gt=0, description="Image height the calibration is valid for, px.")
    camera_name: str = Field(default="", description="Camera name (informational).")
    camera_matrix: YamlMatrix = Field(description="3x3 intrinsic matrix K.")
    distortion_model: str = Field(
        default="plumb_bob", description="plumb_bob, rational_polynomial or equidistant."
    )
    distortion_coefficients: YamlMatrix = Field(description="1xN distortion coefficients D.")
    rectification_matrix: YamlMatrix = Field(
        default_factory=lambda: YamlMatrix.from_array(np.eye(3)),
        description="3x3 rectification rotation R (identity for a monocular camera).",
    )
    projection_matrix: YamlMatrix = Field(description="3x4 projection matrix P.")

    @model_validator(mode="after")
    def _check_shapes(self) -> CameraCalibration:
        expected = {
            "camera_matrix": (3, 3),
            "rectification_matrix": (3, 3),
            "projection_matrix": (3, 4),
        }
        for name, shape in expected.items():
            matrix: YamlMatrix = getattr(self, name)
            if (matrix.rows, matrix.cols) != shape:
                raise ValueError(
                    f"{name} is {matrix.rows}x{matrix.cols}, expected {shape[0]}x{shape[1]}"
                )
        if self.distortion_coefficients.rows != 1:
            raise ValueError(
                f"distortion_coefficients has {self.distortion_coefficients.rows} rows, expected 1"
            )
        counts = DISTORTION_COEFFICIENT_COUNTS.get(self.distortion_model)
        if counts is None:
            raise ValueError(
                f"distortion_model {self.distortion_model!r} is not one of "
                f"{sorted(DISTORTION_COEFFICIENT_COUNTS)}"
            )
        if self.distortion_coefficients.cols not in counts:
            raise ValueError(
                f"distortion_coefficients has {self.distortion_coefficients.cols} values, "
                f"{self.distortion_model} expects {' or '.join(map(str, counts))}"
            )
        return self

    @property
    def k(self) -> np.ndarray:
        """3x3 intrinsic matrix, px."""
        return self.camera_matrix.to_array()

    @property
    def d(self) -> np.ndarray:
        """Distortion coefficients, shape (N,)."""
        return self.distortion_coefficients.to_array().ravel()

    @property
    def r(self) -> np.ndarray:
        """3x3 rectification rotation."""
        return self.rectification_matrix.to_array()

    @property
    def p(self) -> np.ndarray:
        """3x4 projection matrix, px."""
        return self.projection_matrix.to_array()

    def check_resolution(self, width_px: int, height_px: int, source: str = "image") -> None:
        """Ensure the calibration matches an image size.

        Raises:
            CalibrationResolutionError: Naming both resolutions.

        """
        if (width_px, height_px) != (self.image_width, self.image_height):
            raise CalibrationResolutionError(
                f"calibration{f' of {self.camera_name!r}' if self.camera_name else ''} is for "
                f"{self.image_width}x{self.image_height} px, but the {source} is "
                f"{width_px}x{height_px} px"
            )

    def scaled(self, width_px: int, height_px: int) -> CameraCalibration:
        """Return the calibration of the same camera after resizing its images.

        The pixel-unit rows of K and P scale with the image (pixel centres handled with the
        half-pixel convention); distortion and rectification are unchanged.
        """
        scale_x = width_px / self.image_width
        scale_y = height_px / self.image_height
        scale = np.diag([scale_x, scale_y, 1.0])
        shift = np.array(
            [[1.0, 0.0, 0.5 * (scale_x - 1.0)], [0.0, 1.0, 0.5 * (scale_y - 1.0)], [0, 0, 1.0]]
        )
        transform = shift @ scale
        return self.model_copy(
            update={
                "image_width": width_px,
                "image_height": height_px,
                "camera_matrix": YamlMatrix.from_array(transform @ self.k),
                "projection_matrix": YamlMatrix.from_array(transform @ self.p),
            }
        )


def uncalibrated(width_px: int, height_px: int, camera_name: str = "") -> CameraCalibration:
    """Return an uncalibrated (all-zero K, as ROS means it) calibration for a camera without a file.

    K, P are zero, which ``sensor_msgs/CameraInfo`` defines as "uncalibrated"; consumers that
    need intrinsics must check :func:`is_calibrated`.
    """
    return CameraCalibration(
        image_width=width_px,
        image_height=height_px,
        camera_name=camera_name,
        camera_matrix=YamlMatrix.from_array(np.zeros((3, 3))),
        distortion_coefficients=YamlMatrix.from_array(np.zeros((1, 5))),
        projection_matrix=YamlMatrix.from_array(np.zeros((3, 4))),
    )


def is_calibrated(calibration: CameraCalibration) -> bool:
    """Return True when K holds a focal length (CameraInfo K[0] == 0 means uncalibrated)."""
    return bool(calibration.k[0, 0] != 0.0)


def load_camera_calibration(path: str | Path) -> CameraCalibration:
    """Read a camera_calibration YAML file.

    Raises:
        ConfigError: Missing file, bad YAML, or invalid content (named by key).

    """
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a camera_calibration mapping at the top level")
    return parse_config(CameraCalibration, data, str(path))


def save_camera_calibration(calibration: CameraCalibration, path: str | Path) -> None:
    """Write a calibration in the camera_calibration YAML format (atomically)."""
    dump_yaml(calibration.model_dump(mode="json"), path)


def camera_info_fields(calibration: CameraCalibration) -> dict[str, Any]:
    """Return the ``sensor_msgs/CameraInfo`` fields (no header, binning, ROI) as plain values.

    Returns:
        ``height``, ``width``, ``distortion_model``, ``d`` (list), ``k`` (9), ``r`` (9),
        ``p`` (12), row-major.

    """
    return {
        "height": calibration.image_height,
        "width": calibration.image_width,
        "distortion_model": calibration.distortion_model,
        "d": [float(v) for v in calibration.d],
        "k": [float(v) for v in calibration.k.ravel()],
        "r": [float(v) for v in calibration.r.ravel()],
        "p": [float(v) for v in calibration.p.ravel()],
    }


def to_camera_info_msg(
    calibration: CameraCalibration, stamp: Any = None, frame_id: str = ""
) -> CameraInfo:
    """Build a ``sensor_msgs/CameraInfo`` (imports sensor_msgs lazily).

    Args:
        calibration: The calibration.
        stamp: ``builtin_interfaces/Time`` (the stamp of the matching image), or None.
        frame_id: Optical frame, e.g. ``head_camera_optical_frame``.

    """
    from sensor_msgs.msg import CameraInfo

    fields = camera_info_fields(calibration)
    msg = CameraInfo()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height = fields["height"]
    msg.width = fields["width"]
    msg.distortion_model = fields["distortion_model"]
    msg.d = fields["d"]
    msg.k = fields["k"]
    msg.r = fields["r"]
    msg.p = fields["p"]
    return msg


def from_camera_info_msg(msg: CameraInfo, camera_name: str = "") -> CameraCalibration:
    """Build a calibration from a ``sensor_msgs/CameraInfo``.

    Raises:
        ConfigError: If the message content is inconsistent (e.g. wrong D length).

    """
    data = {
        "image_width": int(msg.width),
        "image_height": int(msg.height),
        "camera_name": camera_name,
        "camera_matrix": {"rows": 3, "cols": 3, "data": [float(v) for v in msg.k]},
        "distortion_model": str(msg.distortion_model),
        "distortion_coefficients": {
            "rows": 1,
            "cols": len(msg.d),
            "data": [float(v) for v in msg.d],
        },
        "rectification_matrix": {"rows": 3, "cols": 3, "data": [float(v) for v in msg.r]},
        "projection_matrix": {"rows": 3, "cols": 4, "data": [float(v) for v in msg.p]},
    }
    return parse_config(CameraCalibration, data, "CameraInfo")
