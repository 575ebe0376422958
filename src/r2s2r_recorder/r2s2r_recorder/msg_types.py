"""Message types for reading and writing bags without ROS: a rosbags typestore with ours.

The rosbags typestore knows the standard ROS 2 messages (sensor_msgs, trajectory_msgs,
tf2_msgs, ...). Project messages (``r2s2r_interfaces``) are registered from their ``.msg``
text: from an installed ``share/r2s2r_interfaces/msg`` when one is on ``AMENT_PREFIX_PATH``,
else from the copies shipped in this package (``r2s2r_recorder/msg``).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

PROJECT_PACKAGE = "r2s2r_interfaces"
_BUNDLED_MSG_DIR = Path(__file__).resolve().parent / "msg"
_HEADER_TYPE = "std_msgs/msg/Header"


def _msg_dirs(package: str) -> list[Path]:
    """Candidate ``msg`` directories for ``package``: installed ones first."""
    dirs = [
        Path(prefix) / "share" / package / "msg"
        for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
        if prefix
    ]
    if package == PROJECT_PACKAGE:
        dirs.append(_BUNDLED_MSG_DIR)
    return [d for d in dirs if d.is_dir()]


def register_msg_dir(typestore: Typestore, package: str, msg_dir: Path) -> list[str]:
    """Register every ``.msg`` file of ``msg_dir`` as ``<package>/msg/<Name>``.

    Returns:
        The type names registered.

    """
    types = {}
    for msg_file in sorted(msg_dir.glob("*.msg")):
        name = f"{package}/msg/{msg_file.stem}"
        types.update(get_types_from_msg(msg_file.read_text(encoding="utf-8"), name))
    typestore.register(types)
    return sorted(types)


def make_typestore() -> Typestore:
    """Return a ROS 2 Kilted typestore with the project messages registered."""
    typestore = get_typestore(Stores.ROS2_KILTED)
    for msg_dir in _msg_dirs(PROJECT_PACKAGE)[:1]:
        register_msg_dir(typestore, PROJECT_PACKAGE, msg_dir)
    return typestore


def ensure_type(typestore: Typestore, msgtype: str) -> bool:
    """Make ``msgtype`` known to ``typestore``, loading its package's ``.msg`` files if needed.

    Args:
        typestore: Store to extend.
        msgtype: Type name as on the ROS graph, e.g. ``r2s2r_interfaces/msg/ObjectTrackArray``.

    Returns:
        True when the type is known afterwards.

    """
    if msgtype in typestore.fielddefs:
        return True
    package = msgtype.split("/", 1)[0]
    for msg_dir in _msg_dirs(package):
        try:
            register_msg_dir(typestore, package, msg_dir)
        except Exception:
            continue
        if msgtype in typestore.fielddefs:
            return True
    return False


def has_header_first(typestore: Typestore, msgtype: str) -> bool:
    """Return True when the first field of ``msgtype`` is a ``std_msgs/Header``."""
    fields = typestore.fielddefs.get(msgtype)
    if not fields or not fields[1]:
        return False
    first = fields[1][0][1]
    return bool(first[1] == _HEADER_TYPE)


def header_stamp_ns(data: bytes | memoryview) -> int:
    """Read ``header.stamp`` from CDR bytes of a message whose first field is a Header.

    The 4-byte encapsulation header is followed by ``int32 sec, uint32 nanosec``; read
    directly so the recorder need not deserialise images to learn their time.

    Raises:
        ValueError: If the data is too short or not little/big-endian CDR.

    """
    if len(data) < 12:
        raise ValueError(f"CDR message of {len(data)} bytes: too short for a header stamp")
    kind = bytes(data[0:2])
    if kind in (b"\x00\x01", b"\x00\x03"):
        sec, nanosec = struct.unpack_from("<iI", data, 4)
    elif kind in (b"\x00\x00", b"\x00\x02"):
        sec, nanosec = struct.unpack_from(">iI", data, 4)
    else:
        raise ValueError(f"CDR encapsulation {kind.hex()}: expected CDR_LE or CDR_BE")
    return int(sec) * 1_000_000_000 + int(nanosec)


def deserialize(typestore: Typestore, data: bytes | memoryview, msgtype: str) -> Any:
    """Deserialize CDR bytes, tolerating trailing bytes after the message.

    rclpy (rmw_fastrtps, Kilted) can hand out serialized messages with a few trailing bytes
    beyond the encoded content, which ``Typestore.deserialize_cdr`` rejects as a size
    mismatch; the content itself is well-formed, so decode it with the same generated
    deserializer and ignore the tail.

    Raises:
        ValueError: If the encapsulation is not CDR or the content cannot be decoded.

    """
    if len(data) < 4 or bytes(data[:2]) not in (b"\x00\x00", b"\x00\x01"):
        raise ValueError(f"{msgtype}: invalid or unsupported CDR encapsulation")
    msgdef = typestore.get_msgdef(msgtype)
    little_endian = bool(data[1])
    func = msgdef.deserialize_cdr_le if little_endian else msgdef.deserialize_cdr_be
    try:
        message, _pos = func(memoryview(data)[4:], 0, msgdef.cls, typestore)
    except (struct.error, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{msgtype}: cannot deserialize CDR: {error}") from None
    return message
