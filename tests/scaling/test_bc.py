"""Behaviour cloning in JAX: vmapped ensemble == sequential, low loss, checkpoints, flax: loader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robogen.errors import CheckpointError, InvalidSpecError, SpaceMismatchError
from robogen.scaling.bc import (
    BCConfig,
    bc_loss,
    init_bc,
    model_groups,
    random_shift,
    train_bc_ensemble,
    train_bc_sequential,
)
from robogen.scaling.bc_io import load_bc, save_bc

N, D, A = 1200, 10, 3
SEEDS = [0, 1, 2]
KW = dict(steps=400, batch_size=64, hidden=(64, 64))
VMAP_TOL = 1e-4
"""Max |action difference| between the vmapped and the sequential trainer (float reassociation;
measured ~5e-7)."""


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(D, A)) / np.sqrt(D)
    obs = (rng.normal(size=(N, D)) * 2.0 + 3.0).astype(np.float32)  # un-normalized scale
    actions = np.tanh(1.5 * ((obs - 3.0) / 2.0) @ w).astype(np.float32)
    masks = np.zeros((len(SEEDS), N), bool)
    for k, size in enumerate((300, 600, 1000)):
        masks[k, rng.permutation(1000)[:size]] = True  # rows >= 1000 are held out
    return obs, actions, masks


@pytest.fixture(scope="module")
def ensemble(data):
    obs, actions, masks = data
    return train_bc_ensemble(obs, actions, masks, seeds=SEEDS, **KW)


@pytest.fixture(scope="module")
def sequential(data):
    obs, actions, masks = data
    return train_bc_sequential(obs, actions, masks, seeds=SEEDS, **KW)


def test_ensemble_reaches_low_loss(data, ensemble):
    obs, actions, _ = data
    assert [m.train_info["n_train"] for m in ensemble] == [300, 600, 1000]
    for m in ensemble:
        assert m.train_info["final_loss"] < 0.01
        assert m.train_info["loss_curve"][0] > 10 * m.train_info["final_loss"]
    held_out = [bc_loss(m, obs[1000:], actions[1000:]) for m in ensemble]
    assert max(held_out) < 0.03
    assert held_out[2] < held_out[0]  # more data, better generalization


def test_vmapped_equals_sequential(data, ensemble, sequential):
    obs = data[0]
    for e, s in zip(ensemble, sequential, strict=True):
        np.testing.assert_allclose(e.predict(obs), s.predict(obs), atol=VMAP_TOL)
        np.testing.assert_allclose(e.train_info["loss_curve"], s.train_info["loss_curve"],
                                   rtol=1e-3)
        np.testing.assert_array_equal(e.obs_mean, s.obs_mean)


def test_model_groups_split_evenly_and_pad_the_last():
    assert [g.tolist() for g in model_groups(8, 2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [g.tolist() for g in model_groups(5, 2)] == [[0, 1, 2], [3, 4, 4]]
    assert [g.tolist() for g in model_groups(3, 1)] == [[0, 1, 2]]
    assert [g.tolist() for g in model_groups(2, 16)] == [[0], [1]]
    assert [g.tolist() for g in model_groups(5, 4)] == [[0, 1], [2, 3], [4, 4]]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_groups_give_the_same_models(data, ensemble, threads):
    """Concurrent groups (2 and 3 threads for 3 models: padded, one model per group) train
    the very same MLPs, bit for bit, as one vmapped group."""
    obs, actions, masks = data
    again = train_bc_ensemble(obs, actions, masks, seeds=SEEDS, threads=threads, **KW)
    for a, e in zip(again, ensemble, strict=True):
        np.testing.assert_array_equal(a.predict(obs[:100]), e.predict(obs[:100]))
        assert a.train_info == e.train_info


def test_bad_thread_count_is_refused(data):
    obs, actions, masks = data
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidSpecError, match="threads must be a positive integer"):
            train_bc_ensemble(obs, actions, masks, seeds=SEEDS, threads=bad, **KW)


def test_models_differ_by_subset_and_seed(data, ensemble):
    obs = data[0][:50]
    assert np.abs(ensemble[0].predict(obs) - ensemble[1].predict(obs)).max() > 1e-3
    np.testing.assert_allclose(ensemble[0].obs_mean, data[0][data[2][0]].mean(0), rtol=1e-5)


def test_index_subsets_equal_mask_subsets(data, ensemble):
    obs, actions, masks = data
    idx = [np.flatnonzero(m) for m in masks]
    again = train_bc_ensemble(obs, actions, idx, seeds=SEEDS, **KW)
    for a, e in zip(again, ensemble, strict=True):
        np.testing.assert_array_equal(a.predict(obs[:100]), e.predict(obs[:100]))


def test_action_bounds_are_rescaled(data):
    obs, actions, masks = data
    low, high = np.array([0.0, -2.0, 1.0]), np.array([2.0, 2.0, 1.5])
    env_actions = low + (actions + 1.0) * 0.5 * (high - low)
    m = train_bc_ensemble(obs, env_actions, masks, seeds=SEEDS, action_low=low,
                          action_high=high, **KW)[2]  # same shapes as `ensemble`: no recompile
    pred = m.predict(obs[1000:])
    assert np.all(pred >= low) and np.all(pred <= high)
    assert np.abs(pred - env_actions[1000:]).mean() < 0.1 * np.mean(high - low)


def test_checkpoint_round_trip_gives_identical_actions(tmp_path, data, ensemble):
    obs = data[0][:64]
    path = save_bc(ensemble[1], tmp_path / "bc")
    loaded = load_bc(path)
    np.testing.assert_array_equal(loaded.predict(obs), ensemble[1].predict(obs))
    assert loaded.config == ensemble[1].config
    assert loaded.train_info["seed"] == 1
    np.testing.assert_array_equal(load_bc(path / "bc.json").predict(obs), loaded.predict(obs))


def test_checkpoint_errors(tmp_path, ensemble):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_bc(tmp_path / "missing")
    path = save_bc(ensemble[0], tmp_path / "bc")
    meta = json.loads((path / "bc.json").read_text())
    (path / "bc.json").write_text(json.dumps({**meta, "config": {**meta["config"],
                                                                  "hidden": [32]}}))
    with pytest.raises(CheckpointError, match="parameter shapes"):
        load_bc(path)
    (path / "bc.json").write_text(json.dumps({**meta, "version": 7}))
    with pytest.raises(CheckpointError, match="schema version 7"):
        load_bc(path)
    (path / "params.msgpack").write_bytes(b"garbage")
    (path / "bc.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_bc(path)
    (path / "bc.json").unlink()
    with pytest.raises(CheckpointError, match="interrupted save"):
        load_bc(path)
    (tmp_path / "notes.txt").write_text("hello")  # a user's wrong path: not "interrupted"
    with pytest.raises(CheckpointError, match="notes.txt is a file, not a checkpoint"):
        load_bc(tmp_path / "notes.txt")
    with pytest.raises(CheckpointError, match="is not a BC checkpoint: it has neither bc.json"):
        load_bc(tmp_path)


def test_bad_training_inputs(data):
    obs, actions, masks = data
    with pytest.raises(InvalidSpecError, match="empty"):
        train_bc_ensemble(obs, actions, np.zeros((2, N), bool), seeds=[0, 1], **KW)
    with pytest.raises(InvalidSpecError, match="seeds must be 3"):
        train_bc_ensemble(obs, actions, masks, seeds=[0, 1], **KW)
    with pytest.raises(InvalidSpecError, match="actions"):
        train_bc_ensemble(obs, actions[:10], masks, seeds=SEEDS, **KW)
    with pytest.raises(InvalidSpecError, match="indices"):
        train_bc_ensemble(obs, actions, [np.array([0, N])], seeds=[0], **KW)
    with pytest.raises(InvalidSpecError, match="arch 'mlp' cannot read 'pixels'"):
        train_bc_ensemble(np.zeros((4, 8, 8, 3), np.uint8), actions[:4], [np.arange(4)],
                          seeds=[0], arch="mlp")
    with pytest.raises(InvalidSpecError, match="unknown BC option"):
        train_bc_ensemble(obs, actions, masks, seeds=SEEDS, hiden=(3,))
    with pytest.raises(InvalidSpecError, match="lr"):
        BCConfig(lr=0.0)


def test_random_shift_crops_the_edge_padded_image():
    import jax

    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 255, (6, 12, 10, 3), dtype=np.uint8)
    key = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(np.asarray(random_shift(key, imgs, 0)), imgs)
    out = np.asarray(random_shift(key, imgs, 4))
    assert out.shape == imgs.shape and out.dtype == np.uint8
    padded = np.pad(imgs, ((0, 0), (4, 4), (4, 4), (0, 0)), mode="edge")
    shifted = 0
    for i in range(len(imgs)):
        crops = [(dy, dx) for dy in range(9) for dx in range(9)
                 if np.array_equal(padded[i, dy:dy + 12, dx:dx + 10], out[i])]
        assert crops, f"image {i} is not a crop of its padded image"
        shifted += (4, 4) not in crops
    assert shifted >= 4  # offsets are random, not all centred


def test_pixel_model_predicts_in_bounds():
    m = init_bc({"pixels": (84, 84, 3)}, 6, seed=0)
    assert m.config.arch == "cnn" and m.obs_mode == "pixels"
    pix = np.random.default_rng(0).integers(0, 255, (5, 84, 84, 3), dtype=np.uint8)
    a = m.predict(pix)
    assert a.shape == (5, 6) and a.dtype == np.float32
    assert np.all(np.abs(a) <= 1.0)
    assert np.abs(a[0] - a[1]).max() > 0  # depends on the image


@pytest.fixture(scope="module")
def reach_ctx():
    import robogen.envs as envs
    from robogen.policies.base import LoadContext

    env = envs.make("robogen/Reach-v0", obs_mode="state")
    obs = np.stack([env.reset(seed=s)[0] for s in range(4)])
    ctx = LoadContext("robogen/Reach-v0", env.observation_space, env.action_space, "state")
    env.close()
    return ctx, obs


def test_flax_loader_acts_on_reach(tmp_path, reach_ctx):
    import robogen.policies.flax_policy  # noqa: F401  (registers "flax")
    from robogen.policies import load_policy

    ctx, obs = reach_ctx
    model = init_bc({"state": ctx.observation_space.shape}, ctx.action_space.shape[0], seed=3)
    path = save_bc(model, tmp_path / "reach_bc")
    policy = load_policy(f"flax:{path}", ctx)
    policy.reset([0, 1, 2, 3])
    act = policy.act(obs, deterministic=True)
    assert act.shape == (4, ctx.action_space.shape[0]) and act.dtype == np.float32
    assert all(ctx.action_space.contains(a) for a in act)
    np.testing.assert_array_equal(act, model.predict(obs))
    np.testing.assert_allclose(policy.act(obs[:1]), act[:1], atol=1e-6)  # other batch shape


def test_flax_loader_reports_mismatches(tmp_path, reach_ctx):
    import robogen.policies.flax_policy  # noqa: F401
    from robogen.policies import load_policy

    ctx, _ = reach_ctx
    small = save_bc(init_bc({"state": (7,)}, ctx.action_space.shape[0]), tmp_path / "small")
    with pytest.raises(SpaceMismatchError, match="observation space"):
        load_policy(f"flax:{small}", ctx)
    pix = save_bc(init_bc({"pixels": (84, 84, 3)}, ctx.action_space.shape[0]), tmp_path / "pix")
    with pytest.raises(SpaceMismatchError, match="--obs-mode pixels"):
        load_policy(f"flax:{pix}", ctx)
    with pytest.raises(CheckpointError):
        load_policy(f"flax:{tmp_path / 'nothing'}", ctx)
    with pytest.raises(InvalidSpecError):
        load_policy("flax:", ctx)


def test_cnn_ensemble_with_state_and_augmentation_learns():
    rng = np.random.default_rng(0)
    n = 256
    pix = np.zeros((n, 24, 24, 3), np.uint8)
    pos = rng.integers(4, 20, size=n)
    for i, p in enumerate(pos):
        pix[i, :, p - 2:p + 2] = 255  # a bright vertical bar; action = its column
    state = rng.normal(size=(n, 2)).astype(np.float32)
    actions = np.column_stack([(pos - 12) / 8.0, np.tanh(state[:, 0])]).astype(np.float32)
    cfg = BCConfig(arch="cnn", conv_channels=(8, 8), conv_kernels=(3, 3), conv_strides=(2, 1),
                   feature_dim=32, hidden=(64,), steps=300, batch_size=32, augment=True,
                   shift_pad=1)
    models = train_bc_ensemble({"state": state, "pixels": pix}, actions, np.ones((2, n), bool),
                               seeds=[0, 1], config=cfg)
    for m in models:
        assert m.obs_mode == "state+pixels"
        assert m.train_info["final_loss"] < 0.1 * m.train_info["loss_curve"][0]
    a = models[0].predict({"state": state[:8], "pixels": pix[:8]})
    assert a.shape == (8, 2) and a.dtype == np.float32


def test_min_image_size_is_the_smallest_side_the_cnn_accepts():
    from robogen.scaling.bc import BCConfig, check_image_size, min_image_size

    cfg = BCConfig(arch="cnn")
    need = min_image_size(cfg)
    assert need == 36  # (8, 4, 3) kernels, (4, 2, 1) strides
    side = need
    for k, s in zip(cfg.conv_kernels, cfg.conv_strides, strict=True):
        side = (side - k) // s + 1
    assert side == 1
    check_image_size(cfg, need)
    with pytest.raises(InvalidSpecError, match="at least 36x36"):
        check_image_size(cfg, need - 1)


@pytest.mark.parametrize(("side", "kernel", "stride"), [(84, 8, 4), (85, 8, 4), (37, 4, 4),
                                                         (64, 8, 4), (30, 6, 3)])
def test_space_to_depth_conv_is_the_strided_conv(side, kernel, stride):
    """The folded conv row-by-row inference runs is the strided ``VALID`` conv, to float32
    rounding, also where the stride does not divide the image (the unread edge is dropped)."""
    import jax

    from robogen.policies.bc_net import space_to_depth_conv

    rng = np.random.default_rng(side)
    x = rng.random((2, side, side, 3), np.float32)
    w = rng.normal(0, 0.1, (kernel, kernel, 3, 5)).astype(np.float32)
    want = jax.lax.conv_general_dilated(x, w, (stride, stride), "VALID",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    got = space_to_depth_conv(x, w, stride)
    assert got.shape == want.shape == (2, (side - kernel) // stride + 1,
                                       (side - kernel) // stride + 1, 5)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_space_to_depth_net_has_the_same_parameters_and_function():
    """``PolicyNet(space_to_depth=True)`` (inference) reads the checkpoint's parameter tree and
    computes the training network's function: the shipped policy's actions agree to 1e-4."""
    from pathlib import Path

    import jax
    import jax.numpy as jnp

    from robogen.policies.bc_net import PolicyNet, forward

    root = Path(__file__).resolve().parents[2]
    model = load_bc(root / "robogen/assets/policies/push_pixels_plain")
    rng = np.random.default_rng(1)
    obs = {"state": jnp.asarray(rng.normal(0, 0.3, (3, 30)), jnp.float32),
           "pixels": jnp.asarray(rng.integers(0, 256, (3, 84, 84, 3)), jnp.uint8)}
    stats = jax.device_put(model._stats())
    nets = [PolicyNet(model.config, model.act_dim, space_to_depth=s) for s in (False, True)]
    shapes = [jax.tree_util.tree_map(jnp.shape, net.init(jax.random.PRNGKey(0), obs["state"],
                                                          obs["pixels"])["params"])
              for net in nets]
    assert shapes[0] == shapes[1] == jax.tree_util.tree_map(np.shape, model.params)
    plain, folded = (np.asarray(forward(net, model.params, stats, obs)) for net in nets)
    assert not np.array_equal(plain[0], plain[1])
    np.testing.assert_allclose(folded, plain, atol=1e-4)
    assert not np.array_equal(folded, plain)  # the folded conv ran (another summation order)


def test_dense_matmul_is_dense_and_its_weight_gradient_a_plain_matmul():
    """``dense_matmul`` (the Dense product of :class:`PolicyNet`) gives ``x @ w`` bit for bit,
    autodiff's gradients to float32 rounding (also vmapped over models, as the ensemble
    trainer runs it), and on XLA:CPU its compiled weight gradient contracts no array over
    its leading axis (the transposed-input product that ran ~20% slower)."""
    import jax
    import jax.numpy as jnp

    from robogen.policies.bc_net import dense_matmul

    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(4, 32, 20)), jnp.float32)  # (models, batch, in)
    w = jnp.asarray(rng.normal(size=(4, 20, 16)), jnp.float32)
    np.testing.assert_array_equal(np.asarray(jax.vmap(dense_matmul)(x, w)),
                                  np.asarray(jax.vmap(jnp.matmul)(x, w)))

    def loss(mm):
        return lambda x, w: jnp.sum(jnp.tanh(mm(x, w)) ** 2)

    grads = jax.vmap(jax.grad(loss(dense_matmul), (0, 1)))
    want = jax.vmap(jax.grad(loss(jnp.matmul), (0, 1)))(x, w)
    for got, ref in zip(grads(x, w), want, strict=True):
        assert got.shape == ref.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5, atol=1e-5)
    if jax.default_backend() == "cpu":
        weight_grad = jax.jit(jax.vmap(jax.grad(loss(dense_matmul), 1)))
        hlo = weight_grad.lower(x, w).compile().as_text()
        assert "lhs_contracting_dims={1}" not in hlo  # (models, batch, in): batch is axis 1
        plain = jax.jit(jax.vmap(jax.grad(loss(jnp.matmul), 1))).lower(x, w).compile().as_text()
        assert "lhs_contracting_dims={1}" in plain  # what autodiff compiles to (the check bites)


@pytest.mark.parametrize("partitionable", [True, False])
def test_split_key_is_jax_random_split_without_a_loop_per_split(partitionable):
    """The MLP trainer's key chain (``split_key``, one split per training step) gives
    ``jax.random.split``'s keys in either JAX split mode, vmapped over models inside a scan
    as the trainer runs it, and compiles without the 5-iteration loop JAX's CPU lowering runs
    per split (most of a small ensemble's step before)."""
    import jax
    import jax.numpy as jnp

    from robogen.scaling.bc import _unrolled_split_agrees, split_key

    before = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", partitionable)
    try:
        assert _unrolled_split_agrees(partitionable)
        keys = jnp.stack([jax.random.PRNGKey(s) for s in (0, 7, 2**31 - 1, 123456)])

        def chain(split):
            def next_key(key, _):
                key, k_batch, _k_aug = split(key, 3)
                return key, k_batch
            return jax.jit(jax.vmap(lambda k: jax.lax.scan(next_key, k, None, length=20)))

        got, want = chain(split_key)(keys), chain(jax.random.split)(keys)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                        strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        loops = [chain(f).lower(keys).compile().as_text().count(" while(")
                 for f in (split_key, jax.random.split)]
        assert loops[0] == 1 < loops[1]  # the scan only; JAX's split adds its own loop
    finally:
        jax.config.update("jax_threefry_partitionable", before)


def _flax_mlp(config, seed=0):
    """A freshly initialised MLP (``init_bc``), a batch of raw states and their statistics."""
    import jax.numpy as jnp

    model = init_bc({"state": (D,)}, A, seed=seed, config=config)
    rng = np.random.default_rng(seed)
    state = jnp.asarray(rng.normal(size=(32, D)) * 3.0 + 1.0, jnp.float32)
    stats = {"mean": jnp.asarray(rng.normal(size=D), jnp.float32),
             "std": jnp.asarray(rng.uniform(0.5, 2.0, size=D), jnp.float32)}
    return model, state, stats


@pytest.mark.parametrize("state_indices", [None, (0, 3, 4, 9)])
def test_augmented_mlp_is_the_flax_mlp(state_indices):
    """The trainer's MLP (each Dense layer one bias-augmented matrix, ``mlp_forward``) is
    ``PolicyNet`` on the same parameters to float32 rounding, and its matrices convert back to
    the Flax tree bit for bit, also with a leading (model) axis as the ensemble carries them."""
    import jax
    import jax.numpy as jnp

    from robogen.policies.bc_net import PolicyNet, forward
    from robogen.scaling.bc import augment_dense, flax_dense, mlp_forward

    config = BCConfig(hidden=(16, 8), state_indices=state_indices)
    model, state, stats = _flax_mlp(config)
    aug = augment_dense(model.params)
    assert [a.shape for a in aug] == [(len(state_indices or range(D)) + 1, 16), (17, 8), (9, A)]
    want = forward(PolicyNet(config, A), model.params, stats, {"state": state})
    got = mlp_forward(aug, stats, state, config)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
    for tree in (model.params, jax.tree_util.tree_map(lambda p: jnp.stack([p, 2 * p]),
                                                      model.params)):
        back = flax_dense(augment_dense(tree))
        assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(tree)
        for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(tree),
                        strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_augmented_training_step_is_adam_on_the_flax_parameters():
    """One update of the trainer's optimizer (gradient clipping, AdamW, cosine schedule) on the
    augmented matrices gives the update on Flax's kernels and biases: the gradient of the loss
    and the step agree to float32 rounding (the clip is active: the norm is far above it)."""
    import jax
    import jax.numpy as jnp

    from robogen.policies.bc_net import PolicyNet, forward
    from robogen.scaling.bc import _optimizer, augment_dense, flax_dense, mlp_forward

    config = BCConfig(hidden=(16, 8), weight_decay=1e-2, lr_schedule="cosine", steps=10,
                      max_grad_norm=1e-3)
    model, state, stats = _flax_mlp(config, seed=1)
    target = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, size=(32, A)), jnp.float32)
    net = PolicyNet(config, A)

    def flax_loss(p):
        return jnp.mean((forward(net, p, stats, {"state": state}) - target) ** 2)

    def aug_loss(p):
        return jnp.mean((mlp_forward(p, stats, state, config) - target) ** 2)

    params = jax.tree_util.tree_map(jnp.asarray, model.params)
    aug = augment_dense(params)
    g_flax, g_aug = jax.grad(flax_loss)(params), jax.grad(aug_loss)(aug)
    norm = np.sqrt(sum(float(jnp.sum(g ** 2)) for g in jax.tree_util.tree_leaves(g_flax)))
    assert norm > 10 * config.max_grad_norm
    tx = _optimizer(config)
    steps = []
    for p, g in ((params, g_flax), (aug, g_aug)):
        opt = tx.init(p)
        for _ in range(3):  # the same gradient thrice: moments, bias correction, schedule
            upd, opt = tx.update(g, opt, p)
            p = jax.tree_util.tree_map(lambda a, u: a + u, p, upd)
        steps.append(p)
    for a, b, ga, gb in zip(jax.tree_util.tree_leaves(flax_dense(steps[1])),
                            jax.tree_util.tree_leaves(steps[0]),
                            jax.tree_util.tree_leaves(flax_dense(g_aug)),
                            jax.tree_util.tree_leaves(g_flax), strict=True):
        gb = np.asarray(gb)  # float32 rounding, relative to the array's largest entry
        np.testing.assert_allclose(np.asarray(ga), gb, rtol=1e-4, atol=1e-5 * np.abs(gb).max())
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(steps[1][0]), np.asarray(aug[0]))  # the step moved them


def test_mlp_training_step_transposes_plain_arrays():
    """On XLA:CPU every transpose in the compiled MLP training loop copies an array as it is:
    none recomputes ``relu(h + bias)`` in its strided loop (what Flax's separate bias led XLA to
    do, ~5x slower than the plain transpose; ``mlp_forward``)."""
    import re

    import jax
    import jax.numpy as jnp

    from robogen.scaling.bc import _train_fns

    if jax.default_backend() != "cpu":
        pytest.skip("an XLA:CPU fusion property")
    config = BCConfig(hidden=(32, 32), batch_size=16)
    fns = _train_fns(config, A)
    state = fns.init_one(jax.random.PRNGKey(0), {"state": jnp.zeros((1, D), jnp.float32)})
    stats = {"mean": jnp.zeros(D, jnp.float32), "std": jnp.ones(D, jnp.float32)}
    hlo = fns.run_one.lower(state, jnp.arange(100, dtype=jnp.int32), jnp.int32(100), stats,
                            {"state": jnp.ones((100, D), jnp.float32)},
                            jnp.zeros((100, A), jnp.float32), 5).compile().as_text()
    fused = re.findall(r"^%\S+ \([^\n]*\{\n(.*?)^\}", hlo, re.S | re.M)
    transposing = [body for body in fused if " transpose(" in body and "dot(" not in body]
    assert len(transposing) >= 3  # one per layer's weight gradient
    for body in transposing:
        ops = set(re.findall(r"= \S+ (\w[\w-]*)\(", body)) - {"parameter", "bitcast"}
        assert ops <= {"transpose", "copy"}, ops
