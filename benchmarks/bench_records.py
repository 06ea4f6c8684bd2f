"""Time of loading records: a run dir of N episodes, their dicts, a report.json and a manifest.

Writes a synthetic run dir (``--episodes`` episodes of ``--conditions`` conditions, one
Parquet part per 50 episodes) to a temporary directory, then times, best of ``--repeat``,
in CPU time of the process (``time.process_time``: on a shared machine wall time mostly
measures the neighbours):

* ``store``: ``ResultStore.load_results()`` (Parquet read + ``EpisodeResult.from_dict``);
* ``episodes``: ``EpisodeResult.from_dict`` of the same rows alone (decoding only);
* ``report``: ``Report.from_dict`` of the report built from those episodes (JSON parsed);
* ``manifest``: ``EvalManifest.from_dict`` of its manifest.

Run it against two checkouts to compare serializers::

    PYTHONPATH=/path/to/old python benchmarks/bench_records.py
    PYTHONPATH=$PWD python benchmarks/bench_records.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from robogen.reports.build import build_report
from robogen.reports.records import Report
from robogen.rollout.plan import build_conditions
from robogen.rollout.store import ResultStore
from robogen.types import EpisodeResult, EvalManifest, RenderSettings, to_dict


def _manifest(n_cond: int, n_eps: int) -> EvalManifest:
    axes = [f"axis{k}" for k in range(max(1, n_cond - 1))]
    return EvalManifest(
        schema_version=1, env_id="robogen/Reach-v0", policy="random", vecnormalize=None,
        obs_mode="state", axes=tuple(axes), severities=(1.0,), splits=(), combined=False,
        n_episodes=n_eps, seed=0, max_steps=10, batch_size=50, success_threshold=None,
        conditions=build_conditions(axes, [1.0]), render=RenderSettings(),
    )


def _results(m: EvalManifest) -> list[EpisodeResult]:
    out = []
    for c in m.conditions:
        for i in range(m.n_episodes):
            ok = (i * 7 + len(c.name)) % 3 != 0
            out.append(EpisodeResult(
                env_id=m.env_id, policy_id=m.policy, condition=c.name, axes=c.axes,
                severity=c.severity, split=c.split, episode_index=i, seed=1000 + i,
                episode_return=0.5 * i, length_steps=10, success=ok,
                cause=None if ok else "timeout", error=None,
                perturbations_json='[{"axis": "x", "values": {"scale": 1.5}}]',
                changed_axes=c.axes, wall_time_s=0.01, unit_id=0,
            ))
    return out


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--conditions", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    m = _manifest(a.conditions, a.episodes // a.conditions)
    results = _results(m)
    with tempfile.TemporaryDirectory() as tmp:
        store = ResultStore.create(Path(tmp) / "run", m)
        for u in range(0, len(results), 50):
            store.write_unit(u // 50, results[u:u + 50])
        rows = [to_dict(r) for r in results]
        report_text = json.dumps(build_report(results, m, n_boot=200).to_dict())
        manifest_text = json.dumps(to_dict(m))
        times = {
            "store": _best(store.load_results, a.repeat),
            "episodes": _best(lambda: [EpisodeResult.from_dict(r) for r in rows], a.repeat),
            "report": _best(lambda: Report.from_dict(json.loads(report_text)), a.repeat),
            "manifest": _best(lambda: EvalManifest.from_dict(json.loads(manifest_text)),
                              a.repeat),
        }
        assert store.load_results() == results
    print(f"{len(results)} episodes, {len(m.conditions)} conditions, best of {a.repeat} "
          "(CPU time):")
    for k, v in times.items():
        print(f"  {k:9s} {v * 1e3:9.2f} ms")


if __name__ == "__main__":
    main()
