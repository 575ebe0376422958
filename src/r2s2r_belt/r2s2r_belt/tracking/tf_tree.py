"""A small static transform tree (what tf2 gives for ``/tf_static``), without ROS.

``/tf_static`` carries (parent, child, translation, rotation) edges from possibly several
publishers; :class:`TransformTree` collects them and chains any two connected frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from r2s2r_description.transforms import invert_transform, make_transform, quat_to_matrix

from r2s2r_belt.tracking.geometry import FloatArray


class TransformLookupError(LookupError):
    """The frames are unknown or not connected in the tree."""


class TransformTree:
    """Static frames connected by rigid transforms (a forest; each child has one parent)."""

    def __init__(self) -> None:
        self._parent: dict[str, tuple[str, FloatArray]] = {}

    def __len__(self) -> int:
        return len(self._parent)

    @property
    def frames(self) -> set[str]:
        """Every frame named so far (parents and children)."""
        return set(self._parent) | {parent for parent, _ in self._parent.values()}

    def set_transform(self, parent: str, child: str, transform: FloatArray) -> None:
        """Add or replace the edge ``parent -> child`` (``transform`` = child pose in parent).

        Raises:
            ValueError: Empty or equal frame names, or a transform that is not 4x4.

        """
        parent, child = parent.lstrip("/"), child.lstrip("/")
        if not parent or not child or parent == child:
            raise ValueError(f"transform {parent!r} -> {child!r}: need two different frame names")
        matrix = np.asarray(transform, dtype=float)
        if matrix.shape != (4, 4):
            raise ValueError(f"transform {parent!r} -> {child!r}: shape {matrix.shape}, want 4x4")
        self._parent[child] = (parent, matrix)

    def set_transform_quat(
        self,
        parent: str,
        child: str,
        translation_m: Sequence[float],
        quat_wxyz: Sequence[float],
    ) -> None:
        """Add an edge from a translation (m) and a quaternion ``(w, x, y, z)``.

        Raises:
            ValueError: Bad frame names or a zero quaternion.

        """
        self.set_transform(parent, child, make_transform(translation_m, quat_to_matrix(quat_wxyz)))

    def _root_pose(self, frame: str) -> tuple[str, FloatArray]:
        """``(root, T_root_frame)`` following parents up from ``frame``."""
        transform = np.eye(4)
        current = frame
        seen = {current}
        while current in self._parent:
            parent, edge = self._parent[current]
            transform = edge @ transform
            if parent in seen:
                raise TransformLookupError(f"frame {frame!r}: the tree has a cycle at {parent!r}")
            seen.add(parent)
            current = parent
        return current, transform

    def lookup(self, target: str, source: str) -> FloatArray:
        """Return ``T_target_source``: maps points of ``source`` into ``target``.

        Raises:
            TransformLookupError: If a frame is unknown or the two are not connected.

        """
        target, source = target.lstrip("/"), source.lstrip("/")
        known = self.frames
        for frame in (target, source):
            if frame not in known:
                raise TransformLookupError(
                    f"frame {frame!r} not in the transform tree (known: {sorted(known)})"
                )
        target_root, t_root_target = self._root_pose(target)
        source_root, t_root_source = self._root_pose(source)
        if target_root != source_root:
            raise TransformLookupError(
                f"frames {target!r} (root {target_root!r}) and {source!r} (root {source_root!r}) "
                "are not connected"
            )
        return invert_transform(t_root_target) @ t_root_source  # type: ignore[no-any-return]


def add_transforms(tree: TransformTree, transforms: Sequence[Any]) -> list[str]:
    """Add ``geometry_msgs/TransformStamped``-like transforms; return the refused ones' errors.

    Duck-typed (``header.frame_id``, ``child_frame_id``, ``transform.translation/rotation``), so
    this module stays free of ROS imports.
    """
    errors: list[str] = []
    for transform in transforms:
        t, q = transform.transform.translation, transform.transform.rotation
        try:
            tree.set_transform_quat(
                transform.header.frame_id,
                transform.child_frame_id,
                (t.x, t.y, t.z),
                (q.w, q.x, q.y, q.z),
            )
        except ValueError as error:
            errors.append(str(error))
    return errors
