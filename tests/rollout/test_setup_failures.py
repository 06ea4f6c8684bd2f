"""Set-up failures are errors, not results (issue 8 §3), on real processes.

Each test runs ``robogen eval`` as a child process (so its environment, ``PYTHONPATH``
and ``RAY_ADDRESS`` included, is the user's) with a generous ``timeout``: a set-up
failure must exit 2 with one clear line and no run dir, never retry for minutes or hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robogen.rollout.store import ResultStore
from tests.rollout.cluster import LoopbackCluster

REPO = Path(__file__).resolve().parents[2]
BOUND_S = 240
"""A set-up failure exits within this [s] (Ray retried an unreachable address ~14 min)."""

EVAL = ["eval", "--env", "robogen/Reach-v0", "--axes", "physics", "--episodes", "2",
        "--max-steps", "5", "--videos", "0", "--no-combined", "--severities", "1"]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=str(REPO), COLUMNS="200")
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    return env


def _robogen(args: list[str], env: dict[str, str], cwd: Path, prelude: str = ""
             ) -> subprocess.CompletedProcess[str]:
    """``robogen ARGS`` in a child process (``prelude``: Python run first, in the driver)."""
    code = f"{prelude}\nfrom robogen.cli import main\nimport sys\nsys.argv = ['robogen', " \
           f"*{args!r}]\nmain()"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=BOUND_S)


def _user_package(root: Path) -> Path:
    """A package ``rg_user_pol`` with a ``factory`` (the random policy) under ``root``."""
    pkg = root / "rg_user_pol"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(textwrap.dedent("""
        import os
        from pathlib import Path

        from robogen.policies.simple import RandomPolicy

        def factory(ctx):
            where = os.environ.get("RG_TEST_WORKER_DIR")
            if where:  # which worker index each loading process was given
                Path(where, f"{os.getpid()}-{ctx.worker_index}").touch()
            return RandomPolicy(ctx.observation_space, ctx.action_space, ctx.obs_mode, 0)
    """))
    return root


def test_a_module_on_the_drivers_pythonpath_reaches_the_ray_workers(tmp_path):
    """... and each worker is given its own ``LoadContext.worker_index`` (0, 1)."""
    user = _user_package(tmp_path / "user")
    work = tmp_path / "work"  # the working directory (forwarded too) holds nothing
    work.mkdir()
    loads = tmp_path / "loads"
    loads.mkdir()
    out = tmp_path / "run"
    env = _env(PYTHONPATH=os.pathsep.join([str(REPO), str(user)]), RG_TEST_WORKER_DIR=str(loads))
    res = _robogen([*EVAL, "--policy", "python:rg_user_pol.mod:factory", "--backend", "ray",
                    "--workers", "2", "--out", str(out)], env, work)
    assert res.returncode == 0, res.stderr[-2000:]
    results = ResultStore.open(out).load_results()
    assert len(results) == 4
    assert all(r.cause == "timeout" and r.length_steps == 5 for r in results), results
    by_pid: dict[str, set[int]] = {}
    for f in loads.iterdir():
        pid, index = f.name.split("-")
        by_pid.setdefault(pid, set()).add(int(index))
    assert len(by_pid) == 3  # the driver (its probe) and two Ray workers
    assert sorted(min(v) for v in by_pid.values()) == [0, 0, 1]


def test_a_module_only_the_driver_can_import_exits_2_naming_it(tmp_path):
    user = _user_package(tmp_path / "user")
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "run"
    # the driver finds the package through sys.path, the workers have no way to
    prelude = f"import sys; sys.path.insert(0, {str(user)!r})"
    res = _robogen([*EVAL, "--policy", "python:rg_user_pol.mod:factory", "--backend", "ray",
                    "--workers", "1", "--out", str(out)], _env(), work, prelude)
    text = " ".join(res.stderr.split())
    assert res.returncode == 2, text[-2000:]
    assert "a Ray worker failed to set up" in text and "rg_user_pol" in text, text[-2000:]
    assert "ModuleNotFoundError" in text
    assert not out.exists()


def test_unreachable_address_exits_2_in_seconds(tmp_path):
    out = tmp_path / "run"
    res = _robogen([*EVAL, "--policy", "expert:reach", "--address", "127.0.0.1:1",
                    "--out", str(out)], _env(), tmp_path)
    text = " ".join(res.stderr.split())
    assert res.returncode == 2, text[-2000:]
    assert "no Ray cluster answers at --address '127.0.0.1:1'" in text
    assert not out.exists()


def test_ray_address_in_the_environment_is_joined(tmp_path):
    """``RAY_ADDRESS`` means ``--address`` (documented): an unreachable one is exit 2 naming
    the variable; a live one is joined (no embedded cluster, no ``num_cpus`` crash)."""
    out = tmp_path / "run"
    res = _robogen([*EVAL, "--policy", "expert:reach", "--out", str(out)],
                   _env(RAY_ADDRESS="127.0.0.1:1"), tmp_path)
    text = " ".join(res.stderr.split())
    assert res.returncode == 2, text[-2000:]
    assert "no Ray cluster answers at RAY_ADDRESS '127.0.0.1:1'" in text, text[-2000:]
    assert not out.exists()

    cluster = LoopbackCluster()
    try:
        cluster.add_node(num_cpus=1)
        gcs = tmp_path / "gcs.txt"
        # the driver writes down the cluster it is connected to while the run goes on
        prelude = textwrap.dedent(f"""
            import robogen.rollout.session as s
            _run = s.EvalSession.run
            def run(self, *a, **k):
                import ray
                open({str(gcs)!r}, "w").write(ray.get_runtime_context().gcs_address)
                return _run(self, *a, **k)
            s.EvalSession.run = run
        """)
        res = _robogen([*EVAL, "--policy", "expert:reach", "--out", str(out)],
                       _env(RAY_ADDRESS=cluster.address), tmp_path, prelude)
        assert res.returncode == 0, res.stderr[-2000:]
        assert gcs.read_text().endswith(f":{cluster.port}")
        assert len(ResultStore.open(out).load_results()) == 4
    finally:
        cluster.close()


@pytest.mark.slow
def test_missing_gpus_exit_2_in_seconds(tmp_path):
    out = tmp_path / "run"
    res = _robogen([*EVAL, "--policy", "expert:reach", "--num-gpus-per-worker", "1",
                    "--out", str(out)], _env(CUDA_VISIBLE_DEVICES=""), tmp_path)
    text = " ".join(res.stderr.split())
    assert res.returncode == 2, text[-2000:]
    assert "--num-gpus-per-worker 1 asks for GPUs, but the Ray cluster has 0 GPU(s)" in text
    assert not out.exists()


@pytest.mark.slow
def test_a_cluster_with_token_auth_is_named_as_such(tmp_path):
    cluster = LoopbackCluster()
    cluster.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0123456789abcdef" * 2)
    out = tmp_path / "run"
    try:
        cluster.add_node()
        env = _env(RAY_AUTH_TOKEN_PATH=str(tmp_path / "no-token"))
        env.pop("RAY_AUTH_MODE")
        res = _robogen([*EVAL, "--policy", "expert:reach", "--address", cluster.address,
                        "--out", str(out)], env, tmp_path)
    finally:
        cluster.close()
    text = " ".join(res.stderr.split())
    assert res.returncode == 2, text[-2000:]
    assert "it has token authentication on" in text and "RAY_AUTH_TOKEN" in text, text[-2000:]
    assert "gcs_client.cc" not in res.stderr  # Ray's retry warnings are not shown
    assert not out.exists()
