"""The ``dm_control`` env family: DeepMind Control Suite tasks made perturbable.

``robogen.envs.make("dm_control/cheetah-run")`` loads ``suite.load("cheetah", "run")``
(dm_control 1.0.50) and wraps it in a :class:`DMControlEnv`, a Gymnasium env that is a
:class:`~robogen.envs.base.MujocoScene`: robogen's axes edit the suite's own model (its
``MjSpec`` built from the domain's XML and assets), the suite's task keeps deciding
initial states, rewards and observations, and pixels come from robogen's offscreen
renderer (render lanes, deferred frames) drawing the suite's ``MjModel``.

Install: ``make setup-suites`` builds ``.venv-suites``, robogen's MuJoCo 3.x track
(dm_control 1.0.50 pins ``mujoco==3.17.0`` and fails on mujoco 4.0:
``'MjModel' object has no attribute 'flex_vertedge'``).

Env ids ``dm_control/<domain>-<task>`` (:data:`TASKS`); the domain and task names are the
suite's own (``ball_in_cup-catch``, ``manipulator-bring_ball``).

Observation (``state``, float32): the suite's observation dict flattened in its own
order (``np.concatenate([v.ravel() for v in obs.values()])``, as DrQ-v2 and most
pixel-RL code do); units are the suite's (positions [m] or [rad], velocities [m/s] or
[rad/s], orientations as cosines/sines, touch sensors). ``pixels``: ``(84, 84, 3) uint8``
from the domain's camera 0 (``side`` for cheetah and walker, ``fixed`` for cartpole and
reacher, ``cam0`` for finger and ball_in_cup, ...), robogen's render settings (shadows
and MSAA off by default; the suite's own ``physics.render`` uses the XML's 2048^2 shadow
map); ``render=RenderSettings(shadowsize=2048, offsamples=4)`` draws the suite's look.

Action: the suite's ``action_spec`` (a ``Box`` in [-1, 1] for every listed task),
applied ``action_repeat`` times per env step (env kwarg, default 1: the suite's own
control step; DrQ-v2 uses 2, PlaNet/Dreamer 2-8: evaluate a policy with the repeat it
was trained with). The reward of an env step is the sum over its repeats.

Stepping: each control step is the suite's ``Environment.step`` called piece by piece (the
task's ``before_step``, the physics' legacy step, ``after_step``, ``get_reward``,
``get_termination``; the observation once per env step): the same values bit for bit, without
its ``TimeStep`` and per-step warning bookkeeping (~8 us of a ~65 us cheetah-run step;
robogen's wrapper reads MuJoCo's warning counters instead, see ``capabilities.step_checks_state``).

Episode: the suite's 1000 control steps (:data:`SUITE_STEPS`), that is
``ceil(1000 / action_repeat)`` env steps (truncated); ``max_steps`` changes it.
``terminated`` when the suite's task ends the episode with discount 0, truncated when it
ends it with another discount (none of the listed tasks ends an episode).

Success: episode return >= ``success_threshold`` at the last step, default
:data:`DEFAULT_THRESHOLD` = 500 at the suite's 1000-step horizon (half the maximum return:
the suite's rewards are in [0, 1] per control step) and scaled by ``max_steps * action_repeat
/ 1000`` for another horizon; a ``success_threshold`` given by the user replaces it (not
scaled). Returns are always reported, so a study can use its own cut.

Initial states: ``reset(seed=s)`` gives the task a fresh ``numpy.random.RandomState(s)``
before the suite's ``initialize_episode``, so episode *i* starts from the same state in
every condition (robogen's paired gaps).

Scene roles (:data:`DOMAINS`): the floor plane (``ground``/``floor``, with the skybox the
texture axis re-paints), the robot's bodies, its geoms (the texture axis recolours them,
like DMC-GB's ``color_hard`` does the robot's material), task objects (finger's spinner,
ball_in_cup's and manipulator's ball, reacher's and point_mass's target), the light, the
cameras (the observation camera first), distractors as static geoms on the floor in front
of the camera, and pose dofs (the actuated joints and objects' joints) for
``object_pose``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import gymnasium as gym  # robogen.envs imported robogen._gl first (MUJOCO_GL)
import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from robogen.envs.base import PoseDof, SceneCapabilities, SceneRoles, SubstepObserver
from robogen.envs.dm_control_domains import (
    BAD_ACTION_REPEAT,
    DEFAULT_THRESHOLD,
    DOMAINS,
    OBS_SIZE_CHANGED,
    SUITE_STEPS,
    TASKS,
    DMControlDomain,
    Vec4,
    _flatten,
    actuated_joints,
    check_action_repeat,
    default_steps,
    inline_includes,
    split_name,
)
from robogen.envs.elements import descends_from
from robogen.envs.families import EnvOptions, check_max_steps
from robogen.envs.gym_catalog import SuccessRule
from robogen.envs.suite_scene import SuiteScene
from robogen.errors import SceneError
from robogen.types import RenderSettings

__all__ = [
    "BAD_ACTION_REPEAT",
    "DEFAULT_THRESHOLD",
    "DOMAINS",
    "OBS_SIZE_CHANGED",
    "SUITE_STEPS",
    "TASKS",
    "DMControlDomain",
    "DMControlEnv",
    "Vec4",
    "actuated_joints",
    "check_action_repeat",
    "default_steps",
    "family_ids",
    "family_make",
    "inline_includes",
    "make_dm_control",
    "split_name",
]


class DMControlEnv(SuiteScene):
    """A dm_control suite task as a perturbable Gymnasium env (a :class:`MujocoScene`).

    Description:
        ``suite.load(domain, task)`` stepped ``action_repeat`` control steps per env step
        (its physics and task hooks, as its ``Environment.step``); the suite's task decides
        initial states, rewards, termination and observations.

    Observation Space:
        ============  =====================================  =============================
        obs_mode      space                                  unit
        ============  =====================================  =============================
        state         Box(-inf, inf, (obs_dim,), float32)    the suite's (m, rad, m/s...)
        pixels        Box(0, 255, (H, W, 3), uint8)          RGB from camera 0
        state+pixels  Dict(state=..., pixels=...)            both
        ============  =====================================  =============================

    Action Space:
        The suite's ``action_spec`` as a ``Box`` (float32), actuator controls in [-1, 1].

    Reward:
        The suite's per control step, in [0, 1], summed over the repeats.

    Perturbation hooks:
        :meth:`nominal_spec`, :meth:`install_model`, :meth:`textures_changed`,
        :meth:`observe`, :meth:`render_frame`, :attr:`roles`.

    Success:
        Episode return >= the threshold at the last step (module docstring);
        ``info["success"]`` False before.

    Episode End:
        ``terminated`` if the task ends the episode (discount 0); truncated at ``max_steps``
        env steps by the env itself (no Gymnasium ``TimeLimit`` around it: ~1 us a step
        of a redundant wrapper), or when the task ends it with a non-zero discount.

    Version History:
        * v0: initial adapter (dm_control 1.0.50, mujoco 3.17).

    Args:
        name: ``<domain>-<task>``, one of :data:`TASKS`.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        render: Pixel settings; None: 84x84 from camera 0, shadows and MSAA off.
        success_threshold: Return threshold replacing the default rule (not scaled).
        action_repeat: Control steps per env step (int >= 1).
        max_steps: The episode's env steps (truncation, threshold scaling); None: the
            suite's horizon.

    Raises:
        UnknownNameError: On an unknown name.
        InvalidSpecError: On a bad observation mode, render size or action repeat.
    """

    def __init__(self, name: str, obs_mode: str = "state", render: RenderSettings | None = None,
                 success_threshold: float | None = None, action_repeat: int = 1,
                 max_steps: int | None = None) -> None:
        from dm_control import suite

        domain, task = split_name(name)
        check_action_repeat(action_repeat)
        check_max_steps(max_steps)
        self._args = {"name": name, "obs_mode": obs_mode,
                      "render": None if render is None else dataclasses.asdict(render),
                      "success_threshold": success_threshold, "action_repeat": action_repeat,
                      "max_steps": max_steps}
        self.name = name
        self._label = f"dm_control/{name}"
        self.domain = DOMAINS[domain]
        self.obs_mode = obs_mode
        self.action_repeat = action_repeat
        # the episode length is max_steps (this env truncates): no time limit inside the suite
        self._env: Any = suite.load(domain, task, task_kwargs={"time_limit": float("inf")})
        self._physics: Any = self._env.physics
        self._task: Any = self._env.task
        self._n_sub_steps = int(self._env._n_sub_steps)  # noqa: SLF001 - the suite's control step
        self._legacy = bool(self._physics.legacy_step)
        self._rk4 = False
        self._ptrs: tuple[mujoco.MjModel, mujoco.MjData] = (self.model, self.data)
        self.substep_observer: SubstepObserver | None = None
        """See :class:`~robogen.envs.base.SubstepScene` (the safety monitor sets it)."""
        # MuJoCo warnings are logged, not raised as dm_control PhysicsError (what
        # Physics.suppress_physics_errors does, here for the env's life): robogen's wrapper
        # reports a diverged state as sim_unstable from the warning counters
        self._physics._warnings_cause_exception = False  # noqa: SLF001
        self._init_pixels()
        self._episode_return = 0.0
        self._steps = 0
        self._limit = steps = max_steps or default_steps(action_repeat)
        if success_threshold is not None:
            self._rule = SuccessRule("return", float(success_threshold))
        else:
            self._rule = SuccessRule(
                "return", DEFAULT_THRESHOLD * min(steps * action_repeat, SUITE_STEPS)
                / SUITE_STEPS)
        spec = self._env.action_spec()
        self.action_space = spaces.Box(np.asarray(spec.minimum, np.float32),
                                       np.asarray(spec.maximum, np.float32),
                                       shape=spec.shape, dtype=np.float32)
        self._state_dim = int(_flatten(self._task.get_observation(self._physics)).size)
        with warnings.catch_warnings():  # cheetah.xml's deprecated settotalmass
            warnings.filterwarnings("ignore", message=".*settotalmass.*")
            first = self.nominal_spec().compile()
        self._sizes = (first.nq, first.nv, first.nu)
        self._roles = self._make_roles(first)
        self._init_render_settings(render)
        self.install_model(first)
        self._finish_init(self._state_dim)

    # -- MujocoScene -------------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model currently simulated (the suite physics' ``MjModel``)."""
        return self._physics.model.ptr

    @property
    def data(self) -> mujoco.MjData:
        """Its ``MjData``."""
        return self._physics.data.ptr

    @property
    def capabilities(self) -> SceneCapabilities:
        """``step_checks_state`` with the suite's legacy step (every listed task): each step
        ends with ``mj_step1``, whose checks of ``qpos``/``qvel`` (and ``mj_step2``'s of
        ``qacc``) raise MuJoCo's bad-state warnings for a non-finite state, so robogen's
        wrapper reads the warning counters alone (see
        :class:`~robogen.envs.base.SceneCapabilities`)."""
        return SceneCapabilities(step_checks_state=self._legacy)

    @property
    def rule(self) -> SuccessRule:
        """The success rule in force."""
        return self._rule

    @property
    def success_rule(self) -> str:
        """The success rule in words."""
        return (f"{self._rule.describe()} (dm_control return over "
                f"{SUITE_STEPS} control steps at most {SUITE_STEPS:g})")

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh nominal MjSpec: the domain's XML and the suite's common assets."""
        import importlib

        module = importlib.import_module(f"dm_control.suite.{self.domain.domain}")
        xml, assets = getattr(module, self.domain.model_fn)(*self.domain.model_args)
        return mujoco.MjSpec.from_string(inline_includes(xml, assets))

    def install_model(self, model: mujoco.MjModel) -> None:
        """Simulate ``model`` from now on: the suite's physics reloads it (named indexing
        rebuilt), the state carries over, render settings go into ``model.vis``.

        Raises:
            SceneError: If ``model`` changes the number of qpos, qvel or actuators (the
                previous model stays).
        """
        from dm_control.mujoco import wrapper

        sizes = (model.nq, model.nv, model.nu)
        if sizes != self._sizes:
            raise SceneError(OBS_SIZE_CHANGED.format(env=self.name, expected=self._sizes,
                                                     got=sizes))
        self._write_render_settings(model)
        old = self.data
        new = wrapper.MjData(wrapper.MjModel(model))
        raw = new.ptr
        raw.qpos[:], raw.qvel[:], raw.ctrl[:] = old.qpos, old.qvel, old.ctrl
        if model.na == old.act.size:
            raw.act[:] = old.act
        raw.time = old.time
        self._physics._reload_from_data(new)  # noqa: SLF001 - dm_control's reload hook
        self._ptrs = (self.model, self.data)
        self._rk4 = int(model.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4)
        self._frames.set_model(model)

    def observe(self) -> Any:
        """The observation of the current state (the task's, after ``mj_forward``)."""
        mujoco.mj_forward(self.model, self.data)
        return self._transform(_flatten(self._task.get_observation(self._physics)))

    # -- gym API -----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset; ``seed`` seeds the task's initial-state generator."""
        super().reset(seed=seed)
        task_seed = int(seed) if seed is not None else int(self.np_random.integers(2**31 - 1))
        self._env.task._random = np.random.RandomState(task_seed)  # noqa: SLF001
        ts = self._env.reset()
        self._episode_return = 0.0
        self._steps = 0
        return self._transform(_flatten(ts.observation)), {"success": False,
                                                           "episode_return": 0.0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply ``action`` for ``action_repeat`` control steps.

        Each control step is what the suite's ``Environment.step`` does (the task's
        ``before_step``, the physics' step with up-to-date position and velocity fields,
        ``after_step``, ``get_reward``, ``get_termination``), called here directly: the
        same physics and the same values, without its ``TimeStep``, its per-step
        warning bookkeeping (robogen's wrapper reads MuJoCo's warning counters) and an
        observation at every repeat (the task's observation is read once, after the last
        repeat). ``tests/envs/test_dm_control.py`` pins the equality with the suite's
        loop.

        ``terminated`` when the task ends the episode with discount 0; a task that ends
        it with another discount truncates it. ``info["success"]`` is decided at the last
        step (the return rule; an episode the task ended early is never a success).
        """
        physics, task = self._physics, self._task
        act = np.asarray(action, dtype=np.float64)
        reward = 0.0
        discount = None
        advance = self._advance
        for _ in range(self.action_repeat):
            task.before_step(act, physics)
            advance()
            task.after_step(physics)
            reward += float(task.get_reward(physics) or 0.0)
            discount = task.get_termination(physics)
            if discount is not None:
                break
        self._steps += 1
        self._episode_return += reward
        terminated = discount is not None and discount == 0.0
        at_horizon = self._steps >= self._limit and not terminated
        truncated = at_horizon or (discount is not None and not terminated)
        info = {"success": at_horizon and self._episode_return >= self._rule.threshold,
                "episode_return": self._episode_return,
                "robogen": {"success_metric": self._episode_return}}
        obs = self._transform(_flatten(task.get_observation(physics)))
        return obs, reward, terminated, truncated, info

    def _advance(self) -> None:
        """One control step of the physics: dm_control's ``Physics.step(n_sub_steps)``
        (legacy step: ``mj_step2``, then ``mj_step`` for the further substeps and
        ``mj_step1``, so that the fields of the returned state are up to date and MuJoCo
        has checked its ``qpos``/``qvel``; RK4: ``mj_step`` then ``mj_step1``), without
        its Python context manager."""
        model, data = self._ptrs
        n = self._n_sub_steps
        observer = self.substep_observer
        if observer is not None:
            self._advance_observed(observer)
            return
        if not self._legacy:
            mujoco.mj_step(model, data, n)
            return
        if self._rk4:
            mujoco.mj_step(model, data, n)
        else:
            mujoco.mj_step2(model, data)
            if n > 1:
                mujoco.mj_step(model, data, n - 1)
        mujoco.mj_step1(model, data)

    def _advance_observed(self, observer: SubstepObserver) -> None:
        """:meth:`_advance` one substep at a time (the same calls, bit for bit), showing
        ``observer`` each substep's solved state: after ``mj_step2`` or ``mj_step``, whose
        contacts and constraint forces belong to the state the solve started from; never
        after the trailing ``mj_step1``, which rebuilds contacts and constraint rows for the
        new state without solving them (forces read there belong to no state)."""
        model, data = self._ptrs
        n = self._n_sub_steps
        first = 0
        if self._legacy and not self._rk4:
            mujoco.mj_step2(model, data)  # pyright: ignore[reportAttributeAccessIssue]
            observer(model, data)
            first = 1
        for _ in range(first, n):
            mujoco.mj_step(model, data)  # pyright: ignore[reportAttributeAccessIssue]
            observer(model, data)
        if self._legacy:
            mujoco.mj_step1(model, data)  # pyright: ignore[reportAttributeAccessIssue]

    # -- helpers -----------------------------------------------------------------------------

    def _make_roles(self, model: mujoco.MjModel) -> SceneRoles:
        d = self.domain
        roots = [model.body(r).id for r in d.robot_roots]
        robot = tuple(model.body(i).name for i in range(1, model.nbody)
                      if any(descends_from(model, i, r) for r in roots))
        robot_ids = {model.body(b).id for b in robot}
        robot_geoms = tuple(model.geom(g).name for g in range(model.ngeom)
                            if int(model.geom_bodyid[g]) in robot_ids)
        joints = actuated_joints(model)
        pose: tuple[PoseDof, ...] = ()
        if d.hinge_offset is not None:
            for n in joints:
                j = model.joint(n)
                low, high = ((float(j.range[0]), float(j.range[1]))
                             if model.jnt_limited[j.id] else (None, None))
                pose += (PoseDof(n, 0, d.hinge_offset, low, high),)
        region = None
        if d.distractor_xy is not None:
            region = (*d.distractor_xy, float(model.geom(d.floor_geoms[0]).pos[2]))
        look_at = d.look_at or tuple(float(x) for x in model.body(d.robot_roots[0]).pos)
        return SceneRoles(
            floor_geoms=d.floor_geoms, object_geoms=d.object_geoms,
            object_bodies=d.object_bodies, robot_bodies=robot, robot_geoms=robot_geoms,
            robot_joints=joints,
            robot_actuators=tuple(model.actuator(a).name for a in range(model.nu)),
            cameras=tuple(model.camera(i).name for i in range(model.ncam)),
            lights=tuple(model.light(i).name for i in range(model.nlight)),
            look_at=look_at,  # type: ignore[arg-type]
            distractor_region=region, pose_dofs=pose + d.pose_dofs,
            keep_clear=(*robot, *d.object_bodies),
        )

def make_dm_control(name: str, *, obs_mode: str = "state", max_steps: int | None = None,
                    render: RenderSettings | None = None,
                    success_threshold: float | None = None, action_repeat: int = 1
                    ) -> gym.Env[Any, Any]:
    """Create ``dm_control/<name>`` (see the module docstring).

    Args:
        name: ``<domain>-<task>``, one of :data:`TASKS`.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        max_steps: Env steps per episode; None: ``ceil(1000 / action_repeat)``.
        render: Pixel settings; None: 84x84 from camera 0, shadows and MSAA off.
        success_threshold: Return threshold replacing the default rule.
        action_repeat: Control steps per env step (int >= 1).

    Returns:
        A :class:`DMControlEnv` (it truncates at ``max_steps`` itself; its ``spec`` has
        ``max_episode_steps``).

    Raises:
        UnknownNameError: On an unknown name.
        InvalidSpecError: On a bad step limit, action repeat, observation mode or size.
    """
    split_name(name)
    check_max_steps(max_steps)
    check_action_repeat(action_repeat)
    limit = max_steps or default_steps(action_repeat)
    inner = DMControlEnv(name, obs_mode=obs_mode, render=render,
                         success_threshold=success_threshold, action_repeat=action_repeat,
                         max_steps=limit)
    inner.spec = EnvSpec(id=f"dm_control/{name}", entry_point=f"{__name__}:make_dm_control",
                         max_episode_steps=limit,
                         kwargs={"name": name, "max_steps": limit, "obs_mode": obs_mode,
                                 "action_repeat": action_repeat})
    return inner


def family_ids() -> tuple[str, ...]:
    """Names of the ``dm_control`` env family: :data:`TASKS`."""
    return TASKS


def family_make(name: str, options: EnvOptions, **kwargs: Any) -> gym.Env[Any, Any]:
    """Create ``dm_control/<name>`` with :func:`make_dm_control` (``action_repeat`` is the
    one env kwarg)."""
    kwargs.pop("disable_env_checker", None)  # a gym.make argument; the env is built directly
    return make_dm_control(name, obs_mode=options.obs_mode, max_steps=options.max_steps,
                           render=options.render, success_threshold=options.success_threshold,
                           **kwargs)

