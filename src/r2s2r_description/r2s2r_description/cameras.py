"""The cell's cameras: one descriptor each, the one home of everything a camera is called.

A camera's *name* (``head_camera``) is the namespace of its topics (``/head_camera/image_raw``),
the simulator's camera and the ``camera_name`` of its ``camera_info``. Topic names live in
:mod:`r2s2r_common.topics`, which sits below this package (the description imports common,
never the other way), so the two names are spelled there, next to the topics built from them,
and taken from there here. Everything else a camera is called is derived here, once: its key
under ``WorldParams.cameras`` and ``world_overrides.cameras`` (``head``), its dataset image key
(``head_camera_rgb``), its links (``head_camera_link``, ``head_camera_optical_frame``) and the
frame it is mounted in. Every module above common takes the cameras from here; the world's
parameters of a camera by name are :func:`r2s2r_world.world.camera_params` (the world sits
above this package).
"""

from __future__ import annotations

from dataclasses import dataclass

from r2s2r_common.topics import HAND_CAMERA, HEAD_CAMERA

from r2s2r_description.frames import PALM_LINK, WORLD_FRAME


@dataclass(frozen=True)
class CellCamera:
    """One camera of the cell and the names it goes by.

    Attributes:
        name: The camera's name: topic namespace, simulator camera, ``camera_info`` name.
        world_key: Its key under ``WorldParams.cameras``, ``world_overrides.cameras`` and a
            grounding artifact's ``cameras``.
        mount_frame: The frame its :attr:`link` is placed in (``WorldParams`` gives the pose).

    """

    name: str
    world_key: str
    mount_frame: str

    @property
    def image_key(self) -> str:
        """The dataset observation key of its RGB image (``obs/<image_key>``)."""
        return f"{self.name}_rgb"

    @property
    def link(self) -> str:
        """Its body frame (REP 103, x forward), placed in :attr:`mount_frame`."""
        return f"{self.name}_link"

    @property
    def optical_frame(self) -> str:
        """Its optical frame (z forward, x right, y down): the ``frame_id`` of its images."""
        return f"{self.name}_optical_frame"


HEAD = CellCamera(HEAD_CAMERA, "head", WORLD_FRAME)
"""The head camera (RGB + registered depth), fixed in ``world``."""
HAND = CellCamera(HAND_CAMERA, "hand", PALM_LINK)
"""The hand camera, on the palm."""

CAMERAS: tuple[CellCamera, ...] = (HEAD, HAND)
"""The cell's cameras, head first (the order of every per-camera list and dataset key)."""
CAMERA_NAMES: tuple[str, ...] = tuple(camera.name for camera in CAMERAS)
"""Their names, in :data:`CAMERAS` order."""


class UnknownCameraError(ValueError):
    """A name that is none of the cell's cameras."""


def camera(name: str) -> CellCamera:
    """Return the cell camera called ``name``.

    Raises:
        UnknownCameraError: For a name that is not one of :data:`CAMERA_NAMES` (the message
            names them).

    """
    for candidate in CAMERAS:
        if candidate.name == name:
            return candidate
    raise UnknownCameraError(f"unknown camera {name!r}; expected one of {CAMERA_NAMES}")
