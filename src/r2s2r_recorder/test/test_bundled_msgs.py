"""The recorder's bundled ``.msg`` copies define the same messages as ``r2s2r_interfaces``.

The recorder registers the project messages with rosbags from ``r2s2r_recorder/msg`` when no
installed ``share/r2s2r_interfaces/msg`` is on ``AMENT_PREFIX_PATH`` (``msg_types``), so a copy
that drifted from ``src/r2s2r_interfaces/msg`` would write or read bags with another layout.

Compared after removing comments and blank lines and collapsing whitespace, not byte for
byte: the copies are only fed to rosbags, which stores in a bag a definition regenerated from
the fields and a RIHS01 hash of the fields (both checked below), never the file's comments;
fields, their order, types, array bounds, default values and constants are what must agree.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from r2s2r_recorder.msg_types import PROJECT_PACKAGE, register_msg_dir
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.store import Typestore

INTERFACES_MSG_DIR = Path(__file__).resolve().parents[2] / "r2s2r_interfaces" / "msg"
BUNDLED_MSG_DIR = Path(inspect.getfile(register_msg_dir)).resolve().parent / "msg"

# A string constant's value runs to the end of the line, '#' included (ROS 2 .msg rules).
_STRING_CONSTANT = re.compile(r"^\s*w?string(<=\d+)?\s+[A-Za-z_][A-Za-z0-9_]*\s*=")


def normalized_definition(text: str) -> list[str]:
    """The lines of a ``.msg`` definition without comments, blank lines or extra whitespace."""
    lines = []
    for raw in text.splitlines():
        line = raw if _STRING_CONSTANT.match(raw) else raw.split("#", 1)[0]
        line = " ".join(line.split())
        if line:
            lines.append(line)
    return lines


def bundled_names() -> list[str]:
    return sorted(path.stem for path in BUNDLED_MSG_DIR.glob("*.msg"))


def typestore_from(msg_dir: Path) -> Typestore:
    typestore = get_typestore(Stores.ROS2_KILTED)
    register_msg_dir(typestore, PROJECT_PACKAGE, msg_dir)
    return typestore


def test_the_recorder_bundles_the_tracked_object_messages() -> None:
    assert {"ObjectTrack", "ObjectTrackArray"} <= set(bundled_names())


@pytest.mark.parametrize("name", bundled_names())
def test_a_bundled_copy_defines_what_r2s2r_interfaces_defines(name: str) -> None:
    source = INTERFACES_MSG_DIR / f"{name}.msg"
    assert source.is_file(), f"r2s2r_recorder/msg/{name}.msg has no {source}"
    bundled = normalized_definition((BUNDLED_MSG_DIR / f"{name}.msg").read_text("utf-8"))
    assert bundled, f"r2s2r_recorder/msg/{name}.msg defines nothing"
    assert bundled == normalized_definition(source.read_text("utf-8")), (
        f"r2s2r_recorder/msg/{name}.msg differs from {source}: copy the interface's definition"
    )


def test_bags_get_the_same_definitions_and_hashes_from_either_directory() -> None:
    bundled, source = typestore_from(BUNDLED_MSG_DIR), typestore_from(INTERFACES_MSG_DIR)
    for name in bundled_names():
        msgtype = f"{PROJECT_PACKAGE}/msg/{name}"
        assert bundled.generate_msgdef(msgtype) == source.generate_msgdef(msgtype), msgtype
        assert bundled.hash_rihs01(msgtype) == source.hash_rihs01(msgtype), msgtype


def test_the_bundled_copies_include_the_project_messages_they_use() -> None:
    names = set(bundled_names())
    for name in names:
        for line in normalized_definition((BUNDLED_MSG_DIR / f"{name}.msg").read_text("utf-8")):
            field_type = re.sub(r"\[.*\]$", "", line.split()[0])
            if "/" in field_type:
                assert not field_type.startswith(f"{PROJECT_PACKAGE}/"), field_type
                continue
            if field_type[:1].isupper():  # a message of the same package
                assert field_type in names, f"{name}.msg uses {field_type}, not bundled"


def test_the_comparison_ignores_comments_and_spacing_only() -> None:
    reference = normalized_definition("# A track.\nuint32 id  # stable\n\nstring  object_type\n")
    assert reference == ["uint32 id", "string object_type"]
    assert normalized_definition("uint32 id\n# type\nstring object_type") == reference
    assert normalized_definition("uint64 id\nstring object_type") != reference
    assert normalized_definition("string object_type\nuint32 id") != reference
    assert normalized_definition("uint32 id 7\nstring object_type") != reference
    assert normalized_definition('string MARK="#1" # note') == ['string MARK="#1" # note']
