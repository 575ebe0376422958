"""Image <-> message conversion: bit-exact both ways for every supported encoding."""

from __future__ import annotations

import array
import sys

import numpy as np
import pytest
from r2s2r_common.image_conversion import (
    ENCODINGS,
    ImageConversionError,
    array_to_image_fields,
    from_image_msg,
    image_fields_to_array,
    to_image_msg,
)

HEIGHT, WIDTH = 7, 11  # odd sizes catch row/column mix-ups


def make_array(encoding: str, seed: int = 3) -> np.ndarray:
    """Random image covering the full value range of the encoding's dtype."""
    rng = np.random.default_rng(seed)
    spec = ENCODINGS[encoding]
    shape = (HEIGHT, WIDTH) if spec.channels == 1 else (HEIGHT, WIDTH, spec.channels)
    if spec.dtype is np.float32:
        values = rng.normal(0.0, 1e3, size=shape).astype(np.float32)
        # Special values must survive too: NaN (no depth), infinities, signed zero, subnormal.
        values.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, np.float32(1e-45)]
        return values
    info = np.iinfo(spec.dtype)
    values = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=spec.dtype)
    values.flat[0], values.flat[1] = info.min, info.max
    return values


def bits(values: np.ndarray) -> bytes:
    """Raw bytes in native order: equality means bit-exact (NaN payloads included)."""
    return np.ascontiguousarray(values).tobytes()


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_fields_round_trip_is_bit_exact(encoding: str) -> None:
    original = make_array(encoding)
    fields = array_to_image_fields(original, encoding)
    spec = ENCODINGS[encoding]
    assert (fields.height, fields.width) == (HEIGHT, WIDTH)
    assert fields.step == WIDTH * spec.bytes_per_pixel
    assert len(fields.data) == fields.step * HEIGHT
    assert fields.is_bigendian == (sys.byteorder == "big")
    decoded = image_fields_to_array(
        fields.height, fields.width, fields.encoding, fields.is_bigendian, fields.step, fields.data
    )
    assert decoded.shape == original.shape
    assert decoded.dtype == original.dtype
    assert bits(decoded) == bits(original)
    assert decoded.flags.writeable


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_message_round_trip_is_bit_exact(encoding: str) -> None:
    from builtin_interfaces.msg import Time

    original = make_array(encoding, seed=11)
    msg = to_image_msg(original, encoding, Time(sec=12, nanosec=345), "head_camera_optical_frame")
    assert msg.encoding == encoding
    assert msg.header.frame_id == "head_camera_optical_frame"
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 345)
    assert isinstance(msg.data, array.array)
    decoded = from_image_msg(msg)
    assert bits(decoded) == bits(original)
    assert decoded.dtype == original.dtype


def test_message_does_not_alias_the_source_array() -> None:
    original = make_array("mono8")
    msg = to_image_msg(original, "mono8")
    original[0, 0] ^= 0xFF
    assert from_image_msg(msg)[0, 0] == original[0, 0] ^ 0xFF


def test_16uc1_bytes_are_little_endian_on_this_host_and_decode_as_values() -> None:
    depth_mm = np.array([[1, 256, 0xABCD]], dtype=np.uint16)
    fields = array_to_image_fields(depth_mm, "16UC1")
    if sys.byteorder == "little":
        assert fields.data == bytes([0x01, 0x00, 0x00, 0x01, 0xCD, 0xAB])
    # The same values sent big-endian (e.g. by another host) must decode to the same numbers.
    big = depth_mm.astype(">u2").tobytes()
    decoded = image_fields_to_array(1, 3, "16UC1", True, 6, big)
    np.testing.assert_array_equal(decoded, depth_mm)
    assert decoded.dtype == np.dtype(np.uint16)


def test_32fc1_big_endian_payload_decodes_bit_exact() -> None:
    depth_m = make_array("32FC1")
    big = depth_m.astype(">f4").tobytes()
    decoded = image_fields_to_array(HEIGHT, WIDTH, "32FC1", 1, WIDTH * 4, big)
    assert bits(decoded) == bits(depth_m)


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_row_padding_is_skipped(encoding: str) -> None:
    original = make_array(encoding, seed=5)
    spec = ENCODINGS[encoding]
    row_bytes = WIDTH * spec.bytes_per_pixel
    padding = 13
    padded = bytearray()
    raw = original.tobytes()
    for row in range(HEIGHT):
        padded += raw[row * row_bytes : (row + 1) * row_bytes] + b"\xee" * padding
    decoded = image_fields_to_array(
        HEIGHT, WIDTH, encoding, sys.byteorder == "big", row_bytes + padding, bytes(padded)
    )
    assert bits(decoded) == bits(original)


def test_single_channel_accepts_trailing_axis_of_one() -> None:
    depth = make_array("16UC1")[:, :, None]
    fields = array_to_image_fields(depth, "16UC1")
    decoded = image_fields_to_array(
        HEIGHT, WIDTH, "16UC1", fields.is_bigendian, fields.step, fields.data
    )
    np.testing.assert_array_equal(decoded, depth[:, :, 0])


def test_non_contiguous_views_are_packed_correctly() -> None:
    big = make_array("rgb8")
    view = big[1:6:2, ::-1]  # strided and reversed
    fields = array_to_image_fields(view, "rgb8")
    decoded = image_fields_to_array(
        view.shape[0], view.shape[1], "rgb8", 0, fields.step, fields.data
    )
    np.testing.assert_array_equal(decoded, view)


def test_unsupported_encoding_is_named() -> None:
    with pytest.raises(ImageConversionError, match=r"'yuv422'.*supported: rgb8"):
        array_to_image_fields(np.zeros((2, 2, 2), np.uint8), "yuv422")
    with pytest.raises(ImageConversionError, match="'bayer_rggb8'"):
        image_fields_to_array(2, 2, "bayer_rggb8", 0, 2, b"\x00" * 4)


@pytest.mark.parametrize(
    ("array", "encoding", "match"),
    [
        (np.zeros((4, 4, 3), np.float32), "rgb8", "needs uint8"),
        (np.zeros((4, 4), np.uint8), "bgr8", r"needs \(height, width, 3\)"),
        (np.zeros((4, 4, 3), np.uint8), "mono8", r"needs \(height, width\)"),
        (np.zeros((4, 4), np.float64), "32FC1", "needs float32"),
        (np.zeros((4, 4), np.int16), "16UC1", "needs uint16"),
        (np.zeros((0, 4), np.uint8), "mono8", "empty"),
    ],
)
def test_shape_and_dtype_mismatch_are_errors(array: np.ndarray, encoding: str, match: str) -> None:
    with pytest.raises(ImageConversionError, match=match):
        array_to_image_fields(array, encoding)


def test_size_mismatch_is_an_error() -> None:
    with pytest.raises(ImageConversionError, match=r"len\(data\) = 11: expected .* = 12 bytes"):
        image_fields_to_array(2, 2, "16UC1", 0, 6, b"\x00" * 11)
    with pytest.raises(ImageConversionError, match="step = 5: shorter than one row"):
        image_fields_to_array(2, 3, "16UC1", 0, 5, b"\x00" * 10)
