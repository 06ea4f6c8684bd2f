# pyright: reportAttributeAccessIssue=false
# (mujoco's compiled bindings ship no stubs for these attributes)
"""N episodes stepped in lock-step on the worlds of one :class:`BatchedWorlds`.

:class:`Lockstep` holds the worlds, the env's :class:`~robogen.batched.tasks.BatchedTask`,
the policy and one host env. A world is given an episode by :meth:`Lockstep.load`: the host
env is reset for that (condition, episode) exactly as the serial worker resets its env
(``set_levels``, then ``reset(seed=episode_seed, options={"perturbation_seed": ...})``), and
its ``MjData`` state and its perturbed model's per-world fields are copied into that world's
rows, so episode ``i`` of a condition starts from the serial backend's initial state with its
axis values. :meth:`Lockstep.step` then advances every world by one env step on the device
(observation, policy, action, ``frame_skip`` physics steps, reward/termination/success) and
returns the worlds whose episodes ended, with their summaries (the only per-step copy to the
host is the ``(N,)`` mask of ended worlds).

Causes, as the serial worker records them: ``timeout`` (step limit), ``terminated`` (the
env ended it without success), ``policy_error`` (a non-finite action, or the policy raised
on that episode's observation: a batch call that raises is retried row by row on the host,
so only the culprits fail), ``sim_unstable`` (a non-finite or huge state or
reward, or MJWarp's contact/constraint buffers overflowed: its trajectory is wrong; the
machinery failed, not the policy).

Pixel observations (``obs_mode`` ``pixels`` / ``state+pixels``) come from a
:class:`~robogen.batched.render.BatchRenderer` at the policy's camera and size, drawn every
env step: ``(N, H, W, 3) uint8`` on the device, or ``{"state": (N, obs_dim) float32,
"pixels": ...}``, the serial layout batched. A world's texture pixels (``texture`` and
``background`` draws) follow its episode: the host env's ``tex_data`` at its reset is given
to the renderer (:meth:`~robogen.batched.render.BatchRenderer.set_textures`). The first
frame of each episode is digested as the serial worker digests it
(:func:`~robogen.envs.observations.pixels_digest`: one host copy of the new episodes'
frames).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robogen.batched.fields import get_field
from robogen.batched.worlds import BatchedWorlds, load_mjwarp
from robogen.envs.observations import pixels_digest
from robogen.errors import RobogenError
from robogen.perturbations.wrapper import MAX_STATE
from robogen.rollout.plan import episode_seed, perturbation_seed
from robogen.types import WorkUnit

STATE_ROWS = ("qpos", "qvel", "act", "ctrl", "mocap_pos", "mocap_quat", "qacc_warmstart",
              "time")
"""``MjData`` fields copied from the host env into a world at its reset."""

OVERFLOWED = ("MuJoCo Warp's per-world buffers overflowed at step {step} (overflow bits "
              "{bits}: contacts or constraint rows beyond what was allocated), so the world "
              "dropped constraints; recorded as sim_unstable (a simulator fault, not the "
              "policy's)")
UNSTABLE = ("the simulation became unstable at step {step} (a non-finite or huge state or "
            "reward on the batched backend)")


@dataclass(slots=True)
class Running:
    """The host-side record of the episode a world runs.

    Attributes:
        episode_index: The episode index.
        seed: Its reset seed.
        perturbations_json: The host env's ``info["robogen"]["perturbations"]`` as JSON.
        changed_axes: Its ``info["robogen"]["changed_axes"]``.
        started: ``time.perf_counter()`` at its reset [s].
        first_frame: :func:`~robogen.envs.observations.pixels_digest` of the episode's
            first image as the policy received it (None: a state policy).
    """

    episode_index: int
    seed: int
    perturbations_json: str
    changed_axes: tuple[str, ...]
    started: float
    first_frame: str | None = None


@dataclass(frozen=True, slots=True)
class Ended:
    """An episode that ended at this step, as the serial worker would record it.

    Attributes:
        row: Its world.
        success: The env's success at its last step.
        cause: None on success, else one of the causes above.
        error: The message of a ``policy_error`` or ``sim_unstable``.
        episode_return: Sum of rewards [-].
        length_steps: Env steps taken.
        first_success_step: First step (1-based) at which success held, or None.
        wall_time_s: From its reset to now [s].
    """

    row: int
    success: bool
    cause: str | None
    error: str | None
    episode_return: float
    length_steps: int
    first_success_step: int | None
    wall_time_s: float


class Lockstep:
    """Episodes in every world of ``worlds``, stepped together.

    Args:
        worlds: The worlds (one per slot).
        task: The env's batched step (``robogen.batched.tasks.batched_task``).
        env: One host env (``PerturbedEnv``) of the manifest: it resets each episode.
        policy: The loaded policy (``act`` on numpy batches; ``act_tensor`` on device
            tensors when it is :class:`~robogen.policies.base.TensorActing`).
        run_seed: The manifest's run seed (episode seeds derive from it).
        max_steps: Step limit per episode.
        field_paths: Model fields that hold one row per world (installed by the caller);
            each world's row is copied from the host env's model at its reset.
        action_low: Lower bound of the action space ``(act_dim,)`` (None: unbounded).
        action_high: Upper bound ``(act_dim,)``.
        takes_seeds: The policy's ``reset`` takes ``seeds``.
        safety: A :class:`~robogen.batched.safety.BatchedSafety` of ``worlds`` (``--safety``)
            or None: it reads each refilled world's reset state, steps the physics (its
            substep reads) and reads every env step of the running worlds.
        obs_mode: What the policy observes (``state``, ``pixels``, ``state+pixels``).
        renderer: The :class:`~robogen.batched.render.BatchRenderer` of ``worlds`` at the
            policy's camera and size (needed unless ``obs_mode`` is ``state``).
        textures: Give each world its episode's texture pixels (the run draws ``texture``
            or ``background``).
    """

    def __init__(self, worlds: BatchedWorlds, task: Any, env: Any, policy: Any, *,
                 run_seed: int, max_steps: int, field_paths: Sequence[str] = (),
                 action_low: Any = None, action_high: Any = None,
                 takes_seeds: bool = False, safety: Any = None, obs_mode: str = "state",
                 renderer: Any = None, textures: bool = False) -> None:
        import torch

        from robogen.envs.base import find_scene
        from robogen.policies.base import TensorActing

        self._torch = torch
        self._wp, self._mjw = load_mjwarp()
        self.worlds = worlds
        self.task = task
        self.env = env
        self.scene = find_scene(env)
        self.policy = policy
        self.max_steps = int(max_steps)
        self._run_seed = int(run_seed)
        self._tensor_policy = isinstance(policy, TensorActing)
        self._takes_seeds = takes_seeds
        self.safety = safety
        n = worlds.worlds
        self.device = worlds.tensor("qpos").device
        dev = self.device
        self._state = {name: worlds.tensor(name) for name in STATE_ROWS}
        self._overflow = worlds.tensor("overflow")
        self._qacc = worlds.tensor("qacc")
        self._derived = _derived_views(worlds)
        ignore = int(self._mjw.OverflowType.ITERATIONS | self._mjw.OverflowType.LS_ITERATIONS)
        self._overflow_mask = ~ignore
        self._fields = {p: self._field_view(p) for p in field_paths}
        self._low = None if action_low is None else torch.as_tensor(
            np.asarray(action_low, np.float32), device=dev)
        self._high = None if action_high is None else torch.as_tensor(
            np.asarray(action_high, np.float32), device=dev)
        self.ret = torch.zeros(n, dtype=torch.float64, device=dev)
        self.steps = torch.zeros(n, dtype=torch.int64, device=dev)
        self.first_success = torch.full((n,), -1, dtype=torch.int64, device=dev)
        self.running = torch.zeros(n, dtype=torch.bool, device=dev)
        self.episodes: list[Running | None] = [None] * n
        if obs_mode != "state" and renderer is None:
            raise ValueError(f"obs_mode {obs_mode!r} needs a BatchRenderer")
        self.obs_mode = obs_mode
        self.renderer = renderer
        self._fresh: list[int] = []  # worlds loaded since the last step (first frames)
        model = worlds.model
        self._tex_nominal = np.array(model.tex_data)  # before any host reset edits it
        self._tex_rows = (np.tile(self._tex_nominal, (n, 1))
                          if textures and renderer is not None and model.ntexdata else None)
        self._tex_varied = False

    def _field_view(self, path: str) -> Any:
        """A torch view of a per-world model field (``(N, ...)``)."""
        if path.startswith("opt."):
            return self._wp.to_torch(getattr(self.worlds.m.opt, path[4:]))
        return self.worlds.tensor("m." + path)

    # ------------------------------------------------------------------ resets

    def load(self, rows_units: Sequence[tuple[int, WorkUnit, int]]
             ) -> list[tuple[int, str]]:
        """Start episodes in worlds: ``(row, unit, episode_index)`` each.

        Returns:
            ``(row, error)`` of each world whose host reset raised (recorded as
            ``sim_unstable`` by the caller; the world stays free).

        Raises:
            RobogenError: A bad condition (a set-up error, as on the serial backend).
        """
        torch = self._torch
        failed: list[tuple[int, str]] = []
        started: list[int] = []
        seed_list: list[int] = []
        textures_moved = False
        for row, unit, i in rows_units:
            seed = episode_seed(self._run_seed, i)
            self.env.set_levels(unit.condition.levels)
            try:
                _, info = self.env.reset(seed=seed, options={
                    "perturbation_seed": perturbation_seed(self._run_seed, i)})
            except RobogenError:
                raise
            except Exception as e:  # noqa: BLE001 - recorded with its cause
                failed.append((row, f"{type(e).__name__}: {e}"[:500]))
                continue
            m, d = self.scene.model, self.scene.data
            for name, view in self._state.items():
                value = np.asarray(getattr(d, name), dtype=np.float64)
                view[row] = torch.as_tensor(value.reshape(view.shape[1:]), dtype=view.dtype,
                                            device=view.device)
            for path, view in self._fields.items():
                value = get_field(m, path)
                view[row] = torch.as_tensor(value.reshape(view.shape[1:]), dtype=view.dtype,
                                            device=view.device)
            if self._tex_rows is not None:
                tex = np.asarray(m.tex_data)
                if not np.array_equal(self._tex_rows[row], tex):
                    self._tex_rows[row] = tex
                    textures_moved = True
            self._overflow[row] = 0
            self.task.on_reset(self.worlds, [row], [self.env])
            rg = info.get("robogen", {})
            self.episodes[row] = Running(i, seed, json.dumps(rg.get("perturbations", [])),
                                         tuple(rg.get("changed_axes", ())), time.perf_counter())
            started.append(row)
            seed_list.append(seed)
        if textures_moved:
            self._install_textures()
        if started:
            self._fresh.extend(started)
            idx = torch.as_tensor(started, device=self.device)
            self._forward(idx)
            if self.safety is not None:
                self.safety.reset_rows(self.worlds, started)
            self.ret[idx] = 0.0
            self.steps[idx] = 0
            self.first_success[idx] = -1
            self.running[idx] = True
            if self._takes_seeds:
                self.policy.reset(started, seeds=seed_list)
            else:
                self.policy.reset(started)
        return failed

    def _install_textures(self) -> None:
        """Give the renderer every world's texture pixels (the model's everywhere: None)."""
        rows = self._tex_rows
        assert rows is not None and self.renderer is not None
        varied = bool(np.any(rows != self._tex_nominal))
        if varied or self._tex_varied:
            self.renderer.set_textures(rows if varied else None)
        self._tex_varied = varied

    def _forward(self, rows: Any) -> None:
        """``mjw.forward`` for the worlds ``rows`` just loaded, leaving every other running
        world's derived quantities as its last step left them.

        MJWarp's forward runs on every world; a running world would then read kinematics
        recomputed from its integrated state at its next observation, where the serial env
        reads them as ``mj_step`` leaves them (one substep earlier), so its rows of every
        per-world ``Data`` array (but the state) are put back.
        """
        keep = self.running.clone()
        keep[rows] = False
        saved = [(view, view[keep]) for view in self._derived] if bool(keep.any()) else []
        with self._wp.ScopedDevice(self.worlds.device):
            self._mjw.forward(self.worlds.m, self.worlds.d)
        for view, rows_kept in saved:
            view[keep] = rows_kept

    # ------------------------------------------------------------------ steps

    def observe(self) -> Any:
        """Every world's observation now, in the serial layout batched, on the device:
        ``(N, obs_dim) float32`` state, ``(N, H, W, 3) uint8`` pixels, or a dict of both.

        Records the first-frame digest of each episode started since the last call.
        """
        if self.obs_mode == "state":
            return self.task.observe(self.worlds)
        assert self.renderer is not None
        frames = self.renderer.render()
        if self._fresh:
            rows = [r for r in self._fresh if self.episodes[r] is not None]
            host = frames[rows].cpu().numpy() if rows else ()
            for row, image in zip(rows, host, strict=True):
                ep = self.episodes[row]
                assert ep is not None
                ep.first_frame = pixels_digest(image)
            self._fresh = []
        if self.obs_mode == "pixels":
            return frames
        return {"state": self.task.observe(self.worlds).to(self._torch.float32),
                "pixels": frames}

    def _act(self, obs: Any) -> tuple[Any, dict[int, str]]:
        """Actions ``(N, act_dim)`` float32 on the device, clipped to the action space, and
        the error of each running world whose row makes the policy raise.

        If the batch call raises, each running row is asked alone (on the host), as the
        serial worker does, so only the culprit episodes fail (``policy_error``).
        """
        torch = self._torch
        errors: dict[int, str] = {}
        n = self.worlds.worlds
        try:
            out = self.policy.act_tensor(obs) if self._tensor_policy else None
            if out is None:  # one host copy of the whole batch and one back
                acts = np.asarray(self.policy.act(_host(obs), deterministic=True),
                                  dtype=np.float32)
                out = torch.as_tensor(acts, device=self.device)
            out = out.to(torch.float32).reshape(n, -1)
        except Exception:  # noqa: BLE001 - find which episodes make the policy fail
            host = _host(obs)
            rows = np.zeros((n, int(self.task.act_dim)), np.float32)
            for row in self.running.nonzero().flatten().tolist():
                try:
                    rows[row] = np.asarray(self.policy.act(_rows(host, row),
                                                           deterministic=True),
                                           dtype=np.float32).reshape(-1)
                except Exception as e:  # noqa: BLE001 - recorded as its policy_error
                    errors[row] = f"{type(e).__name__}: {e}"[:500]
            out = torch.as_tensor(rows, device=self.device)
        if self._low is not None and self._high is not None:
            out = torch.minimum(torch.maximum(out, self._low), self._high)
        return out, errors

    def step(self) -> list[Ended]:
        """One env step of every world; the running episodes that ended at it.

        Worlds without a running episode step too (their result is dropped): the batch
        keeps one shape.
        """
        torch = self._torch
        w = self.worlds
        obs = self.observe()
        actions, errors = self._act(obs)
        failed = [self._end_row(row, "policy_error", error) for row, error in errors.items()]
        bad = self.running & ~torch.isfinite(actions).all(dim=1)
        actions = torch.where(torch.isfinite(actions), actions, torch.zeros_like(actions))
        self.task.apply_action(w, actions)
        live = self.running & ~bad
        if self.safety is None:
            w.advance(self.task.frame_skip)
        else:
            self.safety.advance(w, self.task.frame_skip, live)
            self.safety.after_step(w, actions, live)
        last = self.steps + 1 >= self.max_steps
        out = self.task.outcome(w, actions, last=last,
                                episode_return=self.ret.to(torch.float32))
        reward = out.reward.to(torch.float64)
        finite = (_finite_rows(torch, self._state["qpos"])
                  & _finite_rows(torch, self._state["qvel"])
                  & _finite_rows(torch, self._qacc) & torch.isfinite(reward))
        overflow = (self._overflow.to(torch.int64) & self._overflow_mask) != 0
        unstable = live & ~finite & ~overflow
        overflowed = live & overflow
        ok = live & finite & ~overflow
        self.steps += ok.to(torch.int64)
        self.ret += torch.where(ok, reward, torch.zeros_like(reward))
        hit = ok & out.success.to(torch.bool) & (self.first_success < 0)
        self.first_success = torch.where(hit, self.steps, self.first_success)
        ended = ok & (out.terminated.to(torch.bool) | last)
        done = bad | unstable | overflowed | ended
        if not bool(done.any()):
            return failed
        rows = done.nonzero().flatten().tolist()
        flags = torch.stack([bad, unstable, overflowed, out.success.to(torch.bool),
                             out.terminated.to(torch.bool)], dim=1)[done].cpu().numpy()
        rets = self.ret[done].cpu().numpy()
        lens = self.steps[done].cpu().numpy()
        firsts = self.first_success[done].cpu().numpy()
        bits = self._overflow[done].cpu().numpy()
        self.running[done] = False
        now = time.perf_counter()
        result = failed
        for j, row in enumerate(rows):
            b, u, o, s, t = (bool(x) for x in flags[j])
            step_no = int(lens[j]) + 1
            if b:
                cause, err, succ = "policy_error", "non-finite action", False
            elif o:
                cause, succ = "sim_unstable", False
                err = OVERFLOWED.format(step=step_no, bits=int(bits[j]) & self._overflow_mask)
            elif u:
                cause, err, succ = "sim_unstable", UNSTABLE.format(step=step_no), False
            else:
                succ = s
                cause, err = (None, None) if s else ("terminated" if t else "timeout", None)
            result.append(self._ended(row, succ, cause, err, float(rets[j]), int(lens[j]),
                                      int(firsts[j]), now))
        return result

    def _end_row(self, row: int, cause: str, error: str) -> Ended:
        """End world ``row``'s episode now with ``cause`` (its policy call raised)."""
        self.running[row] = False
        first = int(self.first_success[row])
        return self._ended(row, False, cause, error, float(self.ret[row]),
                           int(self.steps[row]), first, time.perf_counter())

    def _ended(self, row: int, success: bool, cause: str | None, error: str | None,
               ret: float, length: int, first: int, now: float) -> Ended:
        ep = self.episodes[row]
        started = ep.started if ep is not None else now
        return Ended(row, success, cause, error, ret, length, first if first > 0 else None,
                     now - started)


def _host(obs: Any) -> Any:
    """A batch of observations copied to the host (a dict part by part): state float32,
    pixels uint8, as the serial worker hands them to ``act``."""
    if isinstance(obs, dict):
        return {k: _host(v) for k, v in obs.items()}
    array = obs.detach().cpu().numpy()
    return np.array(array, dtype=np.uint8 if array.dtype == np.uint8 else np.float32)


def _rows(host: Any, row: int) -> Any:
    """Row ``row`` of a host batch as a batch of one."""
    if isinstance(host, dict):
        return {k: v[row:row + 1] for k, v in host.items()}
    return host[row:row + 1]


def _finite_rows(torch: Any, x: Any) -> Any:
    """``(N,)`` bool: every entry of the row is finite and within MuJoCo's ``mjMAXVAL``."""
    if x.shape[1:].numel() == 0:
        return torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    flat = x.reshape(x.shape[0], -1)
    return (torch.isfinite(flat) & (flat.abs() <= MAX_STATE)).all(dim=1)


def _derived_views(worlds: BatchedWorlds) -> list[Any]:
    """Torch views of every ``Data`` array with one row per world, except the state rows
    a reset writes (:data:`STATE_ROWS`) and the overflow flags."""
    import dataclasses

    skip = {*STATE_ROWS, "overflow"}
    out = []
    for f in dataclasses.fields(worlds.d):
        arr = getattr(worlds.d, f.name, None)
        shape = getattr(arr, "shape", None)
        if (f.name in skip or not isinstance(shape, tuple) or not shape
                or shape[0] != worlds.worlds or not hasattr(arr, "dtype")):
            continue
        out.append(worlds.tensor(f.name))
    return out
