"""``PerturbedEnv``: applies a condition's axis levels to a MuJoCo scene at every reset.

At ``reset`` the wrapper (per step it only passes actions and observations through the
episode's step filters, when an axis made some):

1. drops levels of severity 0 (bit-identical nominal) and validates the rest;
2. samples one :class:`~robogen.perturbations.base.Perturbation` per level, each
   axis from its own stream ``SeedSequence([perturbation_seed, crc32(axis)])``,
   so an axis draws the same values in a single-axis and a combined condition;
3. recompiles when the structural edits (``edit_spec``) differ from the
   installed ones: a fresh ``scene.nominal_spec()`` is edited, compiled and
   installed, and a pristine copy is remembered as that structure's nominal;
   going back to the nominal structure reinstalls the original model;
4. restores every field any perturbation class may write (the union of
   ``MODEL_FIELDS``) from the remembered nominal, applies ``apply_model`` of
   each perturbation, re-uploads every texture written in this or the previous
   episode, and runs ``mj_setConst`` if an inertial edit is in force. The
   restored fields include every constant ``mj_setConst`` derives (inertial
   weights, subtree masses, camera/light offsets), and ``mj_setConst`` on the
   nominal model reproduces them bit for bit, so an episode after an inertial
   edit needs no extra ``mj_setConst`` and nothing depends on episode history;
5. resets the wrapped env with ``seed``;
6. applies ``apply_state`` of each perturbation; if any changed the state, runs
   ``mj_forward`` and takes the observation again from ``scene.observe()``;
7. makes the episode's step filters (:meth:`Perturbation.step_filter`: the ``sensor`` and
   ``action`` axes), passes the reset's observation through them, and from then on every
   action before the env steps and every observation it returns;
8. reports ``info["robogen"]["perturbations"]`` and ``info["robogen"]["changed_axes"]``.
   Each record holds the sampled ``values``, ``changed``, and, for axes whose
   effect can differ from what was sampled, ``applied``: what the scene got
   (``object_pose``: each offset after clipping, a ``clipped`` flag and the
   realized initial coordinate; ``distractors``: only the distractors placed,
   and how many were asked). A level pinned to a distinct value (``AxisLevel.value``) draws
   it with ``Axis.sample_value`` instead of the episode's stream, and its record adds
   ``value: {"index", "id"}``.

Edits are always *nominal ∘ value*, so resets never compound (the
composable-variation design of dm_control's ``composer.variation``).
``step`` raises :class:`SimulationUnstableError` when MuJoCo diverges, after every step
including an episode's last: a non-finite ``qpos``/``qvel``/``qacc``, an entry beyond MuJoCo's
own limit :data:`MAX_STATE` (``mjMAXVAL``, which MuJoCo checks only at the start of the next
step), or a new ``mjWARN_BADQPOS``/``BADQVEL``/``BADQACC`` warning (MuJoCo then resets
``MjData`` itself, so the state alone looks fine).
"""

from __future__ import annotations

import copy
import json
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from robogen.envs.base import MujocoScene, find_scene
from robogen.errors import InvalidPerturbationError, RobogenError, SceneError
from robogen.perturbations import helpers as u
from robogen.perturbations.base import (
    Axis,
    FilterContext,
    Perturbation,
    StepFilter,
    check_level,
    make_axis,
)
from robogen.types import AxisLevel

DUPLICATE_AXIS = "axis {axis!r} appears more than once in the levels {levels}; give each axis once"
BAD_PERTURBATION_SEED = (
    "options['perturbation_seed'] must be a non-negative integer, got {value!r}"
)
UNSTABLE = (
    "MuJoCo simulation became unstable at step {step} ({why}) under perturbations {axes}; "
    "the episode is recorded with cause 'sim_unstable'. Lower the severity or check the "
    "model's time step if this happens at nominal"
)


SPREAD_SEEDS = (0, 1, 2, 3)
"""Reset seeds of the nominal episodes :meth:`PerturbedEnv.state_spread` measures."""
SPREAD_STEPS = 50
"""Steps of uniformly random actions per such episode."""

BAD_STATE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)
"""MuJoCo warnings raised when it finds a non-finite or huge state and resets ``MjData``."""


MAX_STATE = float(getattr(mujoco, "mjMAXVAL", 1e10))  # not in the type stubs
"""The largest ``|qpos|``, ``|qvel|``, ``|qacc|`` entry MuJoCo accepts (``mjMAXVAL``, 1e10): its
own checks (``mj_checkPos``/``Vel``/``Acc``) call a larger value diverged and reset ``MjData``.
They run at the start of the next step, which never comes after an episode's last step, so
the wrapper applies the same limit after every step."""
_MAX_STATE_SQ = MAX_STATE * MAX_STATE


class SimulationUnstableError(RobogenError, RuntimeError):
    """MuJoCo diverged during ``step``: a non-finite state, an entry beyond :data:`MAX_STATE`,
    or a bad-state warning."""


def all_perturbation_classes() -> list[type[Perturbation]]:
    """Every (transitive) subclass of :class:`Perturbation` defined so far."""
    out: list[type[Perturbation]] = []
    stack = list(Perturbation.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in out:
            out.append(cls)
            stack.extend(cls.__subclasses__())
    return out


def axis_rng(perturbation_seed: int, axis: str) -> np.random.Generator:
    """The generator of ``axis`` for an episode: ``SeedSequence([seed, crc32(axis)])``."""
    return np.random.default_rng(np.random.SeedSequence([int(perturbation_seed),
                                                         zlib.crc32(axis.encode())]))


_BAD_IDS = [int(w) for w in BAD_STATE_WARNINGS]
assert _BAD_IDS == list(range(_BAD_IDS[0], _BAD_IDS[0] + len(_BAD_IDS)))  # one slice of them
_BAD_SLICE = slice(_BAD_IDS[0], _BAD_IDS[0] + len(_BAD_IDS))


def _value_record(axis: Axis, level: AxisLevel) -> dict[str, Any]:
    """``{"value": {"index", "id"}}`` for a level pinned to a distinct value, else ``{}``."""
    if level.value is None:
        return {}
    return {"value": {"index": int(level.value), "id": axis.value_id(level.value, level.split)}}


def _bad_counts(data: mujoco.MjData) -> list[int]:
    """The counters of :data:`BAD_STATE_WARNINGS` in ``data``."""
    return data.warning.number[_BAD_SLICE].tolist()


def _as_levels(levels: Iterable[AxisLevel | dict[str, Any]]) -> tuple[AxisLevel, ...]:
    out = tuple(lv if isinstance(lv, AxisLevel) else AxisLevel.from_dict(lv) for lv in levels)
    seen: set[str] = set()
    for lv in out:
        check_level(lv.severity, lv.split)
        axis = make_axis(lv.axis)  # raises UnknownNameError with close matches
        if lv.value is not None:
            axis.check_value(lv.value, lv.split)
        if lv.axis in seen:
            raise InvalidPerturbationError(DUPLICATE_AXIS.format(
                axis=lv.axis, levels=[x.label for x in out]))
        seen.add(lv.axis)
    return out


class PerturbedEnv(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Apply axis levels to the wrapped env's MuJoCo scene at every reset.

    Args:
        env: An env with a :class:`~robogen.envs.base.MujocoScene` in its stack
            (``robogen.envs.make``); its model must be nominal when wrapped.
        levels: The condition: one :class:`~robogen.types.AxisLevel` (or its
            dict) per axis; empty or all-zero severities is the nominal scene.

    Raises:
        SceneError: If ``env`` exposes no MujocoScene.
        InvalidPerturbationError: On a severity outside [0, 1], an unknown split
            or an axis given twice.
        UnknownNameError: On an unregistered axis name (lists close matches).

    Reset options:
        ``perturbation_seed`` (int >= 0): seeds every axis's stream for this
        episode. Without it, a seed is drawn from the wrapper's own generator
        (seeded by ``reset(seed=...)``), leaving the env's ``np_random`` alone so
        initial states stay paired across conditions.
    """

    def __init__(self, env: gym.Env[Any, Any],
                 levels: Sequence[AxisLevel | dict[str, Any]] = ()) -> None:
        parsed = _as_levels(levels)
        gym.utils.RecordConstructorArgs.__init__(
            self, levels=[{"axis": lv.axis, "severity": lv.severity, "split": lv.split}
                          | ({} if lv.value is None else {"value": lv.value})
                          for lv in parsed])
        gym.Wrapper.__init__(self, env)
        self._scene: MujocoScene = find_scene(env)
        self._levels = parsed
        self._axes: dict[str, Axis] = {}
        self._base_model = self._scene.model
        self._base_pristine = copy.copy(self._base_model)
        self._pristine = self._base_pristine
        self._structure = ""
        self._prev_textures: tuple[int, ...] = ()
        self._rng: np.random.Generator | None = None
        self._bad_list = [0] * len(BAD_STATE_WARNINGS)
        self._step_checks_state = self._scene.capabilities.step_checks_state
        self._steps = 0
        self._views: tuple[Any, ...] = ()
        """(data, qpos, qvel, qacc, warning counts): live views of the scene's ``MjData``,
        taken once per data object (building them costs more than the per-step check)."""
        self._last: tuple[Perturbation, ...] = ()
        self._fields_cache: tuple[int, list[str]] | None = None
        self._filters: tuple[StepFilter, ...] = ()
        self._spread: tuple[np.ndarray | None] | None = None
        self.last_observation: Any = None
        """The observation the last ``reset`` or ``step`` returned, after the episode's step
        filters: what the policy received (failure videos of pixel policies show it)."""

    # -- public ------------------------------------------------------------------------------

    @property
    def scene(self) -> MujocoScene:
        """The MujocoScene the levels act on."""
        return self._scene

    @property
    def levels(self) -> tuple[AxisLevel, ...]:
        """The levels applied at the next reset."""
        return self._levels

    @property
    def perturbations(self) -> tuple[Perturbation, ...]:
        """The perturbations applied at the last reset (severity-0 levels excluded)."""
        return self._last

    @property
    def nominal_model(self) -> mujoco.MjModel:
        """Pristine copy of the nominal model (do not edit)."""
        return self._base_pristine

    def state_spread(self) -> np.ndarray | None:
        """Per-dimension spread of the state observation in nominal episodes (the ``sensor``
        axis scales state corruptions by it).

        Measured once per env, on its first call: the nominal scene is reset with each seed
        of :data:`SPREAD_SEEDS` and stepped :data:`SPREAD_STEPS` times with uniformly random
        actions (seeded; standard normal where the action space is unbounded), and the
        standard deviation of every state dimension over those states is kept (non-finite
        states are skipped; a constant dimension has spread 0 and gets no corruption). The
        env's own random generator is reseeded by those resets; robogen's rollouts always
        reset with a seed, so their episodes do not depend on it.

        Returns:
            ``(obs_dim,) float64`` (the ``state`` part of a ``state+pixels`` observation), or
            None if the observation has no state vector (``pixels``).
        """
        if self._spread is None:
            self._spread = (self._measure_spread(),)
        return self._spread[0]

    def filter_observation(self, obs: Any) -> Any:
        """``obs`` as this episode's step filters pass it to the policy (the ``sensor``
        axis's corruptions; ``robogen preview`` shows a rendered frame through them). Each
        call advances the filters' streams like a step."""
        for f in self._filters:
            obs = f.observation(obs)
        return obs

    def edit_prompt(self, prompt: str) -> str:
        """``prompt`` as this episode's perturbations rewrite it (the ``language`` axis; the
        other axes leave it as it is)."""
        for p in self._last:
            prompt = p.edit_prompt(prompt)
        return prompt

    def set_levels(self, levels: Sequence[AxisLevel | dict[str, Any]]) -> None:
        """Change the condition; takes effect at the next reset.

        Raises:
            InvalidPerturbationError: On a bad severity, split or duplicate axis.
            UnknownNameError: On an unregistered axis.
        """
        self._levels = _as_levels(levels)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Apply the levels and reset the env; see the module docstring.

        Args:
            seed: Passed to the wrapped env's reset (initial state).
            options: Passed on, except ``perturbation_seed`` (int >= 0).

        Returns:
            ``(obs, info)``; ``info["robogen"]`` has ``perturbations`` and ``changed_axes``.

        Raises:
            InvalidPerturbationError: On a bad ``perturbation_seed``.
            SceneError: If a structural edit does not compile or a role is missing.
        """
        options = dict(options or {})
        pseed = options.pop("perturbation_seed", None)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if pseed is None:
            if self._rng is None:
                self._rng = np.random.default_rng()
            pseed = int(self._rng.integers(2**63))
        if isinstance(pseed, bool) or not isinstance(pseed, (int, np.integer)) or pseed < 0:
            raise InvalidPerturbationError(BAD_PERTURBATION_SEED.format(value=pseed))
        active = [lv for lv in self._levels if lv.severity != 0]
        perts = []
        for lv in active:
            check_level(lv.severity, lv.split)
            axis = self._axis(lv.axis)
            perts.append(axis.sample(axis_rng(int(pseed), lv.axis), lv.severity, lv.split,
                                     self._scene)
                         if lv.value is None else
                         axis.sample_value(lv.value, lv.severity, lv.split, self._scene))
        changed = [False] * len(perts)
        if self._spread is None and any(p.axis == "sensor" for p in perts):
            self.state_spread()  # measured on the nominal scene, before any edit is installed

        # (3) structure
        spec_changed = self._install_structure(perts)
        changed = [c or s for c, s in zip(changed, spec_changed, strict=True)]
        # (4) model fields
        scene = self._scene
        model = scene.model
        for path in self._model_fields(model):
            u.copy_field(model, self._pristine, path)
        touched: set[int] = set()
        for i in sorted(range(len(perts)), key=lambda i: perts[i].MODEL_ORDER):
            p = perts[i]
            changed[i] = bool(p.apply_model(model, self._pristine, scene)) or changed[i]
            touched.update(int(t) for t in p.textures_touched(model))
        upload = tuple(sorted(t for t in touched | set(self._prev_textures) if t < model.ntex))
        if upload:
            scene.textures_changed(upload)
        self._prev_textures = tuple(sorted(touched))
        if any(p.NEEDS_SET_CONST for p in perts):
            u.set_const(model, self._pristine)
        # (5) env reset
        obs, info = self.env.reset(seed=seed, options=options or None)
        # (6) state edits
        model, data = scene.model, scene.data
        state_changed = False
        applied: list[dict[str, Any]] = []
        for i, p in enumerate(perts):
            c, what = p.apply_state_and_record(model, data, scene)
            state_changed |= bool(c)
            changed[i] = changed[i] or bool(c)
            applied.append(what)
        if state_changed:
            mujoco.mj_forward(model, data)
            obs = scene.observe()
        self._bad_list = _bad_counts(data)
        self._steps = 0
        self._last = tuple(perts)
        # (7) step filters (and prompt edits, applied by the rollout worker: edit_prompt)
        context = self._filter_context()
        filters = []
        for i, p in enumerate(perts):
            if p.EDITS_PROMPT:
                changed[i] = True
            f = p.step_filter(context)
            if f is not None:
                filters.append(f)
                changed[i] = True
                applied[i] = {**applied[i], **f.applied}
        self._filters = tuple(filters)
        for f in filters:
            obs = f.observation(obs)
        self.last_observation = obs
        # (8) records
        records = [{**p.to_record(), "changed": c, **({"applied": a} if a else {}),
                    **_value_record(self._axis(lv.axis), lv)}
                   for p, c, a, lv in zip(perts, changed, applied, active, strict=True)]
        info = dict(info)
        robogen_info = dict(info.get("robogen") or {})
        robogen_info["perturbations"] = records
        robogen_info["changed_axes"] = [p.axis for p, c in zip(perts, changed, strict=True) if c]
        info["robogen"] = robogen_info
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env: the action and the observation go through the episode's step filters.

        Raises:
            SimulationUnstableError: If the state is non-finite or MuJoCo reported a
                diverged state during the step.
        """
        filters = self._filters
        if not filters:
            result = self._checked_step(action)
            self.last_observation = result[0]
            return result
        for f in filters:
            action = f.action(action)
        obs, reward, terminated, truncated, info = self._checked_step(action)
        for f in filters:
            obs = f.observation(obs)
        self.last_observation = obs
        return obs, reward, terminated, truncated, info

    def _checked_step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        self._steps += 1
        data = self._scene.data
        views = self._views
        if not views or views[0] is not data:
            views = self._views = (data, data.qpos, data.qvel, data.qacc,
                                   data.warning.number[_BAD_SLICE])
        counts = views[4].tolist()
        if counts == self._bad_list:
            if self._step_checks_state:  # MuJoCo checked the state it returns: no warning,
                return result  # so qpos/qvel/qacc are finite (per step: keep this cheap)
            # A sum of squares <= MAX_STATE^2 bounds every entry by MAX_STATE; one NaN or inf
            # makes it fail (a dot product is half the cost of a sum). Many large entries can
            # exceed it too, so the slow path below looks for the bad entry before it says so.
            q, v, acc = views[1], views[2], views[3]
            if np.dot(q, q) + np.dot(v, v) + np.dot(acc, acc) <= _MAX_STATE_SQ:
                return result
        why = None
        for name in ("qpos", "qvel", "qacc"):
            x = getattr(data, name)
            if not np.all(np.isfinite(x)):
                why = f"non-finite {name}"
                break
            if x.size and float(np.max(np.abs(x))) > MAX_STATE:
                why = (f"|{name}| = {float(np.max(np.abs(x))):.3g} beyond MuJoCo's limit "
                       f"{MAX_STATE:g} (mjMAXVAL)")
                break
        if why is None:
            for warning, n, before in zip(BAD_STATE_WARNINGS, counts, self._bad_list,
                                          strict=True):
                if n > before:  # the counts only grow: one of them did
                    why = f"MuJoCo reset the diverged state ({warning.name})"
                    break
        if why is not None:
            axes = [p.axis for p in self._last] or "none (nominal)"
            raise SimulationUnstableError(UNSTABLE.format(step=self._steps, why=why, axes=axes))
        return result

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the cached ``MjData`` views (they would unpickle as copies) and the
        last observation (a pending frame belongs to this process's render thread)."""
        state = self.__dict__.copy()
        state["_views"] = ()
        state["last_observation"] = None
        return state

    # -- internals ---------------------------------------------------------------------------

    def _filter_context(self) -> FilterContext:
        space = self.action_space
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        return FilterContext(
            action_low=None if low is None else np.asarray(low, np.float64),
            action_high=None if high is None else np.asarray(high, np.float64),
            action_shape=tuple(getattr(space, "shape", ()) or ()),
            state_spread=self.state_spread,
        )

    def _measure_spread(self) -> np.ndarray | None:
        """See :meth:`state_spread`."""
        def state_of(obs: Any) -> np.ndarray | None:
            if isinstance(obs, dict):
                obs = obs.get("state")
            if obs is None:
                return None
            x = np.asarray(obs) if isinstance(obs, np.ndarray) else None
            if x is None or x.dtype == np.uint8 or not np.issubdtype(x.dtype, np.number):
                return None
            return x.astype(np.float64)

        self._install_structure([])
        model = self._scene.model
        for path in self._model_fields(model):
            u.copy_field(model, self._pristine, path)
        space = self.action_space
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        shape = tuple(getattr(space, "shape", ()) or ())
        rng = np.random.default_rng(0)
        states: list[np.ndarray] = []
        for seed in SPREAD_SEEDS:
            obs, _ = self.env.reset(seed=seed)
            x = state_of(obs)
            if x is None:
                return None
            states.append(x)
            for _ in range(SPREAD_STEPS):
                if low is not None and high is not None and np.all(np.isfinite(low)) \
                        and np.all(np.isfinite(high)):
                    a = rng.uniform(low, high).astype(np.float32)
                else:
                    a = rng.normal(size=shape).astype(np.float32)
                try:
                    obs, _, terminated, truncated, _ = self.env.step(a)
                except Exception:  # noqa: BLE001 - a diverging calibration episode ends it
                    break
                x = state_of(obs)
                if x is None or not np.all(np.isfinite(x)):
                    break
                states.append(x)
                if terminated or truncated:
                    break
        return np.std(np.stack(states), axis=0)

    def _axis(self, name: str) -> Axis:
        if name not in self._axes:
            self._axes[name] = make_axis(name)
        return self._axes[name]

    def _model_fields(self, model: mujoco.MjModel) -> list[str]:
        """Union of MODEL_FIELDS of every Perturbation class (that this mujoco has)."""
        classes = all_perturbation_classes()
        if self._fields_cache is None or self._fields_cache[0] != len(classes):
            fields: list[str] = []
            for cls in classes:
                for f in cls.MODEL_FIELDS:
                    if f not in fields and u.has_field(model, f):
                        fields.append(f)
            self._fields_cache = (len(classes), fields)
        return self._fields_cache[1]

    def _install_structure(self, perts: list[Perturbation]) -> list[bool]:
        """Recompile and install when the structural edits change; per-perturbation 'changed'."""
        edits = [p for p in perts if p.has_spec_edit]
        key = json.dumps([p.to_record() for p in edits], sort_keys=True) if edits else ""
        flags = [p.has_spec_edit for p in perts]
        if key == self._structure:
            return flags
        scene = self._scene
        if not key:
            # restore the nominal fields before the scene builds render resources from them
            for path in self._model_fields(self._base_model):
                u.copy_field(self._base_model, self._base_pristine, path)
            scene.install_model(self._base_model)
            self._pristine = self._base_pristine
        else:
            spec = scene.nominal_spec()
            flags = [bool(p.edit_spec(spec, scene)) if p.has_spec_edit else False for p in perts]
            try:
                model = u.compile_spec(spec)
            except Exception as e:  # noqa: BLE001 - MuJoCo raises ValueError with its log
                raise SceneError(
                    f"the structural edits of {[p.axis for p in edits]} do not compile: {e}; "
                    "lower the severity or report the scene"
                ) from e
            scene.install_model(model)
            self._pristine = copy.copy(scene.model)
        self._structure = key
        self._prev_textures = ()  # a newly installed model is uploaded whole
        return flags
