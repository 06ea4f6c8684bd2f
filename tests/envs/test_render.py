"""The render thread: deferred frames equal synchronous ones and errors reach the episode."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robogen.configs import load_eval_config
from robogen.envs import egl_display, find_scene, make
from robogen.envs import render as rd
from robogen.rollout.plan import episode_seed, perturbation_seed
from robogen.rollout.runner import plan_units, prepare
from robogen.rollout.worker import EpisodeWorker, make_env, policy_context
from robogen.types import RenderSettings
from tests.fixtures import pixel_policies

POLICY = "python:tests/fixtures/pixel_policies.py:image_driven"


def _scene(env_id: str = "robogen/PickPlace-v0"):
    env = make(env_id, obs_mode="pixels")
    env.reset(seed=3)
    return env, find_scene(env)


@pytest.mark.parametrize("env_id", ["robogen/PickPlace-v0", "gymnasium/Reacher-v5"])
def test_pending_frame_is_the_state_at_the_call(env_id: str) -> None:
    env, scene = _scene(env_id)
    before = scene.render_frame(width=84, height=84)
    scene.defer_frames = True
    pending = scene.observe()
    pending = pending if isinstance(pending, rd.PendingFrame) else pending["pixels"]
    assert isinstance(pending, rd.PendingFrame)
    # move everything right after the call: the frame must still show the old state
    scene.data.qpos[:] += 0.3
    mujoco.mj_forward(scene.model, scene.data)
    assert np.array_equal(pending.result(), before)
    after = scene.render_frame(width=84, height=84)
    assert not np.array_equal(after, before)
    assert np.array_equal(rd.resolve_frames({"pixels": pending, "state": 1})["pixels"], before)
    env.close()


def _manifest(tmp_path, env_id="robogen/Reach-v0", policy=POLICY):
    cfg = load_eval_config(
        None, env=env_id, policy=policy, obs_mode="pixels", episodes=6, batch_size=3,
        axes=["texture", "object_pose"], severities=[1.0], combined=False, max_steps=15,
        backend="serial", videos=0, out=tmp_path / "r",
    )
    return prepare(cfg)


@pytest.mark.parametrize(("factory", "lanes"), [("image_driven", 1), ("image_driven_slots", 1),
                                              ("image_driven", 2), ("image_driven_slots", 2)])
def test_worker_with_deferred_frames_equals_a_synchronous_loop(tmp_path, factory, lanes) -> None:
    """Whole batches (policy without ``slots``) and interleaved half-batches (with), frames
    drawn on one render lane or two (the serial backend's two: env k on lane k % 2)."""
    m = _manifest(tmp_path, policy=f"python:tests/fixtures/pixel_policies.py:{factory}")
    units = plan_units(m)
    worker = EpisodeWorker(m, render_lanes=lanes)
    assert all(s.defer_frames for s in worker._scenes)
    assert worker._takes_slots == (factory == "image_driven_slots")
    results = [r for u in units for r in worker.run_unit(u)]
    assert [s._frames.renderer.lane for s in worker._scenes] == [k % lanes for k in range(3)]
    worker.close()
    deferred_seen = worker.policy.seen

    # the same episodes by hand, one env at a time, frames drawn synchronously
    env = make_env(m)
    assert not find_scene(env).defer_frames
    policy = getattr(pixel_policies, factory)(policy_context(m.env_id, "pixels", None, env))
    by_hand = {}
    for u in units:
        env.set_levels(u.condition.levels)
        for i in u.episode_indices:
            obs, _ = env.reset(seed=episode_seed(m.seed, i),
                               options={"perturbation_seed": perturbation_seed(m.seed, i)})
            ret, done = 0.0, False
            while not done:
                obs, r, term, trunc, _ = env.step(policy.act(obs[None])[0])
                ret += float(r)
                done = term or trunc
            by_hand[(u.condition.name, i)] = ret
    env.close()
    assert {(r.condition, r.episode_index): r.episode_return for r in results} == by_hand
    # the worker acts on batches in lockstep; the frames are the same, in another order
    assert sorted(deferred_seen) == sorted(policy.seen)
    assert len(set(deferred_seen)) > len(units)  # frames really vary


def test_a_frame_that_fails_fails_its_episode_with_the_cause(tmp_path, monkeypatch) -> None:
    m = _manifest(tmp_path)
    worker = EpisodeWorker(m)
    unit = plan_units(m)[0]
    calls = {"n": 0}
    draw = rd._draw

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 8:  # a frame during the second step of the batch
            raise RuntimeError("GL_OUT_OF_MEMORY in glReadPixels")
        return draw(*args)

    monkeypatch.setattr(rd, "_draw", flaky)
    results = worker.run_unit(unit)
    worker.close()
    failed = [r for r in results if r.cause == "sim_unstable"]
    assert len(failed) == 1 and "GL_OUT_OF_MEMORY" in failed[0].error
    assert not failed[0].success
    assert all(r.length_steps == m.max_steps or r.success for r in results if r not in failed)


def test_calls_from_the_render_thread_do_not_wait_on_themselves() -> None:
    assert rd.call(lambda: rd.call(lambda: 7)) == 7


@pytest.mark.parametrize("obs_mode", ["pixels", "state+pixels"])
def test_policy_without_slots_sees_resolved_frames_of_finished_episodes(tmp_path, obs_mode):
    """Episodes that finish early leave their last frame in the batch the policy is given."""
    cfg = load_eval_config(
        None, env="robogen/Reach-v0", policy="python:tests/fixtures/pixel_policies.py:"
        "reach_expert_no_slots", obs_mode=obs_mode, episodes=8, batch_size=8,
        axes=["camera"], severities=[1.0], combined=False, backend="serial", videos=0,
        out=tmp_path / "r",
    )
    m = prepare(cfg)
    worker = EpisodeWorker(m)
    assert not worker._takes_slots
    results = [r for u in plan_units(m) for r in worker.run_unit(u)]
    worker.close()
    assert len(results) == 16 and all(r.success for r in results), [r.error for r in results]
    assert len({r.length_steps for r in results}) > 1  # episodes did end at different steps


@pytest.mark.parametrize("env_id", ["robogen/PickPlace-v0", "gymnasium/Reacher-v5"])
def test_camera_ids_follow_the_camera_name_and_model_swaps(env_id: str) -> None:
    """The observation camera's id is looked up once per model, not per frame: another camera
    in between, and a recompiled model whose camera ids moved, still draw the named camera."""
    # PickPlace observed through its last camera, so that deleting the first one moves its id
    render = RenderSettings(camera="side") if env_id.startswith("robogen/") else None

    def scene_of():
        env = make(env_id, obs_mode="pixels", render=render)
        env.reset(seed=3)
        return env, find_scene(env)

    env, scene = scene_of()
    names = [scene.model.camera(i).name for i in range(scene.model.ncam)]
    obs_cam = scene.roles.cameras[0]
    others = [n for n in names if n != obs_cam]
    first = scene.render_frame(width=84, height=84)
    spec = scene.nominal_spec()
    if others:  # a model without the first other camera: the observation camera's id drops
        side = scene.render_frame(others[0], width=84, height=84)
        assert not np.array_equal(first, side)
        assert np.array_equal(scene.render_frame(width=84, height=84), first)
        spec.delete(spec.camera(others[0]))
    else:  # Reacher has one camera: a recompiled model with one more
        spec.worldbody.add_camera(name="extra", pos=[0, 0, 1])
    model = spec.compile()
    scene.install_model(model)
    env.reset(seed=3)
    fresh, fresh_scene = scene_of()
    fresh_scene.install_model(model)
    fresh.reset(seed=3)
    assert np.array_equal(scene.render_frame(width=84, height=84),
                          fresh_scene.render_frame(width=84, height=84))
    if render is not None:  # the id did move
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, obs_cam) < names.index(obs_cam)
    env.close()
    fresh.close()


def test_actions_are_clipped_to_a_control_range_edited_in_place() -> None:
    """TabletopEnv.step reads the control range through views kept per data object: an
    in-place edit of ``actuator_ctrlrange`` (same model object) applies at the next step."""
    env, scene = _scene("robogen/Reach-v0")
    env.step(np.zeros(6, np.float32))  # the views are built
    lo = scene.data.ctrl[:5].copy() - 1e-3
    scene.model.actuator_ctrlrange[:5, 0] = lo
    scene.model.actuator_ctrlrange[:5, 1] = lo + 2e-3
    scene.model.actuator_ctrlrange[5:, :] = (0.01, 0.02)
    env.step(np.full(6, -1.0, np.float32))
    assert np.array_equal(scene.data.ctrl[:5], lo)  # clipped at the edited lower bound
    assert np.allclose(scene.data.ctrl[5:], 0.01)  # the finger at its edited closed end
    env.close()


def _frames(scenes) -> list[np.ndarray]:
    return [s.render_frame(width=84, height=84) for s in scenes]


@pytest.mark.parametrize("env_id", ["robogen/PickPlace-v0", "gymnasium/Reacher-v5"])
def test_envs_of_one_scene_share_a_context_and_draw_the_same_frames(env_id, monkeypatch):
    envs = [make(env_id, obs_mode="pixels") for _ in range(3)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    scenes = [find_scene(e) for e in envs]
    shared = _frames(scenes)
    ctxs = {id(s._frames.renderer._ctx) for s in scenes}
    assert len(ctxs) == 1 and scenes[0]._frames.renderer._ctx.users == 3
    assert not np.array_equal(shared[0], shared[1])  # different states, one context
    # the same envs, each renderer in a context of its own: the very same pixels
    counter = iter(range(10**6))
    monkeypatch.setattr(rd, "context_key", lambda model: str(next(counter)).encode())
    for s in scenes:
        s._frames.renderer.set_model(s.model)
    assert len({id(s._frames.renderer._ctx) for s in scenes}) == 3
    for a, b in zip(shared, _frames(scenes), strict=True):
        assert np.array_equal(a, b)
    for e in envs:
        e.close()


def test_a_texture_edit_stays_in_its_own_env_and_returning_to_nominal_shares_again():
    envs = [make("robogen/PickPlace-v0", obs_mode="pixels") for _ in range(2)]
    for e in envs:
        e.reset(seed=0)
    a, b = (find_scene(e) for e in envs)
    before_a, before_b = _frames([a, b])
    assert np.array_equal(before_a, before_b) and a._frames.renderer._ctx is b._frames.renderer._ctx
    nominal = a.model.tex_data.copy()
    a.model.tex_data[:] = 255 - nominal  # every texture inverted, in place
    a.textures_changed(tuple(range(a.model.ntex)))
    after_a, after_b = _frames([a, b])
    assert not np.array_equal(after_a, before_a)  # the edit shows in a's frame
    assert np.array_equal(after_b, before_b)  # and not in b's
    ctx_a, ctx_b = a._frames.renderer._ctx, b._frames.renderer._ctx
    assert ctx_a is not ctx_b and ctx_b.users == 1
    own = a._frames.renderer._ctx
    a.model.tex_data[:] = nominal // 2  # a second edit: a's own context is updated in place
    a.textures_changed(tuple(range(a.model.ntex)))
    assert a._frames.renderer._ctx is own and own.key == rd.context_key(a.model)
    assert not np.array_equal(_frames([a])[0], after_a)
    a.model.tex_data[:] = nominal
    a.textures_changed(tuple(range(a.model.ntex)))
    assert a._frames.renderer._ctx is b._frames.renderer._ctx and b._frames.renderer._ctx.users == 2
    assert np.array_equal(_frames([a])[0], before_a)
    key = rd.context_key(a.model)
    for e in envs:
        e.close()
    assert key not in rd._lanes[0].shared  # the last renderer out freed the shared context


@pytest.mark.timeout(60)
def test_a_renderer_collected_while_the_lock_is_held_does_not_deadlock():
    """The garbage collector may finalize a renderer while this thread holds the render
    module's lock (any allocation under it can run a collection): ``__del__`` takes it
    again, which must not hang."""
    import gc

    env, scene = _scene()
    r = rd.OffscreenRenderer(scene.model)
    ctx = r._ctx
    users = ctx.users
    with rd._lock:
        del r
        gc.collect()
    assert ctx.users == users - 1
    env.close()


def test_render_lanes_draw_the_same_frames_with_their_own_contexts() -> None:
    """A renderer on lane 1 draws on its own thread and GL context, with an ``MjrContext``
    of that lane (not lane 0's, though the assets are the same); the frames are the same bit
    for bit on either lane, and :meth:`set_lane` moves a renderer over (joining the context
    there); closing the last renderer of a lane frees its shared context."""
    import threading

    env, scene = _scene()
    r0 = rd.OffscreenRenderer(scene.model)
    r1 = rd.OffscreenRenderer(scene.model, lane=1)
    key = rd.context_key(scene.model)
    assert (r0.lane, r1.lane) == (0, 1)
    assert r0._ctx is not r1._ctx and (r0._ctx.lane, r1._ctx.lane) == (0, 1)
    assert rd._lanes[1].shared[key] is r1._ctx
    frames = [r.render(scene.data, 0, 84, 84) for r in (r0, r1)]
    assert np.array_equal(frames[0], frames[1]) and frames[0].std() > 0
    assert rd.call(threading.current_thread, lane=1).name == "robogen-render-1"
    assert rd.call(threading.get_ident, lane=1) != rd.call(threading.get_ident)
    r1.set_lane(0)
    assert r1.lane == 0 and r1._ctx is r0._ctx and r0._ctx.users >= 2
    assert key not in rd._lanes[1].shared  # its last renderer left lane 1
    assert np.array_equal(r1.render(scene.data, 0, 84, 84), frames[0])
    with pytest.raises(ValueError, match="render lane must be an integer >= 0, got -1"):
        rd.OffscreenRenderer(scene.model, lane=-1)
    with pytest.raises(ValueError, match="render lane must be an integer >= 0, got -1"):
        rd.submit(threading.get_ident, lane=-1)  # not the last lane, as a list index would
    r0.close()
    r1.close()
    env.close()


def test_a_lane_whose_gl_context_fails_falls_back_to_lane_0(monkeypatch, caplog) -> None:
    """A driver that gives one offscreen context but not a second must not fail the
    episodes: a renderer whose lane cannot make its context draws on lane 0 (logged)."""
    import threading

    env, scene = _scene()
    want = scene.render_frame(width=84, height=84)
    real = rd.mujoco.GLContext

    def gl_context(*args):  # noqa: ANN002, ANN202
        if threading.current_thread().name == "robogen-render-7":
            raise RuntimeError("EGL: no second context")
        return real(*args)

    monkeypatch.setattr(rd.mujoco, "GLContext", gl_context)
    with caplog.at_level("WARNING", logger="robogen.envs.render"):
        r = rd.OffscreenRenderer(scene.model, lane=7)
    assert r.lane == 0 and r._ctx.lane == 0
    assert "render lane 7 unavailable" in caplog.text and "no second context" in caplog.text
    assert np.array_equal(r.render(scene.data, 0, 84, 84), want)
    r.close()
    env.close()


def _display_address(display) -> int:
    import ctypes

    return int(ctypes.cast(display, ctypes.c_void_p).value or 0)


def test_a_lane_past_0_draws_on_an_egl_display_of_its_own_under_llvmpipe() -> None:
    """Mesa llvmpipe rasterizes a frame under a lock of its EGL display's screen, so lane 1's
    context lives on a display of its own (Mesa's surfaceless platform), not MuJoCo's one:
    same renderer, the same frames as lane 0."""
    import os

    if os.environ.get("MUJOCO_GL") != "egl" or not rd.call(rd._gl_renderer).startswith("llvmpipe"):
        pytest.skip("needs MUJOCO_GL=egl on Mesa llvmpipe")
    from mujoco import egl

    env, scene = _scene()
    r0, r1 = rd.OffscreenRenderer(scene.model), rd.OffscreenRenderer(scene.model, lane=1)
    gl = rd._lanes[1].gl
    assert isinstance(gl, rd._OwnDisplayContext)
    assert isinstance(rd._lanes[0].gl, egl.GLContext)
    assert _display_address(gl._display) != _display_address(egl.EGL_DISPLAY) != 0
    assert rd.call(rd._gl_renderer, lane=1) == rd.call(rd._gl_renderer)
    frame = r0.render(scene.data, 0, 84, 84)
    assert np.array_equal(r1.render(scene.data, 0, 84, 84), frame) and frame.std() > 0
    r0.close()
    r1.close()
    env.close()


def test_a_lane_keeps_mujocos_display_where_no_display_of_its_own_can_be_made(monkeypatch
                                                                              ) -> None:
    """Without the surfaceless platform (or off EGL) a lane past 0 draws with an ordinary
    ``mujoco.GLContext`` on MuJoCo's display: the same frames, nothing fails."""

    def no_display():  # noqa: ANN202
        raise RuntimeError("no EGL surfaceless display")

    own = rd._OwnDisplayContext
    monkeypatch.setattr(egl_display, "_OwnDisplayContext", no_display)
    env, scene = _scene()
    want = scene.render_frame(width=84, height=84)
    r = rd.OffscreenRenderer(scene.model, lane=5)
    assert r.lane == 5 and not isinstance(rd._lanes[5].gl, own)
    assert type(rd._lanes[5].gl) is type(rd._lanes[0].gl)
    assert np.array_equal(r.render(scene.data, 0, 84, 84), want)
    r.close()
    env.close()
    sentinel = object()  # off EGL the given context is kept without a GL call
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert rd._own_display_context(sentinel) is sentinel


def test_a_lane_keeps_mujocos_display_where_its_own_would_draw_on_another_renderer(
        monkeypatch) -> None:
    """A second display could pick another renderer (llvmpipe beside a GPU): then the lane
    keeps MuJoCo's display, so every lane draws the same frames."""
    import os

    if os.environ.get("MUJOCO_GL") != "egl" or not rd.call(rd._gl_renderer).startswith("llvmpipe"):
        pytest.skip("needs MUJOCO_GL=egl on Mesa llvmpipe")
    names = iter(["llvmpipe (the shared display)", "llvmpipe (another device)"])
    monkeypatch.setattr(egl_display, "_gl_renderer", lambda: next(names))
    env, scene = _scene()
    want = scene.render_frame(width=84, height=84)
    r = rd.OffscreenRenderer(scene.model, lane=6)
    assert type(rd._lanes[6].gl) is type(rd._lanes[0].gl)
    assert next(names, None) is None  # both displays were asked
    assert np.array_equal(r.render(scene.data, 0, 84, 84), want)
    r.close()
    env.close()


@pytest.mark.parametrize(("cores", "lanes"), [({0}, 1), ({0, 1}, 2), ({0, 1, 2, 3}, 2)])
def test_the_serial_backend_draws_on_two_lanes_when_it_may_use_two_cores(monkeypatch, cores,
                                                                          lanes) -> None:
    """One lane on one core (a second render thread would only take turns with the worker's);
    two from two cores on (the worker's thread is the third busy thread), counted from the
    process's affinity mask, not the machine's CPUs; the serial backend's worker gets them."""
    import robogen._cores
    from robogen.rollout.backend import _UnitThread
    from robogen.rollout.worker import serial_render_lanes

    monkeypatch.setattr(robogen._cores.os, "sched_getaffinity", lambda pid: cores)
    assert serial_render_lanes() == lanes
    made = []

    class Worker:  # what the serial backend's thread builds, without envs or a policy
        def __init__(self, *args, **kwargs):
            made.append(kwargs["render_lanes"])

        def close(self):
            pass

    monkeypatch.setattr("robogen.rollout.worker.EpisodeWorker", Worker)
    thread = _UnitThread(None, "cpu")  # type: ignore[arg-type]
    thread._ready.result(timeout=10)
    thread.stop(join_s=10)
    assert made == [lanes]


def test_a_process_that_rendered_frees_its_contexts_before_egl_terminates() -> None:
    """MuJoCo 3.x's EGL backend registers ``eglTerminate`` at exit when it makes its first
    context; the lanes' contexts must be freed before it runs (on the suites' 3.17 track a
    pixel run printed an EGLError at exit). On 4.0 nothing terminates the display at exit and
    only the clean exit is checked."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "import mujoco.egl as egl\n"
            "from robogen.envs import find_scene, make, render\n"
            "terminate = egl.EGL.eglTerminate\n"
            "def checked(display):\n"
            "    freed = all(ln.gl is None for ln in render._lanes)\n"
            "    print('terminate after free:', freed, flush=True)\n"
            "    return terminate(display)\n"
            "egl.EGL.eglTerminate = checked\n"
            "env = make('robogen/Reach-v0', obs_mode='pixels')\n"
            "env.reset(seed=0)\n"
            "print(find_scene(env).render_frame(width=32, height=32).shape, flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MUJOCO_GL": "egl"}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "(32, 32, 3)" in proc.stdout
    assert "terminate after free: False" not in proc.stdout
    if mujoco.__version__.startswith("3."):
        assert "terminate after free: True" in proc.stdout
    assert "EGLError" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
