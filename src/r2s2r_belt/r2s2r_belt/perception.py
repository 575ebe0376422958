"""The cell's perception without ROS: what ``belt_speed`` and ``object_tracker`` compute.

A policy's belt-speed and object inputs must be made the same way in real data, simulated data
and deployment (docs/architecture.md section 7). On the cell, the ``belt_speed`` node fuses the
encoder and optical flow on the head camera, and the ``object_tracker`` node detects and tracks
objects in head RGB-D frames; both know the cell only through ``camera_info`` and ``/tf_static``.
:class:`CellPerception` runs the same cores (:class:`EncoderSpeedEstimator`,
:class:`VisionSpeedEstimator`, :class:`BeltSpeedFilter`, :class:`ObjectTrackerCore`) with the
same configuration files and the same knowledge of the cell (a :class:`SceneGeometry`, as
``camera_info`` + ``/tf_static`` state it), fed with the cell's streams:

- the in-process evaluator feeds it the simulated cell's encoder and head frames, exactly as
  the evaluation graph's nodes receive them over ROS;
- data generation feeds it the simulator's encoder and rendered head frames, so simulated
  datasets hold tracker output on rendered images, never simulator truth.

The knowledge (:class:`CellKnowledge`) is what the *deployed* cell publishes, not what the
simulator renders. The workspace grounds a cell before it records on it (docs/architecture.md
section 3, "The order of work"), so real demonstrations, evaluation and deployment run with a
grounded cell's knowledge (the artifact's camera_info, ``/tf_static`` and roller radius, the
tracker not anchored to the belt plane: ``real_deploy grounding_artifact:=...``), and simulated
data with the simulated world's own (:meth:`CellKnowledge.exact`: a simulator knows its cell).
:meth:`CellKnowledge.ungrounded` is a cell run before grounding (the datasheet camera_info and
CAD poses): a world whose camera differs from it gives the tracker the errors a real
uncalibrated camera gives (26 mm median on the default twin, ``bench/bench_tracker.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from r2s2r_common.camera_model import CameraModel
from r2s2r_common.config import load_config, resolve_config_path
from r2s2r_dataset.object_track import TrackView
from r2s2r_description.robot import OPTICAL_FROM_LINK
from r2s2r_description.transforms import invert_transform
from r2s2r_world.grounding import load_world_overrides
from r2s2r_world.world import WorldParams, apply_grounding, load_world

from r2s2r_belt.config import BeltSpeedConfig
from r2s2r_belt.encoder_speed import EncoderSpeedEstimator
from r2s2r_belt.estimates import FusedSpeed
from r2s2r_belt.speed_filter import BeltSpeedFilter
from r2s2r_belt.tracking.catalogue import Catalogue
from r2s2r_belt.tracking.config import ObjectTrackerConfig
from r2s2r_belt.tracking.detection import SceneGeometry
from r2s2r_belt.tracking.pipeline import ObjectTrackerCore
from r2s2r_belt.vision_geometry import vision_config_from_camera
from r2s2r_belt.vision_speed import VisionSpeedEstimator, to_gray


def scene_geometry_from_world(world: WorldParams) -> SceneGeometry:
    """Head-camera model and frames as a world states them (nominal: camera_info + /tf_static)."""
    head = world.cameras.head
    camera = CameraModel.from_intrinsics(
        head.width_px,
        head.height_px,
        head.fx_px,
        head.fy_px,
        head.cx_px,
        head.cy_px,
        head.distortion.as_array(),
    )
    world_from_base = world.robot.base_pose.to_pose().matrix()
    world_from_optical = head.pose.to_pose().matrix() @ OPTICAL_FROM_LINK.matrix()
    world_from_belt = world.belt.pose.to_pose().matrix()
    base_from_world = invert_transform(world_from_base)
    return SceneGeometry(
        camera=camera,
        base_from_camera=base_from_world @ world_from_optical,
        base_from_belt=base_from_world @ world_from_belt,
    )


def catalogue_from_world(world: WorldParams) -> Catalogue:
    """Return the catalogue of a world's ``objects`` section."""
    return Catalogue.from_world_objects({n: o.model_dump() for n, o in world.objects.items()})


def load_belt_speed_config(path: str | Path) -> BeltSpeedConfig:
    """Load the ``belt_speed`` node's parameter file (``config/nodes/belt_speed.yaml``)."""
    return load_config(BeltSpeedConfig, path, node_name="belt_speed")


def load_tracker_config(path: str | Path) -> ObjectTrackerConfig:
    """Load the ``object_tracker`` node's parameter file (``config/nodes/object_tracker.yaml``)."""
    return load_config(ObjectTrackerConfig, path, node_name="object_tracker")


@dataclass(frozen=True)
class CellKnowledge:
    """What the cell's perception knows of the cell: what its camera_info and ``/tf_static`` state.

    Attributes:
        world: The world whose head camera model, camera, belt and base poses and belt roller
            radius the cell publishes.
        grounded: The knowledge is measured (a grounding artifact, or a simulator's own world):
            ``belt_speed`` takes the roller radius from it and the tracker trusts the extrinsics
            (no anchoring to the belt plane), as ``real_deploy`` runs with
            ``grounding_artifact:=A tracker_anchor_to_belt:=false``. Not grounded: the node
            files' roller radius and anchoring, as a cell before grounding.
        source: Where it came from, for logs and records (``nominal``, an artifact's path,
            ``simulated world``).

    """

    world: WorldParams
    grounded: bool
    source: str

    @classmethod
    def ungrounded(cls, nominal_world_path: str | Path = "world/nominal.yaml") -> CellKnowledge:
        """Return a cell before grounding: the nominal world's datasheet camera and CAD poses."""
        path = resolve_config_path(nominal_world_path)
        return cls(load_world(path), False, f"nominal ({path.name})")

    @classmethod
    def from_artifact(
        cls, artifact_path: str | Path, nominal_world_path: str | Path = "world/nominal.yaml"
    ) -> CellKnowledge:
        """Return a grounded cell: the nominal world with the artifact's ``world_overrides``.

        Raises:
            r2s2r_common.config.ConfigError: A missing or invalid artifact or world.

        """
        nominal = load_world(resolve_config_path(nominal_world_path))
        world = apply_grounding(nominal, load_world_overrides(artifact_path))
        return cls(world, True, f"grounding artifact {artifact_path}")

    @classmethod
    def exact(cls, world: WorldParams) -> CellKnowledge:
        """Return a simulated cell: it publishes its own world (a simulator knows its cell)."""
        return cls(world, True, "simulated world")


def perception_config(
    knowledge: CellKnowledge,
    belt_config_path: str | Path = "nodes/belt_speed.yaml",
    tracker_config_path: str | Path = "nodes/object_tracker.yaml",
) -> PerceptionConfig:
    """Return the two nodes' configurations as a cell with ``knowledge`` runs them.

    Relative paths resolve against ``config/``. A grounded knowledge replaces the belt roller
    radius with the knowledge's and turns the tracker's belt-plane anchoring off (the nodes'
    ``grounding_artifact`` and ``tracker_anchor_to_belt:=false``).

    Raises:
        r2s2r_common.config.ConfigError: A node file that cannot be loaded.

    """
    belt, tracker = _node_configs(
        str(resolve_config_path(belt_config_path)), str(resolve_config_path(tracker_config_path))
    )
    if knowledge.grounded:
        radius = knowledge.world.belt.roller_radius_m
        belt = belt.model_copy(
            update={"encoder": belt.encoder.model_copy(update={"roller_radius_m": radius})}
        )
        tracker = tracker.model_copy(
            update={
                "detection": tracker.detection.model_copy(update={"anchor_to_belt_plane": False})
            }
        )
    return PerceptionConfig(
        belt=belt, tracker=tracker, geometry=scene_geometry_from_world(knowledge.world)
    )


@functools.lru_cache(maxsize=8)
def _node_configs(belt_path: str, tracker_path: str) -> tuple[BeltSpeedConfig, ObjectTrackerConfig]:
    """Load the two node files once per process (generation builds a perception per episode).

    Callers change them only through ``model_copy``, never in place.
    """
    return load_belt_speed_config(belt_path), load_tracker_config(tracker_path)


@dataclass(frozen=True)
class PerceptionConfig:
    """The two nodes' configurations and the knowledge of the cell they run with.

    Attributes:
        belt: ``belt_speed`` parameters (encoder, vision, filter).
        tracker: ``object_tracker`` parameters (catalogue, detection, tracking).
        geometry: Head camera model, camera and belt poses in ``base_link``.

    """

    belt: BeltSpeedConfig
    tracker: ObjectTrackerConfig
    geometry: SceneGeometry


class CellPerception:
    """Belt speed and object tracks from the cell's streams (see the module docstring).

    Args:
        config: Node configurations and the cell knowledge.

    Raises:
        ValueError: If the vision geometry cannot be built from the knowledge (belt out of view).

    """

    def __init__(self, config: PerceptionConfig) -> None:
        self.config = config
        belt = config.belt
        self._encoder = EncoderSpeedEstimator(belt.encoder)
        self._filter = BeltSpeedFilter(belt.filter)
        self._vision: VisionSpeedEstimator | None = None
        if belt.vision.enabled:
            vision = belt.vision
            if vision.geometry_from_tf:
                camera = config.geometry.camera
                T_camera_belt = (
                    invert_transform(config.geometry.base_from_camera)
                    @ config.geometry.base_from_belt
                )
                vision = vision_config_from_camera(
                    vision,
                    camera.camera_matrix,
                    camera.distortion.tolist()[:5],
                    (camera.width_px, camera.height_px),
                    T_camera_belt,
                )
            self._vision = VisionSpeedEstimator(vision)
        self._tracker = ObjectTrackerCore(config.tracker)
        self._speed_stamp_s: float | None = None

    @property
    def catalogue(self) -> Catalogue:
        """The tracker's object catalogue."""
        return self._tracker.catalogue

    def add_encoder(self, stamp_s: float, angle_rad: float) -> None:
        """One ``/belt/encoder`` reading (roller angle, rad)."""
        self._encoder.add_sample(stamp_s, angle_rad)
        self._filter.update(self._encoder.estimate(stamp_s))
        self._speed_stamp_s = stamp_s

    def belt_speed(self, now_s: float) -> FusedSpeed | None:
        """Return the fused speed the node would publish at ``now_s`` (None before any reading)."""
        if not self._filter.updates:
            return None
        return self._filter.estimate(now_s)

    def add_head_frame(
        self, stamp_s: float, rgb: NDArray[np.uint8], depth_m: NDArray[np.float32] | None
    ) -> list[TrackView] | None:
        """One head camera frame: optical flow for the belt speed, then detection + tracking.

        Args:
            stamp_s: Capture time.
            rgb: (H, W, 3) uint8 RGB at the camera's resolution.
            depth_m: Registered depth (None: the tracker gets no frame).

        Returns:
            The tracks of this frame as ``/objects/tracks`` carries them (None without depth).

        Raises:
            r2s2r_belt.tracking.detection.FrameError: If the images do not fit the camera.

        """
        if self._vision is not None:
            gray = to_gray(rgb, "rgb8")
            measurement = self._vision.update(gray, stamp_s)
            if measurement is not None:
                self._filter.update(measurement)
        if depth_m is None:
            return None
        speed = self.belt_speed(stamp_s)
        belt_speed_mps = None
        if (
            speed is not None
            and self._speed_stamp_s is not None
            and stamp_s - self._speed_stamp_s <= self.config.tracker.belt_speed_timeout_s
        ):
            belt_speed_mps = speed.speed_mps
        output = self._tracker.process(rgb, depth_m, stamp_s, self.config.geometry, belt_speed_mps)
        return [
            TrackView(
                track_id=int(s.track_id),
                type_name=s.type_name,
                position_m=np.asarray(s.position_m, dtype=np.float64),
                velocity_mps=np.asarray(s.velocity_mps, dtype=np.float64),
                yaw_rad=float(np.arctan2(s.rotation[1, 0], s.rotation[0, 0])),
            )
            for s in output.tracks
        ]
