"""MuJoCo implementation of :class:`r2s2r_sim.backend.SimBackend`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
from numpy.typing import NDArray
from r2s2r_description.cameras import CAMERA_NAMES
from r2s2r_description.robot import (
    ALL_JOINT_NAMES,
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
)
from r2s2r_description.transforms import Vector
from r2s2r_world.world import CameraParams, WorldParams, camera_params

from r2s2r_sim.backend import BackendError, Contact, FloatArray, ObjectInstance, ObjectPose
from r2s2r_sim.backend_base import BackendBase, robot_controllers
from r2s2r_sim.camera_appearance import camera_image
from r2s2r_sim.camera_model import ImageWarp, Intrinsics
from r2s2r_sim.scene import (
    BELT_GEOM,
    PRIMITIVE_DETAIL,
    SCENE_CACHE_SIZE,
    SceneExtra,
    apply_lighting,
    build_model,
    park_position,
)


def camera_intrinsics(params: CameraParams) -> Intrinsics:
    """Return the :class:`Intrinsics` of a camera's parameters."""
    return Intrinsics(
        params.width_px, params.height_px, params.fx_px, params.fy_px, params.cx_px, params.cy_px
    )


@dataclass
class _State:
    physics: NDArray[np.float64]
    controllers: list[dict[str, object]]
    gravcomp: NDArray[np.float64]
    belt_travel_m: float
    belt_speed_mps: float
    steps_since_control: int


SceneKey = tuple[str, tuple[ObjectInstance, ...]]


@dataclass
class _Scene:
    """A compiled scene: the model of one world and set of objects, its data and renderers."""

    model: mujoco.MjModel
    data: mujoco.MjData
    objects: tuple[ObjectInstance, ...]
    object_adr: dict[str, tuple[int, int, int]]
    qadr: NDArray[np.int_]
    dadr: NDArray[np.int_]
    arm_act: NDArray[np.int_]
    hand_act: NDArray[np.int_]
    belt_geom: int
    cameras: dict[str, _CameraRig]

    def close(self) -> None:
        for rig in self.cameras.values():
            rig.close()
        self.cameras = {}


SCENE_FIELDS: tuple[str, ...] = (
    "xpos",
    "xquat",
    "xmat",
    "xipos",
    "ximat",
    "geom_xpos",
    "geom_xmat",
    "site_xpos",
    "site_xmat",
    "cam_xpos",
    "cam_xmat",
    "light_xpos",
    "light_xdir",
    "subtree_com",
)
"""``MjData`` arrays a render reads in this cell's scenes (no tendon, flex or skin): what
:meth:`MujocoBackend.scene_snapshot` keeps. After ``mj_step`` they hold the kinematics the step
began from, which is what a render then draws; a snapshot keeps them as they are."""


@dataclass(frozen=True)
class _SceneSnapshot:
    arrays: tuple[NDArray[np.float64], ...]
    model: mujoco.MjModel  # held: the model the arrays are of
    time_s: float = 0.0  # the instant: a camera's appearance noise is drawn for it


def _metric_depth(
    model: mujoco.MjModel, scene: mujoco.MjvScene, buffer: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Metres along the optical axis from a reversed-Z depth buffer (``mjDEPTH_ZEROFAR``).

    ``mujoco.Renderer.render``'s conversion (MuJoCo 4.0), operation for operation: the
    clipping planes in float32, the mapping in float64, the result cast to float32.
    """
    extent = model.stat.extent
    znear = np.float32(model.vis.map.znear * extent)
    zfar = np.float32(model.vis.map.zfar * extent)
    out_64 = buffer.astype(np.float64)
    if scene.camera[0].orthographic:
        out_64 = zfar - out_64 * (zfar - znear)
    else:
        c_coef = -(zfar + znear) / (zfar - znear)
        d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
        c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)
        d_coef = np.float32(-0.5) * d_coef
        out_64 = d_coef / (out_64 + c_coef)
    return out_64.astype(np.float32)


class _CameraRig:
    """Renderers and the image warp of one camera."""

    def __init__(self, model: mujoco.MjModel, params: CameraParams, name: str):
        self.params = params
        self.name = name
        self.warp = ImageWarp(camera_intrinsics(params), params.distortion.as_array())
        model.cam_fovy[model.camera(name).id] = self.warp.render_fovy_deg
        self.rgb = self._renderer(model)
        self.depth: mujoco.Renderer | None = None

    def _renderer(self, model: mujoco.MjModel) -> mujoco.Renderer:
        renderer = mujoco.Renderer(model, self.params.height_px, self.params.width_px)
        for flag in (
            mujoco.mjtRndFlag.mjRND_SHADOW,
            mujoco.mjtRndFlag.mjRND_REFLECTION,
            mujoco.mjtRndFlag.mjRND_SKYBOX,
            mujoco.mjtRndFlag.mjRND_FOG,
            mujoco.mjtRndFlag.mjRND_HAZE,
        ):
            renderer.scene.flags[flag] = 0
        return renderer

    def depth_renderer(self, model: mujoco.MjModel) -> mujoco.Renderer:
        if self.depth is None:
            self.depth = self._renderer(model)
            self.depth.enable_depth_rendering()
        return self.depth

    def render_rgbd(self, model: mujoco.MjModel) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
        """RGB and metric depth of one render of the scene last updated into :attr:`rgb`.

        The depth buffer is read from the RGB render pass and converted to metres as the depth
        renderer converts it (``mujoco.Renderer.render`` with depth rendering on, MuJoCo 4.0),
        bit for bit what that renderer's own pass gives: the pass draws the same geometry, only
        lit and coloured (``test_camera.py::test_render_rgbd_is_render_and_render_depth``).
        """
        renderer = self.rgb
        rect = mujoco.MjrRect(0, 0, renderer.width, renderer.height)
        rgb = np.empty((renderer.height, renderer.width, 3), dtype=np.uint8)
        depth = np.empty((renderer.height, renderer.width), dtype=np.float32)
        context = renderer._mjr_context
        if renderer._gl_context:
            renderer._gl_context.make_current()
        mujoco.mjr_render(rect, renderer.scene, context)
        mujoco.mjr_readPixels(rgb, depth, rect, context)
        if renderer._gl_context:  # EGL and OSMesa read bottom row first
            rgb = np.flipud(rgb)
            depth = np.flipud(depth)
        return rgb, _metric_depth(model, renderer.scene, depth)

    def close(self) -> None:
        self.rgb.close()
        if self.depth is not None:
            self.depth.close()


def _camera_rgb(
    rig: _CameraRig, render: NDArray[np.uint8], episode_seed: int, time_s: float
) -> NDArray[np.uint8]:
    """Return a camera's RGB image from its ideal render: warped, blurred, its appearance."""
    index = CAMERA_NAMES.index(rig.name)
    return camera_image(rig.warp.apply(render), rig.params, index, episode_seed, time_s)


def _camera_depth(rig: _CameraRig, render: NDArray[np.float32]) -> NDArray[np.float32]:
    """Return a camera's depth image (m) from its ideal metric render (beyond range: 0)."""
    depth = np.asarray(rig.warp.apply(render.astype(np.float32), nearest=True), dtype=np.float32)
    depth[depth > rig.params.depth_far_m] = 0.0  # out of range reads as 0, like a sensor
    return np.ascontiguousarray(depth, dtype=np.float32)


class MujocoBackend(BackendBase):
    """The cell in MuJoCo with joint trajectory controllers and calibrated cameras.

    Args:
        enable_rendering: Create renderers (needs an OpenGL backend: ``MUJOCO_GL=egl``).
        scene_extras: Added to every compiled model (see :func:`r2s2r_sim.scene.build_model`).
        primitive_detail: Slices and stacks of rendered round primitives (default: MuJoCo's,
            what the real twin renders; :class:`r2s2r_sim.backend_config.SimBackendConfig`).
        scene_cache_size: Compiled scenes kept (model, data and renderers; ~45 MB each with
            rendering), least recently used dropped first: an episode whose world and objects
            match a kept scene does not build its model and renderers again (~70 ms). At
            least 1 (the scene in use).

    """

    def __init__(
        self,
        enable_rendering: bool = True,
        scene_extras: Sequence[SceneExtra] = (),
        primitive_detail: tuple[int, int] = PRIMITIVE_DETAIL,
        scene_cache_size: int = SCENE_CACHE_SIZE,
    ):
        if scene_cache_size < 1:
            raise BackendError(f"scene_cache_size = {scene_cache_size}: expected at least 1")
        self.enable_rendering = enable_rendering
        self.scene_extras = tuple(scene_extras)
        self.primitive_detail = primitive_detail
        self.scene_cache_size = scene_cache_size
        self._scenes: OrderedDict[SceneKey, _Scene] = OrderedDict()  # kept, not in use
        self._scene: _Scene | None = None  # in use; its fields are the attributes below
        self._model: mujoco.MjModel | None = None
        self._data: mujoco.MjData | None = None
        self._world: WorldParams | None = None
        self._model_key: SceneKey | None = None
        self._objects: tuple[ObjectInstance, ...] = ()
        self._cameras: dict[str, _CameraRig] = {}
        self._depth_cameras: set[str] = set()  # cameras depth was ever rendered from
        self._renderers_new = False  # renderers made by the last reset, no frame rendered yet
        self._belt_travel_m = 0.0
        self._belt_speed_mps = 0.0
        self._steps_since_control = 0
        self._shown_time_s: float | None = None  # a shown snapshot's instant, until a step
        self.seed = 0
        self.arm_controller, self.hand_controller = robot_controllers()

    # -- episode ---------------------------------------------------------------------------
    def reset(self, world: WorldParams, seed: int, objects: Sequence[ObjectInstance] = ()) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.reset`."""
        objects = tuple(objects)
        # Lighting is set on the compiled model (apply_lighting), so it does not recompile.
        key = (
            world.model_dump_json(exclude={"shifts", "randomization", "task", "lighting"}),
            objects,
        )
        if key != self._model_key:
            self._use_scene(key, world, objects)
        model, data = self._require()
        apply_lighting(model, world.lighting)
        mujoco.mj_resetData(model, data)
        self._world = world
        self.seed = seed
        self._shown_time_s = None
        home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])
        data.qpos[self._qadr] = home
        n_arm = len(ARM_JOINT_NAMES)
        self.arm_controller.latency_s = world.controller.latency_s
        self.hand_controller.latency_s = world.controller.latency_s
        self.arm_controller.reset(home[:n_arm])
        self.hand_controller.reset(home[n_arm:])
        data.ctrl[self._arm_act] = self.arm_controller.desired
        data.ctrl[self._hand_act] = self.hand_controller.desired
        for index, instance in enumerate(self._objects):
            qadr, _, body = self._object_adr[instance.name]
            data.qpos[qadr : qadr + 3] = park_position(index)
            data.qpos[qadr + 3 : qadr + 7] = (1.0, 0.0, 0.0, 0.0)
            model.body_gravcomp[body] = 1.0
        self._belt_travel_m = 0.0
        self._steps_since_control = 0
        self.set_belt_speed(world.belt.speed_mps)
        mujoco.mj_forward(model, data)
        if self._renderers_new:
            self._renderers_new = False
            self._warm_up_renderers()

    def _use_scene(
        self, key: SceneKey, world: WorldParams, objects: tuple[ObjectInstance, ...]
    ) -> None:
        """Make the scene of ``key`` current: a kept one, else a new build; keep the last one."""
        if self._scene is not None and self._model_key is not None:
            self._scenes[self._model_key] = self._scene
        scene = self._scenes.pop(key, None)
        if scene is None:
            scene = self._build_scene(world, objects)
            self._renderers_new = bool(scene.cameras)
        while len(self._scenes) >= self.scene_cache_size:
            self._scenes.popitem(last=False)[1].close()
        self._scene, self._model_key = scene, key
        self._model, self._data = scene.model, scene.data
        self._objects, self._object_adr = scene.objects, scene.object_adr
        self._qadr, self._dadr = scene.qadr, scene.dadr
        self._arm_act, self._hand_act = scene.arm_act, scene.hand_act
        self._belt_geom, self._cameras = scene.belt_geom, scene.cameras

    def _build_scene(self, world: WorldParams, objects: tuple[ObjectInstance, ...]) -> _Scene:
        """Compile the model of ``world`` with ``objects`` and make its renderers."""
        model = build_model(world, objects, self.scene_extras, self.primitive_detail)

        def joint_adr(name: str) -> tuple[int, int]:
            joint = model.joint(name).id
            return int(model.jnt_qposadr[joint]), int(model.jnt_dofadr[joint])

        cameras = {}
        if self.enable_rendering:
            cameras = {
                name: _CameraRig(model, camera_params(world, name), name) for name in CAMERA_NAMES
            }
        return _Scene(
            model=model,
            data=mujoco.MjData(model),
            objects=objects,
            object_adr={
                o.name: (*joint_adr(f"{o.name}_joint"), int(model.body(o.name).id)) for o in objects
            },
            qadr=np.array([joint_adr(n)[0] for n in ALL_JOINT_NAMES], dtype=int),
            dadr=np.array([joint_adr(n)[1] for n in ALL_JOINT_NAMES], dtype=int),
            arm_act=np.array([model.actuator(n).id for n in ARM_JOINT_NAMES], dtype=int),
            hand_act=np.array([model.actuator(n).id for n in HAND_JOINT_NAMES], dtype=int),
            belt_geom=model.geom(BELT_GEOM).id,
            cameras=cameras,
        )

    def _warm_up_renderers(self) -> None:
        """Render every new camera once (and depth where it was used), results discarded.

        A new renderer's first frame costs ~50 ms (GL buffers, the model's meshes and
        textures uploaded), ~6x a later one. Paid here, inside the reset, it does not fall on
        the first frame of an episode, where a cell served at real time would fall behind the
        wall clock and then run faster than it to catch up.
        """
        for name in self._cameras:
            self.render(name)
            if name in self._depth_cameras:
                self.render_depth(name)

    def close(self) -> None:
        """Free the renderers of every scene (the model is rebuilt on the next reset)."""
        if self._scene is not None:
            self._scene.close()
        self._scene, self._cameras, self._model_key = None, {}, None
        while self._scenes:
            self._scenes.popitem()[1].close()

    def _require(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        if self._model is None or self._data is None:
            raise BackendError("call reset(world, seed) first")
        return self._model, self._data

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled MuJoCo model (for tools and benchmarks)."""
        return self._require()[0]

    @property
    def data(self) -> mujoco.MjData:
        """The MuJoCo data (for tools and benchmarks)."""
        return self._require()[1]

    @property
    def time_s(self) -> float:
        """See :attr:`r2s2r_sim.backend.SimBackend.time_s`."""
        return float(self._require()[1].time)

    # -- stepping and control ---------------------------------------------------------------
    def step(self, n_steps: int = 1) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.step`.

        Busy controllers are updated at every control tick. Commands only arrive between
        calls, so the desired positions of all the call's ticks are computed up front, on
        arrays (:meth:`JointTrajectoryController.update_ticks`, bit for bit what one update
        per tick gives); the loop then only writes them into ``ctrl`` and steps.
        """
        model, data = self._require()
        self._shown_time_s = None
        period = self.world.physics.steps_per_control
        remaining = int(n_steps)
        if remaining <= 0:
            return
        controllers = [
            (controller, actuators)
            for controller, actuators in (
                (self.arm_controller, self._arm_act),
                (self.hand_controller, self._hand_act),
            )
            if controller.busy
        ]
        if not controllers:
            # Idle controllers hold their targets and commands only arrive between calls,
            # so the whole call needs no controller updates.
            self._advance(model, data, remaining)
            return
        # Tick times: mj_step advances data.time by one timestep per step (the same sums).
        phase = self._steps_since_control % period
        first_tick = (period - phase) % period
        timestep = float(model.opt.timestep)
        time_s = float(data.time)
        tick_times: list[float] = []
        for offset in range(remaining):
            if offset >= first_tick and (offset - first_tick) % period == 0:
                tick_times.append(time_s)
            time_s += timestep
        ticks = np.asarray(tick_times)
        # ctrl at each tick as one update per tick leaves it (a controller idle from some
        # tick on keeps its last target there), so that the loop copies whole rows.
        ctrl_rows = np.repeat(data.ctrl[None, :], ticks.size, axis=0)
        idle_from = 0  # the first tick after which every controller is idle (or ticks.size)
        for controller, actuators in controllers:
            rows = controller.update_ticks(ticks)
            if rows.shape[0]:
                ctrl_rows[: rows.shape[0], actuators] = rows
                ctrl_rows[rows.shape[0] :, actuators] = rows[-1]
            idle_from = max(idle_from, ticks.size if controller.busy else rows.shape[0] - 1)
        if first_tick > 0:
            chunk = min(first_tick, remaining)
            self._advance(model, data, chunk)
            remaining -= chunk
        # One control period per tick while busy; from the tick after which all are idle (or
        # for a last partial period) the rest in one go. Belt travel is summed per chunk.
        ctrl = data.ctrl
        belt_travel_m = self._belt_travel_m
        period_travel_m = self._belt_speed_mps * period * model.opt.timestep
        stepped = 0
        for tick in range(ticks.size):
            ctrl[:] = ctrl_rows[tick]
            if tick >= idle_from or remaining < period:
                break
            mujoco.mj_step(model, data, nstep=period)
            belt_travel_m += period_travel_m
            remaining -= period
            stepped += period
        self._belt_travel_m = belt_travel_m
        self._steps_since_control += stepped
        if remaining > 0:
            self._advance(model, data, remaining)

    def _advance(self, model: mujoco.MjModel, data: mujoco.MjData, n_steps: int) -> None:
        mujoco.mj_step(model, data, nstep=n_steps)
        self._steps_since_control += n_steps
        self._belt_travel_m += self._belt_speed_mps * n_steps * model.opt.timestep

    def joint_positions(self) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.joint_positions`."""
        return self._require()[1].qpos[self._qadr].copy()  # type: ignore[no-any-return]

    def joint_velocities(self) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.joint_velocities`."""
        return self._require()[1].qvel[self._dadr].copy()  # type: ignore[no-any-return]

    def joint_targets(self) -> FloatArray:
        """Return the servo targets (controller desired positions), ALL_JOINT_NAMES order."""
        return np.concatenate([self.arm_controller.desired, self.hand_controller.desired])

    # -- belt ---------------------------------------------------------------------------------
    def set_belt_speed(self, speed_mps: float) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.set_belt_speed`."""
        model, _ = self._require()
        model.geom_surfacevel[self._belt_geom, 0] = speed_mps
        self._belt_speed_mps = float(speed_mps)

    # -- objects and contacts -----------------------------------------------------------------
    def _object(self, name: str) -> tuple[int, int, int]:
        if name not in self._object_adr:
            raise BackendError(
                f"unknown object {name!r}; episode objects: {sorted(self._object_adr)}"
            )
        return self._object_adr[name]

    def spawn_object(
        self,
        name: str,
        position_m: Vector,
        quat_wxyz: Vector = (1.0, 0.0, 0.0, 0.0),
        linear_velocity_mps: Vector = (0.0, 0.0, 0.0),
    ) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.spawn_object`."""
        model, data = self._require()
        qadr, dadr, body = self._object(name)
        data.qpos[qadr : qadr + 3] = position_m
        data.qpos[qadr + 3 : qadr + 7] = np.asarray(quat_wxyz) / np.linalg.norm(quat_wxyz)
        data.qvel[dadr : dadr + 6] = 0.0
        data.qvel[dadr : dadr + 3] = linear_velocity_mps
        model.body_gravcomp[body] = 0.0
        mujoco.mj_forward(model, data)

    def park_object(self, name: str) -> None:
        """Take an object out of the scene again."""
        model, data = self._require()
        qadr, dadr, body = self._object(name)
        index = [o.name for o in self._objects].index(name)
        data.qpos[qadr : qadr + 3] = park_position(index)
        data.qpos[qadr + 3 : qadr + 7] = (1.0, 0.0, 0.0, 0.0)
        data.qvel[dadr : dadr + 6] = 0.0
        model.body_gravcomp[body] = 1.0

    def object_poses(self) -> dict[str, ObjectPose]:
        """See :meth:`r2s2r_sim.backend.SimBackend.object_poses`."""
        model, data = self._require()
        poses = {}
        for instance in self._objects:
            qadr, dadr, body = self._object_adr[instance.name]
            poses[instance.name] = ObjectPose(
                name=instance.name,
                type_name=instance.type_name,
                position_m=data.qpos[qadr : qadr + 3].copy(),
                quat_wxyz=data.qpos[qadr + 3 : qadr + 7].copy(),
                linear_velocity_mps=data.qvel[dadr : dadr + 3].copy(),
                active=bool(model.body_gravcomp[body] == 0.0),
            )
        return poses

    def contacts(self) -> list[Contact]:
        """See :meth:`r2s2r_sim.backend.SimBackend.contacts`."""
        model, data = self._require()
        result = []
        wrench = np.zeros(6)
        for index in range(data.ncon):
            contact = data.contact[index]
            mujoco.mj_contactForce(model, data, index, wrench)
            g1, g2 = int(contact.geom1), int(contact.geom2)
            result.append(
                Contact(
                    body1=model.body(model.geom_bodyid[g1]).name,
                    body2=model.body(model.geom_bodyid[g2]).name,
                    geom1=model.geom(g1).name,
                    geom2=model.geom(g2).name,
                    position_m=contact.pos.copy(),
                    normal_force_n=float(abs(wrench[0])),
                )
            )
        return result

    def set_mocap_pose(self, body: str, position_m: Vector, quat_wxyz: Vector) -> None:
        """Move a mocap body (a prop of a scene extra) and update the poses the cameras see."""
        model, data = self._require()
        mocap_id = int(model.body(body).mocapid[0])
        if mocap_id < 0:
            raise BackendError(f"body {body!r} is not a mocap body")
        data.mocap_pos[mocap_id] = position_m
        data.mocap_quat[mocap_id] = quat_wxyz
        mujoco.mj_kinematics(model, data)

    def body_pose(self, name: str) -> FloatArray:
        """See :meth:`r2s2r_sim.backend.SimBackend.body_pose`."""
        model, data = self._require()
        body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body_id < 0:
            raise BackendError(f"unknown body {name!r}")
        pose = np.eye(4)
        pose[:3, :3] = data.xmat[body_id].reshape(3, 3)
        pose[:3, 3] = data.xpos[body_id]
        return pose

    # -- cameras ------------------------------------------------------------------------------
    def _rig(self, camera_name: str) -> _CameraRig:
        self._require()
        if not self.enable_rendering:
            raise BackendError("rendering is disabled (MujocoBackend(enable_rendering=False))")
        if camera_name not in self._cameras:
            raise BackendError(f"unknown camera {camera_name!r}; expected one of {CAMERA_NAMES}")
        return self._cameras[camera_name]

    def render(self, camera_name: str) -> NDArray[np.uint8]:
        """See :meth:`r2s2r_sim.backend.SimBackend.render`."""
        rig = self._rig(camera_name)
        rig.rgb.update_scene(self.data, camera=camera_name)
        return _camera_rgb(rig, rig.rgb.render(), self.seed, self._frame_time_s())

    def render_depth(self, camera_name: str) -> NDArray[np.float32]:
        """See :meth:`r2s2r_sim.backend.SimBackend.render_depth`."""
        rig = self._rig(camera_name)
        self._depth_cameras.add(camera_name)
        renderer = rig.depth_renderer(self.model)
        renderer.update_scene(self.data, camera=camera_name)
        return _camera_depth(rig, renderer.render())

    def render_rgbd(self, camera_name: str) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
        """:meth:`render` and :meth:`render_depth` of now, the same arrays, from one render.

        One render pass instead of two (the depth renderer's pass costs as much as the RGB
        one): what generation's recorder asks of the head camera at every frame.
        """
        rig = self._rig(camera_name)
        rig.rgb.update_scene(self.data, camera=camera_name)
        rgb, depth = rig.render_rgbd(self.model)
        return (
            _camera_rgb(rig, rgb, self.seed, self._frame_time_s()),
            _camera_depth(rig, depth),
        )

    def _frame_time_s(self) -> float:
        """Return the instant a render shows: a shown snapshot's, else the simulation's."""
        return self._shown_time_s if self._shown_time_s is not None else float(self.data.time)

    def camera_warp(self, camera_name: str) -> ImageWarp:
        """Return the image warp (intrinsics + distortion) of a camera."""
        return self._rig(camera_name).warp

    def scene_snapshot(self) -> object:
        """See :meth:`r2s2r_sim.backend.SceneSnapshots.scene_snapshot` (:data:`SCENE_FIELDS`).

        Raises:
            BackendError: If the model has tendons, flexes or skins (drawn from other arrays).

        """
        model, data = self._require()
        if model.ntendon or model.nflex or model.nskin:
            raise BackendError(
                "scene_snapshot: the model draws tendons, flexes or skins, which a snapshot "
                "does not keep (r2s2r_sim.mujoco_backend.SCENE_FIELDS)"
            )
        return _SceneSnapshot(
            arrays=tuple(getattr(data, name).copy() for name in SCENE_FIELDS),
            model=model,
            time_s=float(data.time),
        )

    def show_scene_snapshot(self, snapshot: object) -> None:
        """See :meth:`r2s2r_sim.backend.SceneSnapshots.show_scene_snapshot`.

        The kinematic arrays are overwritten; ``mj_step`` computes them again from the state
        before it uses them, so stepping is unchanged.
        """
        model, data = self._require()
        if not isinstance(snapshot, _SceneSnapshot) or snapshot.model is not model:
            raise BackendError(
                "show_scene_snapshot: expected a scene_snapshot() of this backend's current "
                f"model, got {type(snapshot).__name__}"
            )
        for name, array in zip(SCENE_FIELDS, snapshot.arrays, strict=True):
            getattr(data, name)[...] = array
        self._shown_time_s = snapshot.time_s  # until the next step

    # -- state --------------------------------------------------------------------------------
    def get_state(self) -> object:
        """See :meth:`r2s2r_sim.backend.SimBackend.get_state`."""
        model, data = self._require()
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        physics = np.empty(mujoco.mj_stateSize(model, spec))
        mujoco.mj_getState(model, data, physics, spec)
        return _State(
            physics=physics,
            controllers=self._controller_snapshots(),
            gravcomp=model.body_gravcomp.copy(),
            belt_travel_m=self._belt_travel_m,
            belt_speed_mps=self._belt_speed_mps,
            steps_since_control=self._steps_since_control,
        )

    def set_state(self, state: object) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.set_state`."""
        model, data = self._require()
        if not isinstance(state, _State):
            raise BackendError(f"set_state: expected a state from get_state, got {type(state)}")
        mujoco.mj_setState(model, data, state.physics, mujoco.mjtState.mjSTATE_INTEGRATION)
        self._shown_time_s = None
        self._restore_controllers(state.controllers)
        model.body_gravcomp[:] = state.gravcomp
        self._belt_travel_m = state.belt_travel_m
        self.set_belt_speed(state.belt_speed_mps)
        self._steps_since_control = state.steps_since_control
        mujoco.mj_forward(model, data)
