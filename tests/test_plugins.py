"""Plug-ins reach every worker (issue 25): a family, a policy scheme and an axis registered by a
module outside robogen (``tests/fixtures/plugins/toy_robogen_plugin.py``) run through the real
``robogen`` executable on the serial backend and on a real embedded Ray cluster with identical
episodes; the manifest records the plug-in and a resume imports it; a worker that cannot import
it, an unimportable ``--plugin`` and a script-registered entry on Ray are set-up errors (exit 2,
nothing written); an installed ``robogen.plugins`` entry point loads without ``--plugin``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robogen.errors import PluginError
from robogen.plugins import (
    PLUGIN_IMPORT_FAILED,
    PLUGIN_RAISED,
    SCRIPT_PLUGIN,
    SCRIPT_RESUME,
    import_plugins,
    is_plugin_module,
)
from robogen.rollout.ray_backend import PLUGIN_ON_WORKER
from robogen.rollout.store import ResultStore

PLUGIN_DIR = Path(__file__).resolve().parent / "fixtures" / "plugins"
PLUGIN = "toy_robogen_plugin"
ROBOGEN = str(Path(sys.executable).with_name("robogen"))
EVAL = ["eval", "--env", "toyplug/Reach-v0", "--policy", "toyplug_gain:2",
        "--axes", "toyplug_damping,lighting", "--severities", "1", "--episodes", "4",
        "--batch-size", "2", "--max-steps", "20", "--videos", "0", "--seed", "3"]


def _env(pythonpath: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROBOGEN_PLUGINS")}
    env.pop("RAY_ADDRESS", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def _run(args: list[str], cwd: Path, pythonpath: str | None = str(PLUGIN_DIR),
         exe: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(exe or [ROBOGEN]), *args], cwd=cwd, env=_env(pythonpath),
                          capture_output=True, text=True, timeout=300)


def _episodes(run_dir: Path) -> list:
    results = ResultStore.open(run_dir).load_results()
    return sorted((dataclasses.replace(r, wall_time_s=0.0) for r in results),
                  key=lambda r: (r.condition, r.episode_index))


def test_is_plugin_module() -> None:
    assert is_plugin_module("my_pkg.plugin") and is_plugin_module("robogenx")
    assert not any(is_plugin_module(m) for m in ("", "robogen", "robogen.perturbations.camera"))


def test_import_plugins_names_the_module_and_its_error() -> None:
    with pytest.raises(PluginError) as e:
        import_plugins(["robogen_no_such_plugin_module"], why=" that the run uses")
    assert e.value.module == "robogen_no_such_plugin_module"
    assert str(e.value) == PLUGIN_IMPORT_FAILED.format(
        module="robogen_no_such_plugin_module", why=" that the run uses",
        error="ModuleNotFoundError: No module named 'robogen_no_such_plugin_module'")
    assert isinstance(e.value, ImportError)
    assert import_plugins(["json", "__main__", "", "json"]) == ("json",)


def test_a_plugin_that_raises_is_named_as_raising_not_missing(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    (tmp_path / "robogen_raising_plugin.py").write_text("raise ValueError('broken on purpose')\n")
    (tmp_path / "robogen_needs_missing.py").write_text("import robogen_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as e:
        import_plugins(["robogen_raising_plugin"])
    assert str(e.value) == PLUGIN_RAISED.format(
        module="robogen_raising_plugin", why="", error="ValueError: broken on purpose")
    with pytest.raises(PluginError) as e:  # found, but its own import fails: it raised
        import_plugins(["robogen_needs_missing"])
    assert "raised while importing (ModuleNotFoundError" in str(e.value)


def test_a_plugin_runs_on_serial_and_on_ray_with_identical_episodes(tmp_path: Path) -> None:
    serial = _run(["--plugin", PLUGIN, *EVAL, "--backend", "serial", "--out", "s"], tmp_path)
    assert serial.returncode == 0, serial.stdout + serial.stderr
    ray = _run(["--plugin", PLUGIN, *EVAL, "--backend", "ray", "--workers", "2", "--out", "r"],
               tmp_path)
    assert ray.returncode == 0, ray.stdout + ray.stderr
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["plugins"] == [PLUGIN]
    a, b = _episodes(tmp_path / "s"), _episodes(tmp_path / "r")
    assert len(a) == 4 * 4  # nominal, two axes, combined
    assert a == b
    damped = {r.episode_index: r.episode_return for r in a if r.condition == "toyplug_damping@1"}
    nominal = {r.episode_index: r.episode_return for r in a if r.condition == "nominal"}
    assert damped != nominal  # the plug-in's axis acted on the plug-in's family
    applied = [json.loads(r.perturbations_json) for r in a if r.condition == "toyplug_damping@1"]
    assert all("scale" in json.dumps(x) for x in applied), applied
    assert all(r.changed_axes == ("toyplug_damping",) for r in a
               if r.condition == "toyplug_damping@1")


def test_resume_imports_the_plugins_its_manifest_lists(tmp_path: Path) -> None:
    first = _run(["--plugin", PLUGIN, *EVAL, "--backend", "serial", "--out", "s"], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    before = _episodes(tmp_path / "s")
    parts = sorted((tmp_path / "s" / "episodes").glob("unit-*.parquet"))
    parts[-1].unlink()
    parts[0].unlink()
    resumed = _run(["eval", "--resume", "s", "--backend", "serial"], tmp_path)  # no --plugin
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _episodes(tmp_path / "s") == before
    gone = _run(["eval", "--resume", "s", "--backend", "serial"], tmp_path, pythonpath=None)
    assert gone.returncode == 2
    assert f"cannot import the plug-in module {PLUGIN!r} that the run in 's' was made with" \
        in " ".join(gone.stderr.split())


def test_a_worker_without_the_plugin_is_a_setup_error_and_nothing_is_written(
        tmp_path: Path) -> None:
    """The driver imports the plug-in from a sys.path edit (not PYTHONPATH, not the working
    directory): Ray workers cannot import it."""
    driver = (f"import sys; sys.path.insert(0, {str(PLUGIN_DIR)!r}); "
              "from robogen.cli import main; main()")
    res = _run(["--plugin", PLUGIN, *EVAL, "--backend", "ray", "--workers", "1", "--out", "r"],
               tmp_path, pythonpath=None, exe=[sys.executable, "-c", driver])
    assert res.returncode == 2, res.stdout + res.stderr
    text = " ".join(res.stderr.split())
    head = PLUGIN_ON_WORKER.split("{node}")[1].split("{error}")[0].format(module=PLUGIN)
    assert head in text, text
    assert "No module named 'toy_robogen_plugin'" in text
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


def test_an_unimportable_plugin_option_exits_2(tmp_path: Path) -> None:
    res = _run(["--plugin", "robogen_no_such_plugin_module", "list"], tmp_path)
    assert res.returncode == 2
    assert "cannot import the plug-in module 'robogen_no_such_plugin_module'" in " ".join(
        res.stderr.split())


def test_a_script_registered_axis_on_ray_is_refused_before_any_work(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from robogen.configs import load_eval_config
        from robogen.errors import RobogenError
        from robogen.perturbations import register_axis
        sys.path.insert(0, {str(PLUGIN_DIR)!r})
        from toy_robogen_plugin import DampingAxis

        @register_axis("script_damping")
        class ScriptAxis(DampingAxis):
            pass

        from robogen.runs.evaluation import evaluate
        cfg = load_eval_config(None, env="robogen/Reach-v0", policy="random:0",
                               axes=["script_damping"], severities=[1.0], episodes=2,
                               max_steps=5, videos=0, backend="ray", out="r")
        try:
            evaluate(cfg)
        except RobogenError as e:
            print(e)
            sys.exit(2)
    """))
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(None),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    assert SCRIPT_PLUGIN in res.stdout
    assert not (tmp_path / "r").exists()
    # serially the script's run works; resuming it where nothing registers the axis says why
    script.write_text(script.read_text().replace('backend="ray"', 'backend="serial"'))
    ok = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(None),
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (tmp_path / "r" / "episodes" / "unit-000000.parquet").unlink()
    res = _run(["eval", "--resume", "r", "--backend", "serial"], tmp_path, pythonpath=None)
    assert res.returncode == 2, res.stdout + res.stderr
    text = " ".join(res.stderr.split())
    assert SCRIPT_RESUME.split("{error}")[1].split(":")[0] in text, text


def test_an_installed_entry_point_loads_without_the_option(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "toy_robogen_plugin_dist-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-robogen-plugin-dist\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[robogen.plugins]\ntoy = {PLUGIN}\n")
    path = os.pathsep.join([str(site), str(PLUGIN_DIR)])
    listed = _run(["list"], tmp_path, pythonpath=path)
    assert listed.returncode == 0, listed.stderr
    assert "toyplug/Reach-v0" in listed.stdout and "toyplug_damping" in listed.stdout
    assert "toyplug_gain:GAIN" in listed.stdout
    ran = _run([*EVAL, "--backend", "serial", "--out", "s"], tmp_path, pythonpath=path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (dist / "entry_points.txt").write_text("[robogen.plugins]\nbroken = robogen_no_such_mod\n")
    warned = _run(["list"], tmp_path, pythonpath=path)
    assert warned.returncode == 0
    assert "the plug-in entry point 'broken' (robogen_no_such_mod) of toy-robogen-plugin-dist " \
        "failed to load, skipped" in " ".join(warned.stderr.split())
