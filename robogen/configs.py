"""Validated user configuration of an evaluation (CLI flags and/or a TOML spec).

``EvalConfig`` is a pydantic model: a TOML file given with ``--spec`` and the
command-line flags are merged (flags win) and validated before any work
starts; every problem is reported with the field, the bad value and what was
expected.

Example ``eval.toml``::

    env = "robogen/PickPlace-v0"
    policy = "expert:pick_place"
    axes = ["lighting", "texture", "physics"]
    severities = [0.5, 1.0]
    episodes = 50
    seed = 0
    backend = "ray"

``episodes = "auto"`` (``--episodes auto``) makes the run sequential: each condition stops
when its paired gap's anytime-valid interval reaches ``target_halfwidth`` (default 0.05),
is decided against ``gap_threshold``, or at ``max_episodes`` (default 1000); see
:mod:`robogen.rollout.sequential`.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.options import Opt, comma_list, comma_numbers, json_object, option_fields
from robogen.types import SPLITS, ObsMode, SequentialRule

AUTO = "auto"
"""``episodes = "auto"``: sequential evaluation (``robogen eval --episodes auto``)."""
DEFAULT_TARGET_HALFWIDTH = 0.05
"""Default target half-width of a sequential run's gap intervals [success-rate fraction]."""
DEFAULT_MAX_EPISODES = 1000
"""Default cap on episodes per condition of a sequential run."""
SEQUENTIAL_FLAGS_NEED_AUTO = (
    "{fields} appl{y} only to a sequential run (episodes = 'auto', --episodes auto), got "
    "episodes={episodes!r}; drop {them} or use --episodes auto"
)
MAX_BELOW_BATCH = (
    "max_episodes ({max_episodes}, --max-episodes) is below the batch size ({batch_size}, "
    "--batch-size): a sequential run takes whole batches; raise --max-episodes to at least "
    "{batch_size} or lower --batch-size"
)
AUTO_WITH_SWEEP = (
    "episodes = 'auto' cannot be combined with severities = 'sweep' (the sweep picks "
    "severities from fixed-n episodes); give a list of severities or a number of episodes"
)


DEFAULT_CPU_WORLDS = 64
"""Most worlds the batched backend holds on warp's CPU device by default (``--worlds``)."""
DEFAULT_GPU_WORLDS = 4096
"""Most worlds the batched backend holds on a GPU by default (``--worlds``)."""
BAD_WORLDS = (
    "--worlds must be an integer >= 1 (the batched backend's parallel worlds), got {value!r}; "
    "give e.g. --worlds 64, or run with --backend ray"
)
BATCHED_REFUSES = (
    "{what} on the batched backend: not yet; use --backend ray (or serial)"
)
"""Refusal of a setting the batched backend does not run (tests reuse it)."""
BATCHED_ONLY = (
    "{flags} appl{y} only to --backend batched, got --backend {backend}; drop {them} or add "
    "--backend batched"
)
BAD_SIM_DEVICE = (
    "--sim-device must be a warp device such as cpu, cuda or cuda:0, got {value!r}"
)

ROBOGEN_ENV_OPTIONS: dict[str, str] = {
    "obs_mode": "--obs-mode", "max_steps": "--max-steps", "render": "--camera / the image size",
    "success_threshold": "--success-threshold", "disable_env_checker": "(robogen sets it)",
}
"""Arguments of :func:`robogen.envs.make` that robogen passes itself: refused in
``env_kwargs`` (the option that sets each)."""


def _env_families() -> str:
    from robogen.envs import ENV_FAMILIES

    return ", ".join(f"{p}/" for p in ENV_FAMILIES.names())


def _policy_forms() -> str:
    from robogen.policies import policy_uri_help

    return policy_uri_help()


def _axis_names() -> str:
    from robogen.perturbations import AXES

    return ", ".join(AXES.names())


def _severities_text(text: str, flag: str) -> list[float] | str:
    """``--severities``: comma-separated numbers, or ``sweep``."""
    return "sweep" if text.strip() == "sweep" else comma_numbers(text, flag)


def _pairs_text(text: str, flag: str) -> str | list[str]:
    """``--pairs``: ``all`` or ``a+b,c+d``."""
    return "all" if text.strip() == "all" else comma_list(text, flag)


def _episodes_text(text: str, flag: str) -> int | str:
    """``--episodes``: a positive integer or ``auto``."""
    v = text.strip()
    if v == AUTO:
        return v
    try:
        return int(v)
    except ValueError:
        raise InvalidSpecError(
            f"{flag} must be a positive integer or 'auto', got {text!r}") from None


_AUTO = "With --episodes auto: "


def _gpu_share_text(text: str, flag: str) -> float | str:
    """``--num-gpus-per-worker``: a number >= 0, or ``auto`` (checked by the field)."""
    v = text.strip()
    if v.lower() == "auto":
        return "auto"
    try:
        return float(v)
    except ValueError:
        raise InvalidSpecError(f"{flag} must be a number >= 0 or 'auto', got {text!r}") from None


class EvalConfig(BaseModel):
    """An evaluation request.

    Each field's :class:`~robogen.options.Opt` documents it and declares its
    ``robogen eval`` option (``batch_size``: ``--batch-size``), so the spec file and the
    flags are one table; ``width`` and ``height`` are set in a spec file only.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: Annotated[str, Opt(
        "Env id PREFIX/NAME; families: {names} (robogen list shows every id).",
        names=_env_families)]
    policy: Annotated[str, Opt(
        "Policy URI SCHEME:REST, one of: {names}; repeat it to evaluate several policies "
        "under one manifest and compare them (one run dir each under --out, compare.* in "
        "--out).", names=_policy_forms, repeat=True)]
    vecnormalize: Annotated[str | None, Opt("SB3 VecNormalize statistics (.pkl).")] = None
    axes: Annotated[list[str] | None, Opt(
        "Comma-separated axes: {names} (default: all).", parse=comma_list,
        names=_axis_names)] = None
    severities: Annotated[list[float] | Literal["sweep"], Opt(
        "Comma-separated severities in (0, 1], or 'sweep' (coarse grid, then bisection to "
        "each axis's breaking point).", parse=_severities_text)] = [0.5, 1.0]
    breaking_level: Annotated[float, Opt(
        "With --severities sweep: also locate where success falls to this fraction of "
        "nominal (half of nominal is always reported).")] = Field(0.8, gt=0.0, lt=1.0)
    splits: Annotated[list[str], Opt(
        "Extra conditions per axis at severity 1 drawn from the axis's train or held-out "
        "test value set: train,test.", parse=comma_list)] = []
    combined: Annotated[bool, Opt(
        "All axes together, at each severity.", decls=("--combined/--no-combined",))] = True
    pairs: Annotated[str | list[str], Opt(
        "Pairs of axes run together (gap and interaction): all | "
        "lighting+texture,camera+distractors,...", parse=_pairs_text)] = []
    episodes: Annotated[int | Literal["auto"], Opt(
        "Episodes per condition, or 'auto': run each condition in batches and stop it when "
        "its paired gap's anytime-valid interval (Waudby-Smith & Ramdas 2024 betting "
        "confidence sequence) is within --target-halfwidth, decided against "
        "--gap-threshold, or at --max-episodes.", parse=_episodes_text)] = 50
    target_halfwidth: Annotated[float | None, Opt(
        f"{_AUTO}stop a condition once its gap interval's half-width is at most this, in "
        f"(0, 1) (default {DEFAULT_TARGET_HALFWIDTH}).")] = None
    max_episodes: Annotated[int | None, Opt(
        f"{_AUTO}cap on episodes per condition, >= --batch-size (default "
        f"{DEFAULT_MAX_EPISODES}).")] = Field(None, ge=1, le=100_000)
    gap_threshold: Annotated[float | None, Opt(
        f"{_AUTO}also stop a condition as soon as its gap interval lies wholly above or "
        "below this gap, in (-1, 1) (e.g. 0.1: is this axis costing more than 10 "
        "points?).")] = None
    seed: Annotated[int, Opt("Run seed; every episode seed derives from it.")] = Field(0, ge=0)
    max_steps: Annotated[int | None, Opt(
        "Step limit per episode (default: the env's).")] = Field(None, ge=1)
    batch_size: Annotated[int, Opt(
        "Envs per worker stepped together (one policy batch).")] = Field(8, ge=1, le=1024)
    obs_mode: Annotated[ObsMode, Opt("state | pixels | state+pixels")] = "state"
    width: Annotated[int, Opt(
        "Pixel observation width [px].", spec_only=True)] = Field(84, ge=8, le=2048)
    height: Annotated[int, Opt(
        "Pixel observation height [px].", spec_only=True)] = Field(84, ge=8, le=2048)
    camera: Annotated[str | None, Opt(
        "Observation camera (default: the env's).")] = None
    backend: Annotated[Literal["ray", "serial", "batched"], Opt(
        "ray | serial | batched (N worlds of one scene stepped together on one device with "
        "MuJoCo Warp; state and pixel policies; needs robogen[batched]).", resume=True)] = "ray"
    worlds: Annotated[int | None, Opt(
        "Batched backend: worlds stepped together, each one episode (default: the episodes "
        f"to run, at most {DEFAULT_CPU_WORLDS} on the CPU and {DEFAULT_GPU_WORLDS} on a "
        "GPU).", resume=True)] = None
    sim_device: Annotated[str | None, Opt(
        "Batched backend: warp device of the worlds, cpu or cuda[:N] (default: cuda:0 when "
        "a GPU is visible, else cpu).", resume=True)] = None
    workers: Annotated[int | None, Opt(
        "Ray workers (default: the free CPUs of the cluster).", resume=True)] = Field(
        None, ge=1)
    address: Annotated[str | None, Opt("Existing Ray cluster address.", resume=True)] = None
    num_gpus_per_worker: Annotated[float | Literal["auto"], Opt(
        "GPUs per Ray worker (a fraction shares a GPU); 'auto': the cluster's GPUs split "
        "evenly over the workers, none without GPUs.", parse=_gpu_share_text)] = 0.0
    render_device: Annotated[Literal["auto", "gpu", "cpu"], Opt(
        "Where workers render: auto (on their GPU when they hold one) | gpu (rendering on a "
        "CPU rasterizer is a set-up error) | cpu (Mesa, on purpose).")] = "auto"
    unit_timeout: Annotated[float | None, Opt(
        "Wall-clock budget per work unit [s] (default: 60 s + 0.2 s per episode step); a "
        "unit past it is retried once, then recorded as infra_timeout.", resume=True)] = Field(
        None, gt=0)
    out: Annotated[Path | None, Opt(
        "Run directory (new or empty; default ./runs/<env>-<policy>-<time>).")] = None
    videos: Annotated[int, Opt(
        "Failed perturbed episodes filmed per axis (0: none).", resume=True)] = Field(2, ge=0)
    success_threshold: Annotated[float | None, Opt(
        "Return threshold for success (default: the env's success signal).")] = None
    env_kwargs: Annotated[dict[str, Any], Opt(
        "The env's constructor arguments as a JSON object, e.g. '{\"task_index\": 3}' "
        "(Meta-World's MT1 task) or '{\"action_repeat\": 2}' (dm_control); recorded in the "
        "manifest.", parse=json_object)] = {}
    safety: Annotated[bool, Opt(
        "Record and report safety metrics per condition (peak contact force, joint limits, "
        "drops, distractor contacts, action magnitude and jerk), with paired differences.",
        decls=("--safety",))] = False

    @field_validator("num_gpus_per_worker", mode="before")
    @classmethod
    def _gpu_share(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() == "auto":
            return "auto"
        try:
            share = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"must be a number >= 0 or 'auto', got {v!r}") from None
        if not share >= 0:
            raise ValueError(f"must be a number >= 0 or 'auto', got {v!r}")
        return share

    @field_validator("worlds", mode="before")
    @classmethod
    def _worlds(cls, v: Any) -> Any:
        ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        if not ok:
            raise ValueError(BAD_WORLDS.format(value=v))
        return v

    @field_validator("sim_device")
    @classmethod
    def _sim_device(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", v):
            raise ValueError(BAD_SIM_DEVICE.format(value=v))
        return v

    @model_validator(mode="before")
    @classmethod
    def _batched_videos(cls, data: Any) -> Any:
        """``videos`` defaults to 0 on the batched backend: each film replays episodes on
        the serial path after the run (give ``--videos N`` to ask for them)."""
        if isinstance(data, dict) and data.get("backend") == "batched" and "videos" not in data:
            return {**data, "videos": 0}
        return data

    @model_validator(mode="after")
    def _batched(self) -> EvalConfig:
        if self.backend != "batched":
            given = [f"--{f.replace('_', '-')}" for f in ("worlds", "sim_device")
                     if getattr(self, f) is not None]
            if given:
                raise ValueError(BATCHED_ONLY.format(
                    flags=" and ".join(given), y="ies" if len(given) == 1 else "y",
                    backend=self.backend, them="it" if len(given) == 1 else "them"))
            return self
        if self.policy.split(":", 1)[0] == "remote":
            raise ValueError(BATCHED_REFUSES.format(
                what=f"remote: policies ({self.policy!r}: a policy server answers one "
                "request at a time)"))
        return self

    @field_validator("success_threshold")
    @classmethod
    def _threshold(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"success threshold must be a finite return, got {v!r}")
        return v

    @field_validator("episodes", mode="before")
    @classmethod
    def _episodes(cls, v: Any) -> Any:
        ok = v == AUTO or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100_000)
        if not ok:
            raise ValueError(f"episodes must be an integer in [1, 100000] or 'auto', got {v!r}")
        return v

    @field_validator("env_kwargs")
    @classmethod
    def _env_kwargs(cls, v: dict[str, Any]) -> dict[str, Any]:
        own = [k for k in v if k in ROBOGEN_ENV_OPTIONS]
        if own:
            flag = ROBOGEN_ENV_OPTIONS[own[0]]
            raise ValueError(f"env_kwargs key {own[0]!r} is robogen's own option, not the "
                             f"env's: give it as {flag}")
        return v

    @field_validator("target_halfwidth")
    @classmethod
    def _target(cls, v: float | None) -> float | None:
        if v is not None and not (math.isfinite(v) and 0.0 < v < 1.0):
            raise ValueError(f"target half-width (--target-halfwidth) must be in (0, 1), a "
                             f"fraction of success rate such as 0.05, got {v!r}")
        return v

    @field_validator("gap_threshold")
    @classmethod
    def _gap_threshold(cls, v: float | None) -> float | None:
        if v is not None and not (math.isfinite(v) and -1.0 < v < 1.0):
            raise ValueError(f"gap threshold (--gap-threshold) must be in (-1, 1), a gap in "
                             f"success rate such as 0.1, got {v!r}")
        return v

    @field_validator("severities")
    @classmethod
    def _severities(cls, v: list[float] | str) -> list[float] | str:
        if isinstance(v, str):
            if v != "sweep":
                raise ValueError(f"severities must be numbers in (0, 1] or 'sweep', got {v!r}")
            return v
        if not v:
            raise ValueError("give at least one severity, e.g. [0.5, 1.0]")
        for s in v:
            if not math.isfinite(s) or not 0.0 < s <= 1.0:
                raise ValueError(f"severity must be in (0, 1], got {s!r}")
        return sorted(set(v))

    @field_validator("splits")
    @classmethod
    def _splits(cls, v: list[str]) -> list[str]:
        for s in v:
            if s not in SPLITS[1:]:
                raise ValueError(f"split must be 'train' or 'test', got {s!r}")
        return list(dict.fromkeys(v))

    @field_validator("axes")
    @classmethod
    def _axes(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        from robogen.perturbations import AXES

        if not v:
            raise ValueError("give at least one axis")
        for a in v:
            if a not in AXES:
                raise ValueError(str(UnknownNameError("perturbation axis", a, AXES.names())))
        if len(set(v)) != len(v):
            raise ValueError(f"axes are repeated: {v!r}")
        return v

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        from robogen.policies import POLICY_SCHEMES, split_uri

        scheme, _ = split_uri(v)
        if scheme not in POLICY_SCHEMES:
            raise ValueError(str(UnknownNameError("policy scheme", scheme, POLICY_SCHEMES.names())))
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: str) -> str:
        from robogen.envs import list_env_ids

        ids = list_env_ids()
        if v not in ids:
            raise ValueError(str(UnknownNameError("env id", v, ids)))
        return v

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, v: str | list[str], info: ValidationInfo) -> str | list[str]:
        if "axes" not in info.data:  # the axes are invalid; that error is reported
            return v
        from robogen.perturbations import AXES

        parse_pairs(v, info.data["axes"] or list(AXES.names()))
        return v

    @model_validator(mode="after")
    def _sequential(self) -> EvalConfig:
        given = [f for f in ("target_halfwidth", "max_episodes", "gap_threshold")
                 if getattr(self, f) is not None]
        if self.episodes != AUTO:
            if given:
                raise ValueError(SEQUENTIAL_FLAGS_NEED_AUTO.format(
                    fields=", ".join(f"{f} (--{f.replace('_', '-')})" for f in given),
                    y="ies" if len(given) == 1 else "y", episodes=self.episodes,
                    them="it" if len(given) == 1 else "them"))
            return self
        if self.is_sweep:
            raise ValueError(AUTO_WITH_SWEEP)
        cap = self.max_episodes or DEFAULT_MAX_EPISODES
        if cap < self.batch_size:
            raise ValueError(MAX_BELOW_BATCH.format(max_episodes=cap,
                                                    batch_size=self.batch_size))
        return self

    @property
    def is_sequential(self) -> bool:
        """Whether episodes are chosen by the stop rule (``episodes = "auto"``)."""
        return self.episodes == AUTO

    @property
    def planned_episodes(self) -> int:
        """Episode indices per condition the plan holds: ``episodes``, or the cap when auto."""
        if isinstance(self.episodes, int):
            return self.episodes
        return self.max_episodes or DEFAULT_MAX_EPISODES

    def sequential_rule(self) -> SequentialRule | None:
        """The :class:`~robogen.types.SequentialRule` of an auto run (None for a fixed n)."""
        if not self.is_sequential:
            return None
        return SequentialRule(
            target_halfwidth=float(self.target_halfwidth or DEFAULT_TARGET_HALFWIDTH),
            max_episodes=self.planned_episodes,
            batch_size=min(self.batch_size, self.planned_episodes),
            gap_threshold=self.gap_threshold,
        )

    def resolved_pairs(self) -> list[tuple[str, str]]:
        """Pairs of axes to run together (see :func:`parse_pairs`)."""
        return parse_pairs(self.pairs, self.resolved_axes())

    @property
    def is_sweep(self) -> bool:
        """Whether severities are chosen adaptively (``severities = "sweep"``)."""
        return self.severities == "sweep"

    def resolved_axes(self) -> list[str]:
        """The axes to run: the given ones or every registered axis."""
        from robogen.perturbations import AXES

        return list(self.axes) if self.axes is not None else list(AXES.names())


def parse_pairs(value: str | list[str], axes: list[str]) -> list[tuple[str, str]]:
    """Pairs of axes from ``"all"`` (every pair, in axis order) or ``["a+b", ...]`` (as given).

    Raises:
        ValueError: On a pair that is not two distinct axes of ``axes``, or a repeated pair.
    """
    if isinstance(value, str):
        if value.strip() != "all":
            raise ValueError(
                f"pairs must be 'all' or a list like ['lighting+texture'], got {value!r}"
            )
        return [(a, b) for i, a in enumerate(axes) for b in axes[i + 1:]]
    out: list[tuple[str, str]] = []
    for p in value:
        names = tuple(x.strip() for x in p.split("+"))
        if len(names) != 2 or names[0] == names[1] or not all(names):
            raise ValueError(
                f"a pair names two different axes joined by '+', e.g. 'lighting+texture', got {p!r}"
            )
        missing = [a for a in names if a not in axes]
        if missing:
            raise ValueError(
                f"pair {p!r} names {', '.join(missing)}, which is not among the evaluated axes "
                f"{axes}; add it to axes or drop the pair"
            )
        if set(names) in [set(q) for q in out]:
            raise ValueError(f"pair {p!r} is given twice")
        out.append((names[0], names[1]))
    return out


def format_validation_error(e: ValidationError, source: str = "") -> str:
    """A readable multi-line message from a pydantic error (field, value, problem)."""
    lines = [f"invalid evaluation spec{f' in {source}' if source else ''}:"]
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(spec)"
        msg = err["msg"].removeprefix("Value error, ")
        inp = err.get("input")
        shown = "" if isinstance(inp, dict) or ", got " in msg else f" (got {inp!r})"
        if err["type"] == "extra_forbidden":
            spec_only = [f.name for f in option_fields(EvalConfig) if f.opt.spec_only]
            msg = ("unknown field; the fields are the long options of `robogen eval --help` "
                   f"(with _ for -) plus {' and '.join(spec_only)}")
        lines.append(f"  {loc}: {msg}{shown}")
    return "\n".join(lines)


def load_eval_config(spec: Path | None = None, **overrides: Any) -> EvalConfig:
    """Merge a TOML spec and flag overrides (None values ignored) and validate.

    Raises:
        InvalidSpecError: On an unreadable TOML file or any invalid field.
    """
    data: dict[str, Any] = {}
    source = ""
    if spec is not None:
        source = str(spec)
        try:
            data = tomllib.loads(Path(spec).read_text())
        except FileNotFoundError:
            raise InvalidSpecError(f"spec file {source!r} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise InvalidSpecError(f"spec file {source!r} is not valid TOML: {e}") from e
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return EvalConfig(**data)
    except ValidationError as e:
        raise InvalidSpecError(format_validation_error(e, source)) from None
