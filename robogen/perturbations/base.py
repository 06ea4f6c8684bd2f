"""Axes (factors of variation) and the perturbations they sample.

An :class:`Axis` is one factor of variation. ``axis.sample(rng, severity,
split, scene)`` draws a :class:`Perturbation`: a frozen dataclass of concrete
values (no RNG inside, JSON-serializable, recorded with every episode). A
perturbation acts in up to three stages at reset, always relative to the
remembered nominal so that resets never compound (the composable-variation
design of dm_control's ``composer.variation``):

1. ``edit_spec``: structural edits on a fresh nominal ``MjSpec`` (link lengths,
   added geoms); the scene is recompiled and installed.
2. ``apply_model``: edits of the compiled ``MjModel`` written as
   ``nominal ∘ value`` (colours, lights, camera pose, masses, gains). Every field
   a perturbation may write is listed in ``MODEL_FIELDS`` and restored from the
   nominal model before each reset.
3. ``apply_state``: edits of ``MjData`` after the env's own reset (object
   placement, distractor placement), so they survive the reset.

A perturbation may also act at every step, between the policy and the scene
(the ``sensor`` and ``action`` axes): :meth:`Perturbation.step_filter` makes a
:class:`StepFilter` at each reset, holding that episode's state (its random
stream, a queue of delayed actions, the last observation), which the wrapper
passes every action and observation through.

Severity is a float in [0, 1]: 0 is exactly the nominal scene (no edit at all),
1 the widest shift the axis defines. ``split`` selects the Factor-World value
set: ``train``, the disjoint held-out ``test``, or ``all``.
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from robogen.errors import MUST_BE_IN_RANGE, InvalidPerturbationError
from robogen.registry import Registry
from robogen.types import SPLITS

if TYPE_CHECKING:
    import mujoco

    from robogen.envs.base import MujocoScene

AXIS_KINDS = ("visual", "physical", "structural", "sensor", "actuation", "language")
"""What an axis acts on: the rendered scene, the dynamics, the scene's structure, the
observation the policy gets (``sensor``), the action the robot executes (``actuation``) or
the instruction a prompted policy gets (``language``)."""
BAD_SPLIT = "split must be one of {choices}, got {value!r}"
NO_DISTINCT_VALUES = (
    "axis {axis!r} has no distinct values ({why}); pin values only of axes with distinct "
    "values: {choices}"
)
VALUE_OUT_OF_RANGE = (
    "value {value!r} of axis {axis!r} is outside its {split!r} set of {count} distinct values; "
    "give an index in [0, {count})"
)
_VALUE_STREAM = 0x76616C75  # "valu": the tag that keeps value streams apart from episode ones
_SPLIT_CODES = {"all": 0, "train": 1, "test": 2}


def value_rng(axis: str, split: str, index: int) -> np.random.Generator:
    """The stream of distinct value ``index`` of ``axis``'s ``split`` set.

    ``SeedSequence([tag, crc32(axis), split code, index])``: a function of the index only
    (not of the run seed), so value ``index`` is the same scene in every run.
    """
    import zlib

    return np.random.default_rng(np.random.SeedSequence(
        [_VALUE_STREAM, zlib.crc32(axis.encode()), _SPLIT_CODES[split], int(index)]))


def check_level(severity: float, split: str) -> None:
    """Validate a level.

    Raises:
        InvalidPerturbationError: If severity is not a finite number in [0, 1]
            or split is not one of ``all``, ``train``, ``test``.
    """
    if not isinstance(severity, (int, float)) or not (0.0 <= float(severity) <= 1.0):
        raise InvalidPerturbationError(
            MUST_BE_IN_RANGE.format(field="severity", low=0, high=1, value=severity)
        )
    if split not in SPLITS:
        raise InvalidPerturbationError(BAD_SPLIT.format(choices=SPLITS, value=split))


@dataclasses.dataclass(frozen=True, slots=True)
class FilterContext:
    """What a :class:`StepFilter` may need to know about the env.

    Attributes:
        action_low: ``(action_dim,) float64`` lower action bounds, or None (unbounded).
        action_high: ``(action_dim,) float64`` upper action bounds, or None.
        action_shape: Shape of one action.
        state_spread: Returns the ``(obs_dim,) float64`` per-dimension standard deviation of
            the state observation over nominal episodes (measured once per env on first
            call, see :meth:`~robogen.perturbations.wrapper.PerturbedEnv.state_spread`), or
            None if the observation has no state vector.
    """

    action_low: np.ndarray | None
    action_high: np.ndarray | None
    action_shape: tuple[int, ...]
    state_spread: Callable[[], np.ndarray | None]


class StepFilter:
    """One episode's per-step effect of a perturbation (made at reset, dropped at the next).

    The wrapper calls :meth:`action` on the action the policy chose before the env steps
    and :meth:`observation` on every observation (the reset's included) before the policy
    sees it. The defaults pass values through unchanged.

    Attributes:
        applied: JSON-compatible dict recorded as the perturbation's ``applied`` (what the
            filter acts on in this env); empty records nothing.
    """

    applied: dict[str, Any] = {}  # read-only default: subclasses assign their own

    def action(self, action: np.ndarray) -> np.ndarray:
        """The action the env executes instead of ``action`` (same shape and dtype)."""
        return action

    def observation(self, obs: Any) -> Any:
        """The observation the policy gets instead of ``obs`` (same structure)."""
        return obs


class Perturbation(ABC):  # noqa: B024 - every stage has a no-op default
    """Concrete values of one axis for one episode. Subclasses are frozen dataclasses.

    Class attributes:
        axis: Name of the axis that samples it.
        MODEL_FIELDS: Dotted ``MjModel`` attribute paths ``apply_model`` may write
            (``"geom_rgba"``, ``"opt.gravity"``); restored from nominal before every reset.
        NEEDS_SET_CONST: True if ``apply_model`` edits inertial quantities, so
            derived constants must be recomputed (``mujoco.mj_setConst``).
        MODEL_ORDER: Where ``apply_model`` runs among a condition's axes: lower first, ties
            in the condition's order (``background`` paints over what ``texture`` drew, so
            it runs after it in whatever order the axes are named).
        EDITS_PROMPT: True if :meth:`edit_prompt` rewrites the instruction of a prompted
            policy (the ``language`` axis); such a perturbation is recorded as ``changed``.
    """

    axis: ClassVar[str] = ""
    EDITS_PROMPT: ClassVar[bool] = False
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = ()
    NEEDS_SET_CONST: ClassVar[bool] = False
    MODEL_ORDER: ClassVar[int] = 0

    @property
    def has_spec_edit(self) -> bool:
        """True if :meth:`edit_spec` changes the scene's structure (needs a recompile)."""
        return False

    def edit_spec(self, spec: mujoco.MjSpec, scene: MujocoScene) -> bool:
        """Edit a fresh nominal spec in place. Returns True if anything changed."""
        return False

    def apply_model(
        self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
    ) -> bool:
        """Write ``nominal ∘ value`` into ``model``. Returns True if anything changed."""
        return False

    def apply_state(self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene) -> bool:
        """Edit ``data`` after the env's reset. Returns True if anything changed."""
        return False

    def apply_state_and_record(
        self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene
    ) -> tuple[bool, dict[str, Any]]:
        """:meth:`apply_state`, plus what the scene got, as a JSON-compatible dict.

        The wrapper calls this one (after the env's reset, with the perturbed model
        installed) and records a non-empty dict as ``applied`` next to the sampled
        ``values``: what was asked and what took effect can differ (an offset
        clipped to a joint range, a distractor that found no free spot). Axes whose
        values always apply as sampled keep the default (nothing recorded).

        Returns:
            ``(changed, applied)``.
        """
        return self.apply_state(model, data, scene), {}

    def edit_prompt(self, prompt: str) -> str:
        """The instruction a prompted policy gets this episode instead of ``prompt``."""
        return prompt

    def step_filter(self, context: FilterContext) -> StepFilter | None:
        """This episode's per-step filter (a fresh one at every reset), or None if the
        perturbation does not act per step (the default) or has nothing to act on here.

        A perturbation whose filter is not None is recorded as ``changed``.
        """
        return None

    def textures_touched(self, model: mujoco.MjModel) -> tuple[int, ...]:
        """Texture ids whose ``tex_data`` ``apply_model`` writes (re-uploaded by the wrapper)."""
        return ()

    def to_record(self) -> dict[str, Any]:
        """JSON-compatible record ``{"axis", "type", "values"}`` of the sampled values."""
        values = json.loads(json.dumps(dataclasses.asdict(self), default=float))  # type: ignore[call-overload]
        return {"axis": self.axis, "type": type(self).__name__, "values": values}


class Axis(ABC):
    """One factor of variation.

    Class attributes:
        name: Registry key (``lighting``, ``texture``, ...).
        kind: One of :data:`AXIS_KINDS`.
        description: One line shown by ``robogen list``.
        required_roles: :class:`~robogen.envs.base.SceneRoles` fields the axis acts on, with
            the words that name them; the scene must set at least one (see
            :meth:`missing_roles`). Empty: the axis acts on every scene.
        distinct_values: What one distinct value of the axis is (shown by ``robogen scale
            --vary values``), or ``""`` if the axis has none: its effect is a per-step
            process or an instruction, not a scene one could collect demonstrations in.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "visual"
    description: ClassVar[str] = ""
    required_roles: ClassVar[Mapping[str, str]] = {}
    distinct_values: ClassVar[str] = (
        "one draw of the axis, from the value stream of its index (value_rng)")

    def value_count(self, split: str) -> int | None:
        """Number of distinct values in ``split``: None if procedurally unbounded, 0 if the
        axis has none (``distinct_values == ""``)."""
        return None if self.distinct_values else 0

    def value_id(self, index: int, split: str) -> str:
        """Stable id of distinct value ``index`` of ``split`` (``lighting-train-000003``)."""
        return f"{self.name}-{split}-{int(index):06d}"

    def sample_value(self, index: int, severity: float, split: str, scene: MujocoScene
                     ) -> Perturbation:
        """Distinct value ``index`` of ``split``: the same perturbation in every episode.

        By default the axis's own :meth:`sample` on the value's stream
        (:func:`value_rng`), so values ``0..k-1`` are ``k`` independent draws of the split;
        an axis with a finite or procedural value set overrides it (``embodiment``:
        procedural bodies).

        Raises:
            InvalidPerturbationError: If the axis has no distinct values or ``index`` is
                outside the split's value set.
        """
        self.check_value(index, split)
        return self.sample(value_rng(self.name, split, index), severity, split, scene)

    def check_value(self, index: int, split: str) -> None:
        """Raise :class:`InvalidPerturbationError` unless ``index`` names a value of ``split``."""
        count = self.value_count(split)
        if count == 0:
            choices = ", ".join(n for n in AXES.names() if AXES.get(n).distinct_values)
            raise InvalidPerturbationError(NO_DISTINCT_VALUES.format(
                axis=self.name, why="its effect is not a scene", choices=choices))
        if (isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0
                or (count is not None and index >= count)):
            raise InvalidPerturbationError(VALUE_OUT_OF_RANGE.format(
                value=index, axis=self.name, split=split, count=count or 0) if count else
                f"value of axis {self.name!r} must be an index >= 0, got {index!r}")

    @abstractmethod
    def sample(
        self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
    ) -> Perturbation:
        """Draw concrete values at ``severity`` from the ``split`` value set.

        Args:
            rng: This axis's own stream for this episode.
            severity: Shift size in [0, 1]; callers skip the axis at 0.
            split: ``all``, ``train`` or ``test``.
            scene: The scene, for role names and nominal values.

        Raises:
            InvalidPerturbationError: On a severity outside [0, 1] or an unknown split.
        """

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The value classes a perturbation of this axis falls in, from its recorded
        ``values`` (``Perturbation.to_record()["values"]``, also stored in every episode's
        ``perturbations_json``): what a Factor-World split holds out. Draws from ``train``
        and from ``test`` give disjoint keys, and the two together give the keys of
        ``all`` (the parametrized axis tests check this for every registered axis).

        Raises:
            NotImplementedError: For an axis that does not declare its split classes
                (an axis with ``train``/``test`` value sets should).
        """
        raise NotImplementedError(f"axis {self.name!r} does not declare split_keys")

    def missing_roles(self, scene: MujocoScene) -> str | None:
        """Why this axis cannot act on ``scene``, or None.

        By default: ``"the scene names no <words>"`` when ``scene.roles`` sets none of the
        :attr:`required_roles` fields (``"the scene names no robot bodies or actuators"``).
        """
        if not self.required_roles or any(getattr(scene.roles, f)
                                          for f in self.required_roles):
            return None
        *first, last = self.required_roles.values()
        return f"the scene names no {', '.join(first) + ' or ' if first else ''}{last}"


AXES: Registry[type[Axis]] = Registry("perturbation axis")


def register_axis(name: str):  # noqa: ANN201 - decorator
    """Class decorator registering an :class:`Axis` subclass under ``name``."""

    def decorate(cls: type[Axis]) -> type[Axis]:
        cls.name = name
        return AXES.register(name)(cls)

    return decorate


def make_axis(name: str) -> Axis:
    """Instantiate the registered axis ``name``.

    Raises:
        UnknownNameError: If no axis is registered under ``name``.
    """
    return AXES.get(name)()
