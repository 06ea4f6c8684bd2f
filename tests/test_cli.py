"""Bad input through the CLI: exit code 2, a message naming the bad value, nothing written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from robogen.cli import app

runner = CliRunner()


def _flat(text: str) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(text.split())


def _eval(*args: str):
    return runner.invoke(app, ["eval", *args])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--axes", "lightning"], "unknown perturbation axis 'lightning'"),
        (["--severities", "1.5"], "severity must be in (0, 1], got 1.5"),
        (["--episodes", "0"], "episodes"),
        (["--backend", "spark"], "backend"),
        (["--obs-mode", "depth"], "obs_mode"),
        (["--env-kwargs", "{task_index: 3}"], "--env-kwargs must be a JSON object"),
        (["--env-kwargs", "[3]"], "--env-kwargs must be a JSON object"),
        (["--env-kwargs", '{"max_steps": 5}'],
         "env_kwargs key 'max_steps' is robogen's own option, not the env's: give it as "
         "--max-steps"),
        (["--env-kwargs", '{"no_such_kwarg": 1}'], "does not accept env_kwargs ['no_such_kwarg']"),
    ],
    ids=["unknown-axis", "severity-1.5", "zero-episodes", "bad-backend", "bad-obs-mode",
         "env-kwargs-not-json", "env-kwargs-list", "env-kwargs-robogen-option",
         "env-kwargs-unknown"],
)
def test_bad_eval_flags(tmp_path, args, needle):
    out = tmp_path / "run"
    res = _eval("--env", "robogen/Reach-v0", "--policy", "expert:reach", "--out", str(out), *args)
    assert res.exit_code == 2, res.output
    assert needle in _flat(res.output)
    assert not out.exists()


def test_unknown_env_suggests_close_match(tmp_path):
    res = _eval("--env", "robogen/PickPlace-v9", "--policy", "random", "--out", str(tmp_path / "r"))
    assert res.exit_code == 2
    assert "robogen/PickPlace-v0" in res.output


def test_resume_empty_run_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    res = _eval("--resume", str(tmp_path / "empty"))
    assert res.exit_code == 2
    assert "no manifest.json" in res.output


def test_report_of_missing_dir(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "does not exist" in res.output


def test_list_shows_registries():
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0, res.output
    for name in ("robogen/PickPlace-v0", "gymnasium/Hopper-v5", "lighting", "object_pose", "sb3:"):
        assert name in res.output
    import importlib.util
    from importlib.metadata import version

    assert f"mujoco {version('mujoco')}" in res.output
    for prefix, module in (("dm_control/", "dm_control"), ("robosuite/", "robosuite")):
        assert prefix in res.output
        if importlib.util.find_spec(module) is None:  # the family names its install command
            assert "not installed" in res.output and "setup-suites" in res.output


def test_list_prints_install_hints_verbatim():
    """An install hint's brackets are text, not rich markup: ``pip install "robogen[fetch]"``
    must not print as ``pip install "robogen"``."""
    from robogen.envs import ENV_FAMILIES

    res = runner.invoke(app, ["list"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    missing = [ENV_FAMILIES.get(p) for p in ENV_FAMILIES.names()
               if ENV_FAMILIES.get(p).missing() is not None]
    if not any("[" in fam.install for fam in missing):
        pytest.skip("every family whose hint has an [extra] is installed here")
    for fam in missing:
        assert f"not installed: {fam.install}" in res.output
    fetch = ENV_FAMILIES.get("gymnasium-robotics")
    if fetch.missing() is not None:
        assert 'pip install "robogen[fetch]"' in res.output


CKPT = "robogen/assets/checkpoints/ppo_reacher.zip"
STATS = "robogen/assets/checkpoints/ppo_reacher_vecnormalize.pkl"


def test_wrong_checkpoint_for_env_names_both_spaces(tmp_path):
    out = tmp_path / "run"
    res = _eval(
        "--env",
        "gymnasium/Hopper-v5",
        "--policy",
        f"sb3:{CKPT}",
        "--vecnormalize",
        STATS,
        "--out",
        str(out),
    )
    assert res.exit_code == 2, res.output
    text = _flat(res.output)
    assert "observation space" in text and "(10,)" in text and "(11,)" in text
    assert not out.exists()


def test_missing_normalization_stats_is_an_error(tmp_path):
    out = tmp_path / "run"
    res = _eval("--env", "gymnasium/Reacher-v5", "--policy", f"sb3:{CKPT}", "--out", str(out))
    assert res.exit_code == 2, res.output
    assert "--vecnormalize" in _flat(res.output)
    assert not out.exists()


def test_existing_run_dir_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    res = _eval("--env", "robogen/Reach-v0", "--policy", "expert:reach", "--out", str(out))
    assert res.exit_code == 2
    assert (out / "keep.txt").read_text() == "x"


@pytest.mark.parametrize(
    ("factory", "needle"),
    [("wrong_shape", "returned (1, 3) for a batch of 1"),
     ("first_row_only", "returned (1, 6) for a batch of 2"),
     ("raising_reset", "boom in reset")],
)
def test_broken_python_policy_is_a_setup_error(tmp_path, factory, needle):
    out = tmp_path / "run"
    res = _eval("--env", "robogen/Reach-v0", "--policy",
                f"python:tests/fixtures/faulty_policies.py:{factory}", "--out", str(out))
    assert res.exit_code == 2, res.output
    assert needle in _flat(res.output)
    assert not out.exists()


def test_out_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    res = _eval("--env", "robogen/Reach-v0", "--policy", "random", "--out", str(f))
    assert res.exit_code == 2 and "is a file" in _flat(res.output)


def test_unknown_camera(tmp_path):
    res = _eval("--env", "robogen/Reach-v0", "--policy", "random", "--camera", "nocam",
                "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "'nocam'" in res.output and "front" in res.output


def test_bad_env_kwargs_and_threshold_via_spec(tmp_path):
    spec = tmp_path / "eval.toml"
    spec.write_text('env = "robogen/Reach-v0"\npolicy = "random"\nenv_kwargs = {foo = 1}\n')
    res = _eval("--spec", str(spec), "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "does not accept env_kwargs ['foo']" in _flat(res.output)
    res = _eval("--env", "gymnasium/Hopper-v5", "--policy", "random", "--success-threshold", "nan",
                "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "finite" in _flat(res.output)
    assert not (tmp_path / "r").exists()


def test_resume_rejects_protocol_flags(tmp_path):
    res = _eval("--resume", str(tmp_path), "--episodes", "20")
    assert res.exit_code == 2 and "drop --episodes" in _flat(res.output)


def test_unusable_mujoco_gl_is_exit_2_with_the_fix():
    import os
    import subprocess
    import sys

    env = {**os.environ, "MUJOCO_GL": "bogus"}
    env.pop("PYOPENGL_PLATFORM", None)
    code = "import sys; from robogen.cli import main; sys.argv = ['robogen', 'list']; main()"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "MUJOCO_GL='bogus'" in out.stderr and "MUJOCO_GL=egl" in out.stderr
    assert "Traceback" not in out.stderr


def test_mujoco_warnings_go_to_logging_without_noise_or_log_file(tmp_path):
    import subprocess
    import sys

    code = (
        "import logging, sys, mujoco, gymnasium as gym\n"
        "logging.basicConfig(stream=sys.stdout, format='%(name)s %(message)s')\n"
        "import robogen\n"
        "from robogen._console import route_mujoco_warnings\n"
        "route_mujoco_warnings()\n"
        "gym.make('HalfCheetah-v5')\n"  # its XML raises the settotalmass deprecation
        "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/>"
        "<geom size=\".1\"/></body></worldbody></mujoco>')\n"
        "d = mujoco.MjData(m); d.qvel[0] = float('nan'); mujoco.mj_step(m, d)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "settotalmass" not in out.stdout + out.stderr
    assert "robogen.mujoco MuJoCo: Nan, Inf or huge value in QVEL" in out.stdout
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
