"""Bit-exact conversion between NumPy arrays and ``sensor_msgs/Image``.

The PyPI ``cv-bridge`` is a ROS 1 repackaging that breaks with NumPy 2 / OpenCV 5 and decodes
16UC1 depth wrongly, so every r2s2r node converts images through this module instead.

The core (:func:`array_to_image_fields`, :func:`image_fields_to_array`) is ROS-free: it maps an
array to the plain fields of an Image message (:class:`ImageFields`) and back. The thin
:func:`to_image_msg` / :func:`from_image_msg` import ``sensor_msgs`` only when called.

Supported encodings (array layout, dtype):

=========  ==============  =========
encoding   array shape     dtype
=========  ==============  =========
rgb8       (H, W, 3)       uint8
bgr8       (H, W, 3)       uint8
mono8      (H, W)          uint8
16UC1      (H, W)          uint16
32FC1      (H, W)          float32
=========  ==============  =========

Single-channel encodings also accept an ``(H, W, 1)`` array when encoding (the layout in memory
is identical); decoding always returns ``(H, W)``.
"""

from __future__ import annotations

import array as pyarray
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # message types are imported lazily so the core stays ROS-free
    from sensor_msgs.msg import Image


@dataclass(frozen=True)
class EncodingSpec:
    """Memory layout of one image encoding.

    Attributes:
        channels: Values per pixel.
        dtype: NumPy scalar type of one value (native byte order).

    """

    channels: int
    dtype: type[np.generic]

    @property
    def bytes_per_pixel(self) -> int:
        """Bytes one pixel occupies in a row."""
        return self.channels * np.dtype(self.dtype).itemsize


ENCODINGS: dict[str, EncodingSpec] = {
    "rgb8": EncodingSpec(3, np.uint8),
    "bgr8": EncodingSpec(3, np.uint8),
    "mono8": EncodingSpec(1, np.uint8),
    "16UC1": EncodingSpec(1, np.uint16),
    "32FC1": EncodingSpec(1, np.float32),
}
"""Supported encodings, by their ``sensor_msgs/image_encodings`` name."""

HOST_IS_BIGENDIAN = sys.byteorder == "big"


class ImageConversionError(ValueError):
    """An array or message cannot be converted: wrong encoding, shape, dtype or data size."""


@dataclass(frozen=True)
class ImageFields:
    """The content fields of a ``sensor_msgs/Image`` (everything except the header).

    Attributes:
        height: Rows, in pixels.
        width: Columns, in pixels.
        encoding: One of :data:`ENCODINGS`.
        is_bigendian: Byte order of multi-byte values in ``data``.
        step: Bytes per row, including any padding at the row end.
        data: ``step * height`` bytes.

    """

    height: int
    width: int
    encoding: str
    is_bigendian: bool
    step: int
    data: bytes


def encoding_spec(encoding: str) -> EncodingSpec:
    """Look up the layout of an encoding.

    Raises:
        ImageConversionError: If the encoding is not supported.

    """
    spec = ENCODINGS.get(encoding)
    if spec is None:
        supported = ", ".join(ENCODINGS)
        raise ImageConversionError(
            f"encoding = {encoding!r}: unsupported image encoding (supported: {supported})"
        )
    return spec


def _checked_array(array: np.ndarray, encoding: str) -> np.ndarray:
    """Validate ``array`` against ``encoding`` and return it as (H, W[, C]) with native order."""
    spec = encoding_spec(encoding)
    if not isinstance(array, np.ndarray):
        raise ImageConversionError(f"array: expected a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.newbyteorder("=") != np.dtype(spec.dtype):
        raise ImageConversionError(
            f"array.dtype = {array.dtype}: encoding {encoding!r} needs "
            f"{np.dtype(spec.dtype).name} (convert explicitly; values are never cast silently)"
        )
    if spec.channels == 1:
        if array.ndim == 3 and array.shape[2] == 1:
            array = array[:, :, 0]
        if array.ndim != 2:
            raise ImageConversionError(
                f"array.shape = {array.shape}: encoding {encoding!r} needs (height, width)"
            )
    elif array.ndim != 3 or array.shape[2] != spec.channels:
        raise ImageConversionError(
            f"array.shape = {array.shape}: encoding {encoding!r} needs "
            f"(height, width, {spec.channels})"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ImageConversionError(f"array.shape = {array.shape}: image is empty")
    return array.astype(array.dtype.newbyteorder("="), copy=False)


def array_to_image_fields(array: np.ndarray, encoding: str) -> ImageFields:
    """Pack an array into Image fields (host byte order, rows without padding).

    Args:
        array: Image array; shape and dtype must match ``encoding`` (see module table).
        encoding: Target encoding.

    Returns:
        The fields; ``data`` is a copy, so later changes to ``array`` do not leak into it.

    Raises:
        ImageConversionError: Unsupported encoding, or shape/dtype not matching it.

    """
    checked = _checked_array(array, encoding)
    spec = ENCODINGS[encoding]
    height, width = int(checked.shape[0]), int(checked.shape[1])
    return ImageFields(
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=HOST_IS_BIGENDIAN,
        step=width * spec.bytes_per_pixel,
        data=np.ascontiguousarray(checked).tobytes(),
    )


def _as_bytes_view(data: Any) -> memoryview:
    """Return a flat byte view of message data (bytes, bytearray, array.array, list, ndarray)."""
    if isinstance(data, np.ndarray):
        return memoryview(np.ascontiguousarray(data).view(np.uint8).reshape(-1).tobytes())
    if isinstance(data, bytes | bytearray | memoryview | pyarray.array):
        return memoryview(data).cast("B")
    if isinstance(data, list | tuple):
        return memoryview(bytes(data))
    raise ImageConversionError(
        f"data: expected bytes, array.array or a list of ints, got {type(data).__name__}"
    )


def image_fields_to_array(
    height: int,
    width: int,
    encoding: str,
    is_bigendian: bool | int,
    step: int,
    data: Any,
) -> np.ndarray:
    """Unpack Image fields into a new array (native byte order, row padding removed).

    Args:
        height: Rows, in pixels.
        width: Columns, in pixels.
        encoding: One of :data:`ENCODINGS`.
        is_bigendian: Byte order of multi-byte values in ``data``.
        step: Bytes per row; may exceed ``width * bytes_per_pixel`` (padding is skipped).
        data: ``step * height`` bytes (bytes, bytearray, ``array.array('B')`` or ndarray).

    Returns:
        A writable array of shape (H, W) or (H, W, C) that does not alias ``data``.

    Raises:
        ImageConversionError: Unsupported encoding, step shorter than a row, or a data size
            that is not ``step * height``.

    """
    spec = encoding_spec(encoding)
    if height <= 0 or width <= 0:
        raise ImageConversionError(f"height x width = {height} x {width}: image is empty")
    row_bytes = width * spec.bytes_per_pixel
    if step < row_bytes:
        raise ImageConversionError(
            f"step = {step}: shorter than one row of {width} px x {spec.bytes_per_pixel} "
            f"bytes = {row_bytes} for encoding {encoding!r}"
        )
    raw = _as_bytes_view(data)
    if raw.nbytes != step * height:
        raise ImageConversionError(
            f"len(data) = {raw.nbytes}: expected step x height = {step} x {height} = "
            f"{step * height} bytes"
        )
    wire_dtype = np.dtype(spec.dtype).newbyteorder(">" if bool(is_bigendian) else "<")
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, step)[:, :row_bytes]
    pixels = np.ascontiguousarray(rows).view(wire_dtype)
    pixels = pixels.astype(np.dtype(spec.dtype), copy=True)  # native order, owned memory
    if spec.channels == 1:
        return pixels.reshape(height, width)
    return pixels.reshape(height, width, spec.channels)


def to_image_msg(array: np.ndarray, encoding: str, stamp: Any = None, frame_id: str = "") -> Image:
    """Build a ``sensor_msgs/Image`` from an array.

    Args:
        array: Image array matching ``encoding``.
        encoding: One of :data:`ENCODINGS`.
        stamp: ``builtin_interfaces/Time`` for the header (capture time); left zero if None.
        frame_id: Header frame, e.g. ``head_camera_optical_frame``.

    Raises:
        ImageConversionError: See :func:`array_to_image_fields`.

    """
    from sensor_msgs.msg import Image

    fields = array_to_image_fields(array, encoding)
    msg = Image()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height = fields.height
    msg.width = fields.width
    msg.encoding = fields.encoding
    msg.is_bigendian = int(fields.is_bigendian)
    msg.step = fields.step
    msg.data = pyarray.array("B", fields.data)
    return msg


def from_image_msg(msg: Image) -> np.ndarray:
    """Convert a ``sensor_msgs/Image`` to a new array (see :func:`image_fields_to_array`).

    Raises:
        ImageConversionError: Unsupported encoding or inconsistent size fields.

    """
    return image_fields_to_array(
        height=int(msg.height),
        width=int(msg.width),
        encoding=str(msg.encoding),
        is_bigendian=bool(msg.is_bigendian),
        step=int(msg.step),
        data=msg.data,
    )
