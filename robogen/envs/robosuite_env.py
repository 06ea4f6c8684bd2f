"""The ``robosuite`` env family: robosuite 1.5 manipulation tasks made perturbable.

``robogen.envs.make("robosuite/Lift")`` builds ``robosuite.make("Lift", robots="Panda")``
with its default composite controller (``BASIC``: OSC_POSE for the arm, the gripper's own
controller) and wraps it in a :class:`RobosuiteEnv`, a Gymnasium env that is a
:class:`~robogen.envs.base.MujocoScene`: robogen's axes edit the model robosuite compiled
(its ``MjSpec`` is built from the task's MJCF, ``env.model.get_xml()``), robosuite keeps
deciding initial placements, rewards, observations and success, and pixels come from
robogen's renderer.

Install: ``make setup-suites`` (the MuJoCo 3.x track, ``.venv-suites``): robosuite 1.5.2
works on mujoco 3.3-3.9 as released and on 3.17 with the two fixes below; it fails on
mujoco 4.0 (robosuite's own ``DomainRandomizationWrapper`` is broken on new MuJoCo
versions too: robosuite#534, and after hard resets: robosuite#426, which is why robogen
applies its own axes and builds the env with ``hard_reset=False``).

mujoco >= 3.12 fixes (:func:`patch_robosuite`, applied when the family loads, each only if
the running mujoco needs it):
    * ``binding_utils.MjModel.get_joint_qpos_addr`` / ``get_joint_qvel_addr`` compare
      ``model.jnt_type[j]`` with ``mjtJoint`` enums, which from mujoco 3.12 never equal a
      numpy integer (every task's free-joint object failed its assert): replaced by copies
      that compare ``int(...)``;
    * ``Controller.update`` calls ``mj_fullM(model, dst, data.qM)``; mujoco 3.17 dropped
      ``MjData.qM`` and takes ``mj_fullM(model, data, dst)``: replaced by a copy with the
      new call (same mass matrix).

Env ids ``robosuite/<Task>`` (:data:`TASKS`), robot ``Panda`` by default (``robots`` env
kwarg: one of the task's supported robots, checked before the env is built).

Observation (``state``, float32): ``robot0_proprio-state`` (50 values: joint cos/sin,
velocities, end-effector position [m] and quaternion, gripper joints) followed by
``object-state`` (the task's object positions, orientations and relative vectors: Lift
10, Stack 23, Door 14, PickPlaceCan 14, NutAssemblySquare 14). ``pixels``: ``(84, 84, 3)
uint8`` from ``agentview``, upright (robosuite's own camera observations are flipped
vertically, its default "opengl" image convention).

Action: ``Box(-1, 1, (7,))``: OSC_POSE end-effector delta position (1 = 0.05 m) and
axis-angle rotation (1 = 0.5 rad), gripper (-1 open, 1 close); 20 Hz control.

Episode: ends at the first step where robosuite's ``_check_success()`` holds
(``terminated``, success, as robomimic's rollouts stop), else truncated at the horizon
(:data:`HORIZON`: 400 steps, robomimic's rollout horizon for Lift/Can/Square).
``info["success"]`` is True only on that terminating step. Reward: robosuite's (sparse by
default: 1 on success).

Initial states: ``reset(seed=s)`` reseeds robosuite's generator in place (object
placements, the robot's initial joint noise), so episode *i* starts from the same state in
every condition. The env is built with robosuite's ``seed=0`` (:data:`SCENE_SEED`), so
what robosuite draws at construction (Lift's cube size) is the same in every process.

Scene roles: floor ``floor``, the table top (``table_visual``, ``table_collision``; the
PickPlace bins are not a table role), the task's objects (every world child outside the
robot, table, bins, pegs and the ``Visual*`` target markers, with their geoms), the robot
below ``robot0_base`` less its mount (Panda: links, 7 arm joints and 2 finger joints, 9
actuators: torques, so gain edits scale the OSC's torques), the light, the cameras
(``agentview`` first), distractors on the table top (static geoms; none in PickPlaceCan),
and pose dofs: the x/y of each object's free joint (Door: the hinge, opened up to 0.2 rad).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any

import gymnasium as gym  # robogen.envs imported robogen._gl first (MUJOCO_GL)
import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from robogen.envs.base import PoseDof, SceneRoles
from robogen.envs.elements import descends_from, name_elements
from robogen.envs.families import EnvOptions, check_max_steps
from robogen.envs.gym_adapter import THRESHOLD_REFUSED
from robogen.envs.suite_scene import SuiteScene
from robogen.errors import InvalidSpecError, SceneError, UnknownNameError
from robogen.types import RenderSettings

TASKS: tuple[str, ...] = ("Lift", "Stack", "Door", "PickPlaceCan", "NutAssemblySquare")
"""robosuite task names of this family (robogen ids ``robosuite/<Task>``)."""
SCENE_SEED = 0
"""Seed of robosuite's generator while the env is built: what robosuite draws then (Lift's
cube size, from [0.020, 0.022] m) is the same in every process (Ray workers included)."""
HORIZON = 400
"""Default episode length [steps] at 20 Hz (robomimic's rollout horizon)."""
ROBOT_ROOT = "robot0_base"
"""The robot's root body; its subtree less the mount (``fixed_mount*``) is the robot."""
CAMERAS = ("agentview", "frontview", "birdview", "sideview")
FIXED = ("table", "bin1", "bin2", "peg1", "peg2", "left_eef_target", "right_eef_target")
"""World children that are scenery, not task objects."""
OWN_SUCCESS = "robosuite envs decide success by _check_success()"
ROBOT_REFUSED = (
    "robosuite/{task} does not support robot {robot!r}; robots it supports here: {choices}"
)
"""Message of the InvalidSpecError for an unsupported robot (tests reuse it)."""
SUPPORTED_ROBOTS = ("Panda", "Sawyer", "IIWA", "Jaco", "Kinova3", "UR5e")
"""Single-arm robots robosuite 1.5 ships for these tasks."""
DISTRACTOR_XY = {
    "Lift": (-0.3, 0.3, -0.35, 0.35), "Stack": (-0.3, 0.3, -0.35, 0.35),
    "Door": (-0.35, 0.2, -0.4, 0.1), "NutAssemblySquare": (-0.3, 0.25, -0.35, 0.35),
}
"""Table-top area (x/y [m], robosuite's world frame) where distractors go, per task."""


def _check(task: str) -> None:
    if task not in TASKS:
        raise UnknownNameError("robosuite task", task, TASKS)


# ----------------------------------------------------------------------------- mujoco fixes


def _joint_addr(self: Any, name: str, qvel: bool) -> int | tuple[int, int]:
    joint = self.joint_name2id(name)
    kind = int(self.jnt_type[joint])
    adr = int((self.jnt_dofadr if qvel else self.jnt_qposadr)[joint])
    n = {int(mujoco.mjtJoint.mjJNT_FREE): 6 if qvel else 7,
         int(mujoco.mjtJoint.mjJNT_BALL): 3 if qvel else 4}.get(kind, 1)
    return adr if n == 1 else (adr, adr + n)


def _get_joint_qpos_addr(self: Any, name: str) -> int | tuple[int, int]:
    """robosuite's ``get_joint_qpos_addr`` comparing joint types as ints."""
    return _joint_addr(self, name, False)


def _get_joint_qvel_addr(self: Any, name: str) -> int | tuple[int, int]:
    """robosuite's ``get_joint_qvel_addr`` comparing joint types as ints."""
    return _joint_addr(self, name, True)


def _controller_update(self: Any, force: bool = False) -> None:
    """robosuite's ``Controller.update`` with mujoco >= 3.17's ``mj_fullM(m, d, dst)``."""
    if self.new_update or force:
        if not (self.lite_physics and not force):
            self.sim.forward()
        if self.ref_name is not None:
            self.update_reference_data()
        self.joint_pos = np.array(self.sim.data.qpos[self.qpos_index])
        self.joint_vel = np.array(self.sim.data.qvel[self.qvel_index])
        nv = self.sim.model.nv
        full = np.zeros((nv, nv))
        mujoco.mj_fullM(self.sim.model._model, self.sim.data._data, full)  # noqa: SLF001
        self.mass_matrix = full[self.qvel_index, :][:, self.qvel_index]
        self.new_update = False


def patch_robosuite() -> tuple[str, ...]:
    """Apply the fixes the running mujoco needs (module docstring); returns their names."""
    from robosuite.controllers.parts import controller
    from robosuite.utils import binding_utils

    from robogen.envs.fetch_env import enum_comparison_broken

    done = []
    if enum_comparison_broken():
        binding_utils.MjModel.get_joint_qpos_addr = _get_joint_qpos_addr  # type: ignore[method-assign]
        binding_utils.MjModel.get_joint_qvel_addr = _get_joint_qvel_addr  # type: ignore[method-assign]
        done.append("joint addresses")
    if not hasattr(mujoco.MjData, "qM"):
        controller.Controller.update = _controller_update  # type: ignore[method-assign]
        done.append("mj_fullM")
    return tuple(done)


# ----------------------------------------------------------------------------- env


class RobosuiteEnv(SuiteScene):
    """A robosuite manipulation task as a perturbable Gymnasium env (a :class:`MujocoScene`).

    Description:
        ``robosuite.make(task, robots=robot, hard_reset=False)`` with robosuite's
        default controller; robosuite decides placements, rewards, observations and
        success.

    Observation Space:
        ============  =====================================  =============================
        obs_mode      space                                  unit
        ============  =====================================  =============================
        state         Box(-inf, inf, (50 + object,), f32)    proprio + object (m, rad...)
        pixels        Box(0, 255, (H, W, 3), uint8)          RGB from ``agentview``
        state+pixels  Dict(state=..., pixels=...)            both
        ============  =====================================  =============================

    Action Space:
        ``Box(-1, 1, (7,), float32)``: OSC_POSE deltas (position 1 = 0.05 m, rotation
        1 = 0.5 rad) and the gripper (-1 open, 1 close).

    Reward:
        robosuite's (sparse: 1 on success, ``reward_shaping=False``).

    Perturbation hooks:
        :meth:`nominal_spec`, :meth:`install_model`, :meth:`textures_changed`,
        :meth:`observe`, :meth:`render_frame`, :attr:`roles`.

    Success:
        ``_check_success()`` (robosuite's own predicate); the episode ends there.

    Episode End:
        Terminated at success; truncated at ``max_steps`` (default 400).

    Version History:
        * v0: initial adapter (robosuite 1.5.2, mujoco 3.17).

    Args:
        task: One of :data:`TASKS`.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        render: Pixel settings; None: 84x84 from ``agentview``, shadows and MSAA off.
        robots: The robot (one of :data:`SUPPORTED_ROBOTS`).
        max_steps: Episode length [steps]; None: :data:`HORIZON`.
        success_threshold: Must be None (robosuite decides success).

    Raises:
        UnknownNameError: On an unknown task.
        InvalidSpecError: On a robot the task does not support, a success threshold, a bad
            observation mode or render size.
    """

    def __init__(self, task: str, obs_mode: str = "state", render: RenderSettings | None = None,
                 robots: str = "Panda", max_steps: int | None = None,
                 success_threshold: float | None = None) -> None:
        _check(task)
        check_max_steps(max_steps)
        if success_threshold is not None:
            raise InvalidSpecError(THRESHOLD_REFUSED.format(how=OWN_SUCCESS,
                                                            value=success_threshold))
        if robots not in SUPPORTED_ROBOTS:
            raise InvalidSpecError(ROBOT_REFUSED.format(task=task, robot=robots,
                                                        choices=list(SUPPORTED_ROBOTS)))
        import robosuite
        from robosuite.utils.log_utils import ROBOSUITE_DEFAULT_LOGGER

        patch_robosuite()
        # robosuite logs "Loading controller configuration" at INFO for every env built
        ROBOSUITE_DEFAULT_LOGGER.setLevel(logging.WARNING)
        self._args = {"task": task, "obs_mode": obs_mode,
                      "render": None if render is None else dataclasses.asdict(render),
                      "robots": robots, "max_steps": max_steps}
        self.task = task
        self._label = f"robosuite/{task}"
        self.obs_mode = obs_mode
        self._limit = int(max_steps or HORIZON)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._env: Any = robosuite.make(
                task, robots=robots, has_renderer=False, has_offscreen_renderer=False,
                use_camera_obs=False, hard_reset=False, horizon=self._limit + 1,
                ignore_done=True, seed=SCENE_SEED)
        self._init_pixels(hidden_groups=(0,))  # robosuite draws visual meshes only
        self._episode_return = 0.0
        self._steps = 0
        self._last_obs: dict[str, Any] = {}
        low, high = self._env.action_spec
        self.action_space = spaces.Box(np.asarray(low, np.float32), np.asarray(high, np.float32),
                                       dtype=np.float32)
        self._env.reset()
        self._state_dim = int(self._flat(self._env._get_observations(force_update=True)).size)
        first = self.nominal_spec().compile()
        self._sizes = (first.nq, first.nv, first.nu)
        self._roles = self._make_roles(first)
        self._init_render_settings(render)
        self.install_model(first)
        self._finish_init(self._state_dim)

    # -- MujocoScene -------------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model currently simulated (robosuite's ``sim.model._model``)."""
        return self._env.sim.model._model  # noqa: SLF001

    @property
    def data(self) -> mujoco.MjData:
        """Its ``MjData``."""
        return self._env.sim.data._data  # noqa: SLF001

    @property
    def success_rule(self) -> str:
        """The success rule in words."""
        return (f"robosuite's _check_success() of {self.task} at any step (the episode ends "
                f"there), horizon {self._limit} steps at 20 Hz")

    def suite_observation(self) -> dict[str, Any]:
        """robosuite's observation dict of the last reset or step (for the scripted experts:
        ``robot0_eef_pos``, ``cube_pos``, ... [m])."""
        return self._last_obs

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh nominal MjSpec: the task's MJCF (``env.model.get_xml()``), with names
        given to unnamed elements (the light becomes ``light0``)."""
        spec = mujoco.MjSpec.from_string(self._env.model.get_xml())
        name_elements(spec)
        return spec

    def install_model(self, model: mujoco.MjModel) -> None:
        """Simulate ``model`` from now on: a new robosuite ``MjSim`` on it (robosuite's reset
        points the robots and controllers at it), the state carried over.

        Raises:
            SceneError: If ``model`` changes the number of qpos, qvel or actuators.
        """
        from robosuite.utils.binding_utils import MjSim

        sizes = (model.nq, model.nv, model.nu)
        if sizes != self._sizes:
            raise SceneError(
                f"the installed model changes robosuite/{self.task}'s (nq, nv, nu) from "
                f"{self._sizes} to {sizes}; add distractors as static (jointless) world geoms")
        self._write_render_settings(model)
        old = self.data
        sim = MjSim(model)
        new = sim.data._data  # noqa: SLF001
        new.qpos[:], new.qvel[:], new.ctrl[:] = old.qpos, old.qvel, old.ctrl
        new.time = old.time
        sim.forward()
        self._env.sim = sim
        self._env._setup_references()  # noqa: SLF001 - robots re-pointed at the new sim
        self._frames.set_model(model)

    def observe(self) -> Any:
        """The observation of the current state (robosuite's observables, recomputed)."""
        self._env.sim.forward()
        self._last_obs = self._env._get_observations(force_update=True)  # noqa: SLF001
        return self._transform(self._flat(self._last_obs))

    # -- gym API -----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset; ``seed`` reseeds robosuite's generator (placements, initial joint noise)."""
        super().reset(seed=seed)
        task_seed = int(seed) if seed is not None else int(self.np_random.integers(2**31 - 1))
        # robosuite's placement samplers share env.rng: reseed it in place
        self._env.rng.bit_generator.state = np.random.default_rng(task_seed).bit_generator.state
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obs = self._env.reset()
        self._last_obs = obs
        self._episode_return, self._steps = 0.0, 0
        return self._transform(self._flat(obs)), {"success": False, "episode_return": 0.0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step robosuite once; the episode ends at success (terminated) or the horizon."""
        obs, reward, _, _ = self._env.step(np.asarray(action, dtype=np.float64))
        self._last_obs = obs
        self._steps += 1
        self._episode_return += float(reward)
        success = bool(self._env._check_success())  # noqa: SLF001
        truncated = not success and self._steps >= self._limit
        info = {"success": success, "episode_return": self._episode_return,
                "robogen": {"success_metric": float(success)}}
        return self._transform(self._flat(obs)), float(reward), success, truncated, info

    def close(self) -> None:
        """Free the pixel renderer and robosuite's env."""
        super().close()
        self._env.close()

    # -- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _flat(obs: dict[str, Any]) -> np.ndarray:
        return np.concatenate([np.asarray(obs["robot0_proprio-state"], np.float64).ravel(),
                               np.asarray(obs["object-state"], np.float64).ravel()])

    def _make_roles(self, model: mujoco.MjModel) -> SceneRoles:
        root = model.body(ROBOT_ROOT).id
        robot = tuple(model.body(i).name for i in range(model.nbody)
                      if descends_from(model, i, root) and i != root
                      and not model.body(i).name.startswith("fixed_mount"))
        robot_ids = {model.body(b).id for b in robot}
        fixed = {model.body(n).id for n in FIXED
                 if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) >= 0}
        objects = tuple(
            model.body(i).name for i in range(1, model.nbody)
            if int(model.body_parentid[i]) == 0 and i not in fixed
            and not model.body(i).name.startswith(("robot0_", "fixed_mount", "Visual")))
        object_ids = {model.body(b).id for b in objects}
        object_ids |= {i for i in range(model.nbody)
                       if any(descends_from(model, i, o) for o in list(object_ids))}
        geom_names = [model.geom(g).name for g in range(model.ngeom)]
        object_geoms = tuple(n for g, n in enumerate(geom_names)
                             if int(model.geom_bodyid[g]) in object_ids and n)
        table = tuple(n for n in ("table_visual", "table_collision") if n in geom_names)
        joints = tuple(model.joint(j).name for j in range(model.njnt)
                       if int(model.jnt_bodyid[j]) in robot_ids)
        pose: list[PoseDof] = []
        for j in range(model.njnt):
            body = int(model.jnt_bodyid[j])
            if body in object_ids and int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
                name = model.joint(j).name
                pose += [PoseDof(name, 0, 0.04), PoseDof(name, 1, 0.04)]
        if self.task == "Door":
            pose.append(PoseDof("Door_hinge", 0, 0.2, 0.0, 0.4))
        region = None
        if self.task in DISTRACTOR_XY and table:
            top = float(model.geom("table_collision").pos[2] + model.body("table").pos[2]
                        + model.geom("table_collision").size[2])
            region = (*DISTRACTOR_XY[self.task], top)
        walls = tuple(model.geom(g).name for g in range(model.ngeom)
                      if model.geom(g).name.startswith("wall_"))
        return SceneRoles(
            floor_geoms=("floor",), background_geoms=walls, table_geoms=table,
            object_geoms=object_geoms,
            object_bodies=objects, robot_bodies=robot, robot_joints=joints,
            robot_actuators=tuple(model.actuator(a).name for a in range(model.nu)),
            cameras=tuple(c for c in CAMERAS if c in [model.camera(i).name
                                                      for i in range(model.ncam)]),
            lights=tuple(model.light(i).name for i in range(model.nlight)),
            look_at=(0.0, 0.0, 0.9), distractor_region=region, pose_dofs=tuple(pose),
            keep_clear=(*robot, *objects),
        )

def make_robosuite(task: str, *, obs_mode: str = "state", max_steps: int | None = None,
                   render: RenderSettings | None = None, success_threshold: float | None = None,
                   robots: str = "Panda") -> gym.Env[Any, Any]:
    """Create ``robosuite/<task>`` (see the module docstring).

    Raises:
        UnknownNameError: On an unknown task.
        InvalidSpecError: On a bad step limit, an unsupported robot or a success threshold.
    """
    _check(task)
    check_max_steps(max_steps)
    limit = int(max_steps or HORIZON)
    inner = RobosuiteEnv(task, obs_mode=obs_mode, render=render, robots=robots,
                         max_steps=limit, success_threshold=success_threshold)
    inner.spec = EnvSpec(id=f"robosuite/{task}", entry_point=f"{__name__}:make_robosuite",
                         max_episode_steps=limit,
                         kwargs={"task": task, "max_steps": limit, "obs_mode": obs_mode,
                                 "robots": robots})
    return gym.wrappers.TimeLimit(inner, limit)


def family_ids() -> tuple[str, ...]:
    """Names of the ``robosuite`` env family: :data:`TASKS`."""
    return TASKS


def family_make(name: str, options: EnvOptions, **kwargs: Any) -> gym.Env[Any, Any]:
    """Create ``robosuite/<name>`` with :func:`make_robosuite` (``robots`` is the one env
    kwarg)."""
    kwargs.pop("disable_env_checker", None)  # a gym.make argument; the env is built directly
    return make_robosuite(name, obs_mode=options.obs_mode, max_steps=options.max_steps,
                          render=options.render, success_threshold=options.success_threshold,
                          **kwargs)
