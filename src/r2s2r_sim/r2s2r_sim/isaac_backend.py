"""Isaac Sim implementation of :class:`r2s2r_sim.backend.SimBackend` (UNVERIFIED).

Status: written against the public isaac-sim/IsaacSim sources (6.0.1, commit 045ca8b5; the
5.1 URDF importer from aa503a9b) and never run: the machines this workspace runs on have no
RTX GPU and no ``isaacsim`` wheel (6.x wheels need Python 3.12; this venv is 3.11). Nothing
here is reported working. ``test_backend_conformance.py`` runs every case against this backend
where :func:`isaac_unavailable_reason` is None; until a lab has done so, treat every number it
would give as unknown.

What a lab must check first (in this order; the conformance suite covers 4-8):
1. ``python -c "from isaacsim import SimulationApp"`` in the env, then one
   ``IsaacSimBackend().reset(world, 0)``: the URDF import (6.x ``URDFImporter`` or the 5.x
   ``URDFParseAndImportFile`` command) builds one articulation rooted at ``world`` whose link
   prims carry the URDF link names (:meth:`IsaacSimBackend._link_path` finds them by name).
2. The deprecated 5.x core API (``isaacsim.core.api`` / ``core.prims`` / ``sensors.camera``,
   kept in 6.0 under ``source/deprecated``) is enabled by the experience the app starts.
3. Drive gains: ``ArticulationController.set_gains`` takes N·m/rad (the tensor API's units).
4. The belt: a kinematic slab with ``PhysxSurfaceVelocityAPI`` 1 mm above the URDF belt moves
   objects at ``belt.speed_mps`` along ``belt_link`` x (local-space surface velocity).
5. Cameras: a point in the optical frame lands where :func:`project_points` says
   (focal length/aperture set from :class:`ImageWarp`, then the same warp as MuJoCo).
6. Depth: ``distance_to_image_plane`` is metres along the optical axis.
7. Contacts: ``RigidPrim.get_contact_force_data`` pairs resolve to link/object names.
8. Determinism per seed (PhysX on CPU; GPU physics is not bit-reproducible).

Isaac Sim API used (source paths in isaac-sim/IsaacSim):
- ``isaacsim.SimulationApp`` — source/python_packages/isaacsim/__init__.py (expose_api),
  source/extensions/isaacsim.simulation_app/isaacsim/simulation_app/simulation_app.py
  (``SimulationApp(launch_config)``, ``update``, ``close``).
- ``isaacsim.core.api.World`` — source/deprecated/isaacsim.core.api/python/impl/world/world.py
  and simulation_context/simulation_context.py (``World(physics_dt, rendering_dt,
  stage_units_in_meters, backend)``, ``scene.add``, ``reset``, ``step(render=False)``,
  ``render``, ``clear``, ``stop``, ``clear_instance``, ``stage``).
- ``isaacsim.core.prims.SingleArticulation`` / ``SingleXFormPrim`` / ``RigidPrim`` —
  source/deprecated/isaacsim.core.prims/python/impl/{single_articulation,single_xform_prim,
  rigid_prim}.py (``get_dof_index``, ``get/set_joint_positions``, ``get/set_joint_velocities``,
  ``apply_action``, ``get_articulation_controller().set_gains``, ``get_world_pose``,
  ``get_contact_force_data``).
- ``isaacsim.core.api.objects.DynamicCuboid/DynamicCylinder/DynamicSphere/FixedCuboid`` —
  source/deprecated/isaacsim.core.api/python/impl/objects/{cuboid,cylinder,sphere}.py
  (``set_world_pose``, ``get_world_pose``, ``set/get_linear_velocity``,
  ``set_angular_velocity``, ``enable/disable_rigid_body_physics``).
- ``isaacsim.core.api.materials.PhysicsMaterial`` — .../materials/physics_material.py.
- ``isaacsim.core.utils.types.ArticulationAction`` and ``isaacsim.core.utils.stage
  .add_reference_to_stage`` — source/deprecated/isaacsim.core.utils/python/impl/{types,stage}.py.
- ``isaacsim.sensors.camera.Camera`` — source/deprecated/isaacsim.sensors.camera/isaacsim/
  sensors/camera/camera.py (``initialize``, ``set_local_pose(camera_axes="ros")``,
  ``set_focal_length``, ``set_horizontal_aperture``, ``set_clipping_range``,
  ``add_distance_to_image_plane_to_frame``, ``get_rgb``, ``get_depth``).
- URDF import: 6.x ``isaacsim.asset.importer.urdf.URDFImporter/URDFImporterConfig``
  (source/extensions/isaacsim.asset.importer.urdf/python/impl/{converter,config}.py); 5.x
  ``omni.kit.commands.execute("URDFCreateImportConfig" / "URDFParseAndImportFile")``
  (same extension, python/impl/commands.py at 5.1).
- Belt: ``pxr.PhysxSchema.PhysxSurfaceVelocityAPI`` and ``UsdPhysics.RigidBodyAPI``
  kinematic, as source/extensions/isaacsim.asset.gen.conveyor/python/impl/conveyor.py does.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.cameras import CAMERA_NAMES, camera
from r2s2r_description.cell import BELT_LENGTH_M, BELT_WIDTH_M, build_description
from r2s2r_description.robot import (
    ALL_JOINT_NAMES,
    ARM_JOINT_NAMES,
    HOME_POSITIONS,
)
from r2s2r_description.transforms import Vector, matrix_to_quat, quat_to_matrix
from r2s2r_description.urdf import to_urdf
from r2s2r_world.world import CameraParams, WorldParams, camera_params

from r2s2r_sim.backend import (
    BackendError,
    BackendUnavailableError,
    Contact,
    FloatArray,
    ObjectInstance,
    ObjectPose,
)
from r2s2r_sim.backend_base import BackendBase, robot_controllers
from r2s2r_sim.camera_appearance import camera_image
from r2s2r_sim.camera_model import ImageWarp, Intrinsics
from r2s2r_sim.scene import park_position

NO_RT_CORE_GPUS: tuple[str, ...] = (
    "A100", "A30", "A800", "H100", "H200", "H800", "H20", "GH200",
    "B100", "B200", "GB200", "V100", "P100", "K80",
)  # fmt: skip
"""Data-centre GPU families without RT cores: Isaac Sim's RTX renderer does not run there."""

_CELL_ROOT = "/World/cell"
_OBJECTS_ROOT = "/World/objects"
_BELT_SLAB = "/World/belt_surface"
_PIXEL_PITCH_M = 1.0e-5  # any pitch works: only focal length / aperture sets the FOV


class IsaacSimConfig(ConfigModel):
    """How the Isaac Sim backend starts its app and renders."""

    headless: bool = Field(default=True, description="Start the Kit app without a window.")
    renderer: Literal["RaytracedLighting", "RealTimePathTracing", "PathTracing"] = Field(
        default="RaytracedLighting",
        description="RTX render mode passed to SimulationApp (RaytracedLighting: fastest).",
    )
    physics_device: Literal["cpu", "cuda"] = Field(
        default="cpu",
        description="PhysX device: 'cpu' is reproducible per seed; 'cuda' is not bit-exact.",
    )
    warmup_render_frames: int = Field(
        default=4,
        ge=1,
        le=100,
        description="Frames rendered after a scene build before images are read (the RTX "
        "annotators return no data for the first few frames).",
    )
    max_contacts_per_object: int = Field(
        default=64, ge=1, le=4096, description="Contact points reported per object and step."
    )


def _import_problem() -> str | None:
    """Why ``from isaacsim import SimulationApp`` fails here, or None."""
    if importlib.util.find_spec("isaacsim") is None:
        return "isaacsim does not import (no module named 'isaacsim')"
    try:
        module = importlib.import_module("isaacsim")
    except (Exception, SystemExit) as error:  # its bootstrap calls sys.exit on failure
        return f"isaacsim does not import ({type(error).__name__}: {error})"
    if getattr(module, "SimulationApp", None) is None:
        return "isaacsim imports but exposes no SimulationApp (not an Isaac Sim 5.x/6.x install)"
    return None


def _gpu_problem() -> str | None:
    """Why there is no RTX-capable GPU here (from ``nvidia-smi``), or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA GPU (nvidia-smi not found)"
    try:
        listed = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"no usable NVIDIA GPU (nvidia-smi failed: {error})"
    names = [line.strip() for line in listed.splitlines() if line.strip()]
    if not names:
        return "no NVIDIA GPU (nvidia-smi lists none)"
    rtx = [n for n in names if not any(family in n.upper() for family in NO_RT_CORE_GPUS)]
    if not rtx:
        return f"no RTX GPU ({', '.join(names)}: no RT cores for Isaac Sim's RTX renderer)"
    return None


@functools.cache
def isaac_unavailable_reason() -> str | None:
    """Why the Isaac Sim backend cannot run in this process (import + GPU check), or None.

    Computed once per process: an import attempt of ``isaacsim`` (which bootstraps the Kit
    kernel but starts no app) and a look at ``nvidia-smi`` for a GPU with RT cores.
    """
    problems = [p for p in (_import_problem(), _gpu_problem()) if p is not None]
    return "; ".join(problems) if problems else None


def _pose_matrix(position: Any, quat_wxyz: Any) -> FloatArray:
    pose = np.eye(4)
    pose[:3, :3] = quat_to_matrix(np.asarray(quat_wxyz, dtype=float))
    pose[:3, 3] = np.asarray(position, dtype=float)
    return pose


@dataclass
class _State:
    joint_positions: FloatArray
    joint_velocities: FloatArray
    objects: dict[str, tuple[FloatArray, FloatArray, FloatArray, FloatArray, bool]]
    controllers: list[dict[str, object]]
    steps: int
    belt_travel_m: float
    belt_speed_mps: float


@dataclass
class _CameraRig:
    sensor: Any  # isaacsim.sensors.camera.Camera
    params: CameraParams
    warp: ImageWarp


class IsaacSimBackend(BackendBase):
    """The cell in Isaac Sim (PhysX + RTX) behind the same protocol as MuJoCo. UNVERIFIED.

    One per process: the Kit app starts in the constructor and ends in :meth:`shutdown`
    (Kit cannot start twice in a process). :meth:`close` frees the scene; the next
    :meth:`reset` builds it again on the same app.

    Args:
        config: App and rendering options.
        enable_rendering: Create the cameras (off: physics only).

    Raises:
        BackendUnavailableError: Isaac Sim cannot run here (before anything is started).

    """

    def __init__(self, config: IsaacSimConfig | None = None, enable_rendering: bool = True):
        reason = isaac_unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"isaac backend unavailable: {reason}")
        self.config = config or IsaacSimConfig()
        self.enable_rendering = enable_rendering
        from isaacsim import SimulationApp  # the app must exist before any omni import

        self._app = SimulationApp(
            {"headless": self.config.headless, "renderer": self.config.renderer}
        )
        self._sim: Any = None  # isaacsim.core.api.World, made on the first reset
        self._world: WorldParams | None = None
        self._scene_key: tuple[str, tuple[ObjectInstance, ...]] | None = None
        self._objects: tuple[ObjectInstance, ...] = ()
        self._object_prims: dict[str, Any] = {}
        self._active: dict[str, bool] = {}
        self._cameras: dict[str, _CameraRig] = {}
        self._links: dict[str, str] = {}
        self._robot: Any = None
        self._contact_view: Any = None
        self._contact_filters: list[str] = []
        self._dof = np.zeros(0, dtype=int)
        self._steps = 0
        self._belt_travel_m = 0.0
        self._belt_speed_mps = 0.0
        self._tmp = Path(tempfile.mkdtemp(prefix="r2s2r_isaac_"))
        self.arm_controller, self.hand_controller = robot_controllers()

    # -- scene ---------------------------------------------------------------------------------
    def _build_scene(self, world: WorldParams, objects: tuple[ObjectInstance, ...]) -> None:
        from isaacsim.core.api import World
        from isaacsim.core.prims import RigidPrim, SingleArticulation

        if self._sim is None:
            self._sim = World(
                physics_dt=world.physics.timestep_s,
                rendering_dt=world.physics.timestep_s,
                stage_units_in_meters=1.0,
                backend="numpy",
                device=self.config.physics_device,
            )
        else:
            self._sim.clear()
            self._sim.set_simulation_dt(
                physics_dt=world.physics.timestep_s, rendering_dt=world.physics.timestep_s
            )
        root = self._import_cell(world)
        stage = self._sim.stage
        self._links = {
            prim.GetName(): str(prim.GetPath())
            for prim in stage.Traverse()
            if str(prim.GetPath()).startswith(root)
        }
        self._add_belt_surface(world)
        self._object_prims = {}
        for index, instance in enumerate(objects):
            self._object_prims[instance.name] = self._add_object(world, instance, index)
        self._robot = self._sim.scene.add(SingleArticulation(prim_path=root, name="r2s2r_cell"))
        self._contact_filters = [self._links[n] for n in self._links if n.endswith("_link")]
        self._contact_filters += [f"{_OBJECTS_ROOT}/{o.name}" for o in objects] + [_BELT_SLAB]
        self._contact_view = (
            self._sim.scene.add(
                RigidPrim(
                    prim_paths_expr=[f"{_OBJECTS_ROOT}/{o.name}" for o in objects],
                    name="r2s2r_object_contacts",
                    contact_filter_prim_paths_expr=self._contact_filters,
                    max_contact_count=self.config.max_contacts_per_object * len(objects),
                )
            )
            if objects
            else None
        )
        self._cameras = {}
        if self.enable_rendering:
            self._cameras = {name: self._add_camera(world, name) for name in CAMERA_NAMES}
        self._sim.reset()  # initializes the articulation and view handles
        self._dof = np.array([self._robot.get_dof_index(n) for n in ALL_JOINT_NAMES], dtype=int)
        for rig in self._cameras.values():
            rig.sensor.initialize()
            rig.sensor.add_distance_to_image_plane_to_frame()

    def _import_cell(self, world: WorldParams) -> str:
        """Import the cell URDF (fixed at ``world``) under :data:`_CELL_ROOT`; return its path."""
        urdf_path = self._tmp / "r2s2r_cell.urdf"
        urdf_path.write_text(to_urdf(build_description(world.layout())), encoding="utf-8")
        try:
            from isaacsim.asset.importer.urdf import URDFImporter, URDFImporterConfig
        except ImportError:  # Isaac Sim 5.x: the importer is a set of Kit commands
            import omni.kit.commands

            _, import_config = omni.kit.commands.execute("URDFCreateImportConfig")
            import_config.merge_fixed_joints = False  # keep optical frames and bin links
            import_config.fix_base = True
            import_config.make_default_prim = False
            import_config.create_physics_scene = False
            _, prim_path = omni.kit.commands.execute(
                "URDFParseAndImportFile",
                urdf_path=str(urdf_path),
                import_config=import_config,
                get_articulation_root=True,
            )
            return str(prim_path)
        from isaacsim.core.utils.stage import add_reference_to_stage

        usd_path = URDFImporter(
            URDFImporterConfig(
                urdf_path=str(urdf_path),
                usd_path=str(self._tmp / "usd"),
                merge_fixed_joints=False,
                fix_base=True,
                joint_target_type="position",
            )
        ).import_urdf()
        add_reference_to_stage(usd_path=usd_path, prim_path=_CELL_ROOT)
        return _CELL_ROOT

    def _add_belt_surface(self, world: WorldParams) -> None:
        """Add a kinematic slab on the belt whose surface moves (PhysX surface velocity)."""
        from isaacsim.core.api.objects import FixedCuboid
        from pxr import PhysxSchema, UsdPhysics

        belt = world.belt.pose.to_pose().matrix()
        thickness_m = 0.002
        centre = belt @ np.array([0.0, 0.0, 0.001 + thickness_m / 2.0, 1.0])
        slab = FixedCuboid(
            prim_path=_BELT_SLAB,
            name="belt_surface",
            position=centre[:3],
            orientation=matrix_to_quat(belt[:3, :3]),
            scale=np.array([BELT_LENGTH_M, BELT_WIDTH_M, thickness_m]),
            size=1.0,
            color=np.array([0.1, 0.1, 0.1]),
        )
        prim = slab.prim
        body = UsdPhysics.RigidBodyAPI.Apply(prim)
        body.CreateKinematicEnabledAttr().Set(True)
        PhysxSchema.PhysxSurfaceVelocityAPI.Apply(prim)
        self._belt_prim = prim

    def _add_object(self, world: WorldParams, instance: ObjectInstance, index: int) -> Any:
        from isaacsim.core.api.materials import PhysicsMaterial
        from isaacsim.core.api.objects import DynamicCuboid, DynamicCylinder, DynamicSphere

        if instance.type_name not in world.objects:
            raise BackendError(
                f"object {instance.name!r}: type {instance.type_name!r} not in world objects "
                f"{sorted(world.objects)}"
            )
        obj = world.objects[instance.type_name]
        path = f"{_OBJECTS_ROOT}/{instance.name}"
        material = PhysicsMaterial(
            prim_path=f"/World/materials/{instance.name}",
            static_friction=obj.friction,
            dynamic_friction=obj.friction,
            restitution=0.0,
        )
        common = {
            "prim_path": path,
            "name": instance.name,
            "position": np.array(park_position(index)),
            "color": np.array(obj.rgba[:3]),
            "mass": obj.mass_kg,
            "physics_material": material,
        }
        x, y, z = obj.size_m
        if obj.shape == "box":
            prim = DynamicCuboid(size=1.0, scale=np.array([x, y, z]), **common)
        elif obj.shape == "cylinder":
            prim = DynamicCylinder(radius=x / 2.0, height=z, **common)
        else:
            prim = DynamicSphere(radius=x / 2.0, **common)
        return self._sim.scene.add(prim)

    def _add_camera(self, world: WorldParams, name: str) -> _CameraRig:
        """Add an ideal pinhole at the optical frame link; :class:`ImageWarp` does the rest."""
        from isaacsim.sensors.camera import Camera

        params = camera_params(world, name)
        warp = ImageWarp(
            Intrinsics(
                params.width_px,
                params.height_px,
                params.fx_px,
                params.fy_px,
                params.cx_px,
                params.cy_px,
            ),
            params.distortion.as_array(),
        )
        sensor = Camera(
            prim_path=f"{self._link_path(camera(name).optical_frame)}/r2s2r_{name}",
            name=name,
            resolution=(params.width_px, params.height_px),
        )
        sensor.set_local_pose(
            translation=np.zeros(3), orientation=np.array([1.0, 0.0, 0.0, 0.0]), camera_axes="ros"
        )
        sensor.set_horizontal_aperture(params.width_px * _PIXEL_PITCH_M)
        sensor.set_focal_length(warp.render_focal_px * _PIXEL_PITCH_M)
        sensor.set_clipping_range(near_distance=0.005, far_distance=5.0)
        return _CameraRig(sensor, params, warp)

    def _link_path(self, link: str) -> str:
        if link not in self._links:
            raise BackendError(f"unknown body {link!r}")
        return self._links[link]

    # -- episode -------------------------------------------------------------------------------
    def reset(self, world: WorldParams, seed: int, objects: Sequence[ObjectInstance] = ()) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.reset`."""
        objects = tuple(objects)
        names = [o.name for o in objects]
        if len(set(names)) != len(names):
            raise BackendError(f"object names repeat: {names}")
        key = (world.model_dump_json(exclude={"shifts", "randomization", "task"}), objects)
        if key != self._scene_key:
            self._build_scene(world, objects)
            self._scene_key = key
            self._objects = objects
            self._render_frames(self.config.warmup_render_frames)
        self._world = world
        self.seed = seed
        home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])
        gains = world.joint_gains()
        controller = self._robot.get_articulation_controller()
        kps = np.zeros(self._robot.num_dof)
        kds = np.zeros(self._robot.num_dof)
        kps[self._dof] = [gains[n][0] for n in ALL_JOINT_NAMES]
        kds[self._dof] = [gains[n][1] for n in ALL_JOINT_NAMES]
        controller.set_gains(kps=kps, kds=kds)
        self._robot.set_joint_positions(home, joint_indices=self._dof)
        self._robot.set_joint_velocities(np.zeros(home.size), joint_indices=self._dof)
        n_arm = len(ARM_JOINT_NAMES)
        for ctrl, start in (
            (self.arm_controller, home[:n_arm]),
            (self.hand_controller, home[n_arm:]),
        ):
            ctrl.latency_s = world.controller.latency_s
            ctrl.reset(start)
        self._apply_targets()
        for instance in self._objects:
            self.park_object(instance.name)
        self._steps = 0
        self._belt_travel_m = 0.0
        self.set_belt_speed(world.belt.speed_mps)

    def close(self) -> None:
        """Free the scene (the next reset builds it again on the same app)."""
        if self._sim is not None:
            for rig in self._cameras.values():
                rig.sensor.destroy()
            self._sim.stop()
            self._sim.clear()
        self._cameras = {}
        self._scene_key = None

    def shutdown(self) -> None:
        """Close the scene and end the Kit app (no Isaac Sim backend can start again here)."""
        self.close()
        if self._sim is not None:
            self._sim.clear_instance()
            self._sim = None
        self._app.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _require(self) -> Any:
        if self._sim is None or self._scene_key is None:
            raise BackendError("call reset(world, seed) first")
        return self._sim

    @property
    def time_s(self) -> float:
        """See :attr:`r2s2r_sim.backend.SimBackend.time_s` (steps x timestep since reset)."""
        self._require()
        return self._steps * self.world.physics.timestep_s

    # -- stepping and control ------------------------------------------------------------------
    def _apply_targets(self) -> None:
        from isaacsim.core.utils.types import ArticulationAction

        targets = np.concatenate([self.arm_controller.desired, self.hand_controller.desired])
        self._robot.apply_action(
            ArticulationAction(joint_positions=targets, joint_indices=self._dof)
        )

    def step(self, n_steps: int = 1) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.step` (controllers at every control tick)."""
        sim = self._require()
        period = self.world.physics.steps_per_control
        timestep = self.world.physics.timestep_s
        for _ in range(int(n_steps)):
            if self._steps % period == 0 and (
                self.arm_controller.busy or self.hand_controller.busy
            ):
                now = self._steps * timestep
                self.arm_controller.update(now)
                self.hand_controller.update(now)
                self._apply_targets()
            sim.step(render=False)
            self._steps += 1
            self._belt_travel_m += self._belt_speed_mps * timestep

    def joint_positions(self) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.joint_positions`."""
        self._require()
        return np.asarray(self._robot.get_joint_positions(joint_indices=self._dof), dtype=float)

    def joint_velocities(self) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.joint_velocities`."""
        self._require()
        return np.asarray(self._robot.get_joint_velocities(joint_indices=self._dof), dtype=float)

    # -- belt ----------------------------------------------------------------------------------
    def set_belt_speed(self, speed_mps: float) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.set_belt_speed` (local x of the slab)."""
        from pxr import Gf, PhysxSchema

        self._require()
        surface = PhysxSchema.PhysxSurfaceVelocityAPI(self._belt_prim)
        surface.GetSurfaceVelocityAttr().Set(Gf.Vec3f(float(speed_mps), 0.0, 0.0))
        self._belt_speed_mps = float(speed_mps)

    # -- objects and contacts ------------------------------------------------------------------
    def _object(self, name: str) -> Any:
        if name not in self._object_prims:
            raise BackendError(
                f"unknown object {name!r}; episode objects: {sorted(self._object_prims)}"
            )
        return self._object_prims[name]

    def spawn_object(
        self,
        name: str,
        position_m: Vector,
        quat_wxyz: Vector = (1.0, 0.0, 0.0, 0.0),
        linear_velocity_mps: Vector = (0.0, 0.0, 0.0),
    ) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.spawn_object`."""
        self._require()
        prim = self._object(name)
        quat = np.asarray(quat_wxyz, dtype=float)
        prim.enable_rigid_body_physics()
        prim.set_world_pose(
            position=np.asarray(position_m, float), orientation=quat / np.linalg.norm(quat)
        )
        prim.set_linear_velocity(np.asarray(linear_velocity_mps, dtype=float))
        prim.set_angular_velocity(np.zeros(3))
        self._active[name] = True

    def park_object(self, name: str) -> None:
        """Take an object out of the scene again (physics off, under the floor)."""
        prim = self._object(name)
        index = [o.name for o in self._objects].index(name)
        prim.set_linear_velocity(np.zeros(3))
        prim.set_angular_velocity(np.zeros(3))
        prim.set_world_pose(
            position=np.array(park_position(index)), orientation=np.array([1.0, 0, 0, 0])
        )
        prim.disable_rigid_body_physics()
        self._active[name] = False

    def object_poses(self) -> dict[str, ObjectPose]:
        """See :meth:`r2s2r_sim.backend.SimBackend.object_poses`."""
        self._require()
        poses = {}
        for instance in self._objects:
            prim = self._object_prims[instance.name]
            position, quat = prim.get_world_pose()
            poses[instance.name] = ObjectPose(
                name=instance.name,
                type_name=instance.type_name,
                position_m=np.asarray(position, dtype=float),
                quat_wxyz=np.asarray(quat, dtype=float),
                linear_velocity_mps=np.asarray(prim.get_linear_velocity(), dtype=float),
                active=self._active.get(instance.name, False),
            )
        return poses

    def _body_name(self, prim_path: str) -> str:
        if prim_path == _BELT_SLAB:
            return "belt_link"
        return prim_path.rsplit("/", 1)[-1]

    def contacts(self) -> list[Contact]:
        """See :meth:`r2s2r_sim.backend.SimBackend.contacts`: contacts of the episode's objects.

        Only contacts that involve an object are reported (with the links, the belt and the
        other objects): PhysX reports pairs between the tracked objects and filter prims.
        """
        self._require()
        if self._contact_view is None:
            return []
        forces, points, _, _, counts, starts = self._contact_view.get_contact_force_data(
            dt=self.world.physics.timestep_s
        )
        result = []
        for row, instance in enumerate(self._objects):
            for column, path in enumerate(self._contact_filters):
                other = self._body_name(path)
                for k in range(
                    int(starts[row, column]), int(starts[row, column] + counts[row, column])
                ):
                    result.append(
                        Contact(
                            body1=other,
                            body2=instance.name,
                            geom1="",
                            geom2="",
                            position_m=np.asarray(points[k], dtype=float),
                            normal_force_n=float(abs(np.asarray(forces[k]).reshape(-1)[0])),
                        )
                    )
        return result

    def body_pose(self, name: str) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.body_pose`."""
        from isaacsim.core.prims import SingleXFormPrim

        self._require()
        if name in self._object_prims:
            position, quat = self._object_prims[name].get_world_pose()
        else:
            position, quat = SingleXFormPrim(self._link_path(name)).get_world_pose()
        return _pose_matrix(position, quat)

    # -- cameras -------------------------------------------------------------------------------
    def _render_frames(self, count: int) -> None:
        for _ in range(count):
            self._sim.render()

    def _rig(self, camera_name: str) -> _CameraRig:
        self._require()
        if not self.enable_rendering:
            raise BackendError("rendering is disabled (IsaacSimBackend(enable_rendering=False))")
        if camera_name not in self._cameras:
            raise BackendError(f"unknown camera {camera_name!r}; expected one of {CAMERA_NAMES}")
        return self._cameras[camera_name]

    def _read(self, rig: _CameraRig, kind: Literal["rgb", "depth"]) -> NDArray[Any]:
        for _ in range(self.config.warmup_render_frames + 1):
            self._sim.render()
            data = rig.sensor.get_rgb() if kind == "rgb" else rig.sensor.get_depth()
            if data is not None:
                return np.asarray(data)
        raise BackendError(f"camera {rig.sensor.name!r} gave no {kind} data after rendering")

    def render(self, camera_name: str) -> NDArray[np.uint8]:
        """See :meth:`r2s2r_sim.backend.SimBackend.render`."""
        rig = self._rig(camera_name)
        image = rig.warp.apply(self._read(rig, "rgb")[..., :3].astype(np.uint8))
        index = CAMERA_NAMES.index(camera_name)
        return camera_image(image, rig.params, index, self.seed, self.time_s)

    def render_depth(self, camera_name: str) -> NDArray[np.float32]:
        """See :meth:`r2s2r_sim.backend.SimBackend.render_depth`."""
        rig = self._rig(camera_name)
        depth = self._read(rig, "depth").astype(np.float32)
        depth[~np.isfinite(depth)] = 0.0
        depth = np.asarray(rig.warp.apply(depth, nearest=True), dtype=np.float32)
        depth[depth > rig.params.depth_far_m] = 0.0
        return np.ascontiguousarray(depth, dtype=np.float32)

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> object:
        """See :meth:`r2s2r_sim.backend.SimBackend.get_state`.

        Joint and object states, controllers and belt; PhysX solver warm-start caches are not
        part of it, so a restored rollout matches only to solver tolerance.
        """
        self._require()
        objects = {}
        for name, prim in self._object_prims.items():
            position, quat = prim.get_world_pose()
            objects[name] = (
                np.asarray(position, float),
                np.asarray(quat, float),
                np.asarray(prim.get_linear_velocity(), float),
                np.asarray(prim.get_angular_velocity(), float),
                self._active.get(name, False),
            )
        return _State(
            joint_positions=self.joint_positions(),
            joint_velocities=self.joint_velocities(),
            objects=objects,
            controllers=self._controller_snapshots(),
            steps=self._steps,
            belt_travel_m=self._belt_travel_m,
            belt_speed_mps=self._belt_speed_mps,
        )

    def set_state(self, state: object) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.set_state`."""
        self._require()
        if not isinstance(state, _State):
            raise BackendError(f"set_state: expected a state from get_state, got {type(state)}")
        self._robot.set_joint_positions(state.joint_positions, joint_indices=self._dof)
        self._robot.set_joint_velocities(state.joint_velocities, joint_indices=self._dof)
        for name, (position, quat, velocity, spin, active) in state.objects.items():
            prim = self._object(name)
            if active:
                prim.enable_rigid_body_physics()
            prim.set_world_pose(position=position, orientation=quat)
            prim.set_linear_velocity(velocity)
            prim.set_angular_velocity(spin)
            if not active:
                prim.disable_rigid_body_physics()
            self._active[name] = active
        self._restore_controllers(state.controllers)
        self._apply_targets()
        self._steps = state.steps
        self._belt_travel_m = state.belt_travel_m
        self.set_belt_speed(state.belt_speed_mps)
