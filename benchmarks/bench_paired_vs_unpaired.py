"""Episodes the regression gate needs for a decision: paired test against unpaired test.

On the *same* outcomes, grow the number of episodes per condition ``n`` along a
grid and record the first ``n`` at which each test reaches the right decision
(``pass`` for a candidate as good as the baseline, ``regression`` for a
degraded one), at one-sided level alpha with margin m (one condition, so no
Holm correction):

* paired: :func:`robogen.check.noninferiority.paired_noninferiority` on the
  first n episode pairs (same initial states in both runs);
* unpaired: :func:`robogen.check.noninferiority.unpaired_noninferiority` on
  the success counts of the same first n episodes of each run.

A stream that does not decide within the grid counts as its largest n
(censored; the table shows the fraction decided). The ratio is mean n
unpaired / mean n paired (> 1: pairing needs fewer episodes).

Part 1 uses synthetic streams (episode difficulty shared by both policies
with probability ``rho``, see tests/check/check_streams.py). Part 2 (skip
with ``--no-real``) uses real Reach runs: the scripted expert as baseline
and, as candidate, the expert with nominal-arm kinematics baked in
(tests/check/degraded_policies.py), which equals the expert except under the
embodiment axis; runs are cached in ``--runs``.

Usage::

    python benchmarks/bench_paired_vs_unpaired.py
    python benchmarks/bench_paired_vs_unpaired.py --streams 200 --no-real
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "check"))
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from robogen.check.noninferiority import (  # noqa: E402
    paired_noninferiority,
    unpaired_noninferiority,
)

GRID = (10, 20, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300, 400)


def decided(base: np.ndarray, cand: np.ndarray, n: int, margin: float, alpha: float,
            want: str, paired: bool) -> bool:
    """Whether the test on the first n episodes reaches ``want`` (pass / regression)."""
    yb, yc = base[:n], cand[:n]
    if paired:
        b, c = int(np.sum(yc & ~yb)), int(np.sum(~yc & yb))
        if want == "pass":
            return paired_noninferiority(b, c, n, margin).p_value <= alpha
        return paired_noninferiority(c, b, n, -margin).p_value <= alpha
    xb, xc = int(yb.sum()), int(yc.sum())
    if want == "pass":
        return unpaired_noninferiority(xc, n, xb, n, margin).p_value <= alpha
    return unpaired_noninferiority(xb, n, xc, n, -margin).p_value <= alpha


def first_n(base: np.ndarray, cand: np.ndarray, grid: tuple[int, ...], margin: float,
            alpha: float, want: str, paired: bool) -> tuple[int, bool]:
    for n in grid:
        if n <= base.size and decided(base, cand, n, margin, alpha, want, paired):
            return n, True
    return min(grid[-1], base.size), False


def compare_streams(pairs: list[tuple[np.ndarray, np.ndarray]], grid: tuple[int, ...],
                    margin: float, alpha: float, want: str) -> dict[str, float]:
    res = {}
    for name, paired in (("paired", True), ("unpaired", False)):
        ns, ok = zip(*(first_n(b, c, grid, margin, alpha, want, paired) for b, c in pairs),
                     strict=True)
        res[f"{name}_n"] = float(np.mean(ns))
        res[f"{name}_decided"] = float(np.mean(ok))
    res["ratio"] = res["unpaired_n"] / res["paired_n"]
    return res


def synthetic(streams: int, seed: int, margin: float, alpha: float) -> list[tuple[str, dict]]:
    from check_streams import paired_outcomes

    rows = []
    scenarios = [
        ("as good, p=0.9, rho=0.5", 0.9, 0.9, 0.5, "pass"),
        ("as good, p=0.9, rho=0.8", 0.9, 0.9, 0.8, "pass"),
        ("as good, p=0.9, rho=0.95", 0.9, 0.9, 0.95, "pass"),
        ("worse by 0.2, p=0.9, rho=0.8", 0.9, 0.7, 0.8, "regression"),
        ("worse by 0.2, p=0.6, rho=0.8", 0.6, 0.4, 0.8, "regression"),
    ]
    for label, pb, pc, rho, want in scenarios:
        rng = np.random.default_rng(seed)
        pairs = [paired_outcomes(rng, GRID[-1], pb, pc, rho) for _ in range(streams)]
        rows.append((f"synthetic: {label} -> {want}", compare_streams(pairs, GRID, margin,
                                                                      alpha, want)))
    return rows


def real(runs: Path, episodes: int, margin: float, alpha: float) -> list[tuple[str, dict]]:
    from robogen.check.inputs import load_saved
    from robogen.configs import load_eval_config
    from robogen.rollout.runner import evaluate

    fixtures = ROOT / "tests" / "check" / "degraded_policies.py"
    sides = {"baseline": "expert:reach",
             "candidate": f"python:{fixtures}:nominal_kinematics_reach"}
    data = {}
    for side, policy in sides.items():
        out = runs / f"{side}-{episodes}"
        if not (out / "report.json").is_file():
            print(f"evaluating {policy} ({3 * episodes} episodes) into {out} ...", flush=True)
            cfg = load_eval_config(None, env="robogen/Reach-v0", policy=policy,
                                   axes=["physics", "embodiment"], severities=[0.5, 1.0],
                                   episodes=episodes, seed=0, combined=False,
                                   backend="serial", videos=0, out=out)
            evaluate(cfg)
        data[side] = load_saved(out)
    grid = tuple(n for n in GRID if n < episodes) + (episodes,)
    rows = []
    for cond, want in (("nominal", "pass"), ("physics@0.5", "pass"), ("physics@1", "pass"),
                       ("embodiment@0.5", "regression"), ("embodiment@1", "regression")):
        b = data["baseline"].episodes[cond].success
        c = data["candidate"].episodes[cond].success
        rows.append((f"Reach run: {cond} -> {want} (success {b.mean():.2f} -> {c.mean():.2f})",
                     compare_streams([(b, c)], grid, margin, alpha, want)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=100, help="synthetic streams per scenario")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--no-real", action="store_true", help="skip the real Reach runs")
    ap.add_argument("--episodes", type=int, default=200, help="real runs: episodes per condition")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "bench-paired")
    args = ap.parse_args()
    rows = synthetic(args.streams, args.seed, args.margin, args.alpha)
    if not args.no_real:
        rows += real(args.runs, args.episodes, args.margin, args.alpha)
    print(f"\nfirst n (episodes per condition and policy) reaching the decision; margin "
          f"{args.margin}, alpha {args.alpha}, grid {GRID[0]}..{GRID[-1]}")
    print(f"{'scenario':<66} {'paired n':>9} {'unpaired n':>11} {'ratio':>6}  decided p/u")
    ratios = []
    for label, r in rows:
        ratios.append(r["ratio"])
        print(f"{label:<66} {r['paired_n']:>9.1f} {r['unpaired_n']:>11.1f} {r['ratio']:>6.2f}  "
              f"{r['paired_decided']:.2f}/{r['unpaired_decided']:.2f}")
    gmean = float(np.exp(np.mean(np.log(ratios))))
    print(f"\nratio of episodes needed, unpaired / paired: geometric mean {gmean:.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}); censored streams count as the "
          "largest n, so ratios are lower bounds where unpaired rarely decides")


if __name__ == "__main__":
    main()
