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
with ``--no-real``) uses real runs on ``gymnasium/Reacher-v5`` (nominal,
embodiment and object_pose at severities 0.5 and 1): the shipped PPO
checkpoint as baseline and, as a close but different candidate, the same
checkpoint with N(0, 0.05^2) action noise (tests/check/degraded_policies.py);
the target decision per condition is the one the paired test reaches on all
episodes (undecided conditions are left out), and the first n is averaged over
``--resamples`` resampled episode orders (pairs kept together). Runs are
cached in ``--runs``.
(The built-in tasks' scripted experts succeed in every episode, so they
cannot show a pairing gain: with no failures there is nothing to pair.)

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


def real(runs: Path, episodes: int, margin: float, alpha: float, resamples: int
         ) -> list[tuple[str, dict]]:
    from robogen.check.inputs import load_saved
    from robogen.check.noninferiority import paired_noninferiority as ni
    from robogen.configs import load_eval_config
    from robogen.runs.evaluation import evaluate

    ckpt = ROOT / "robogen" / "assets" / "checkpoints"
    fixtures = ROOT / "tests" / "check" / "degraded_policies.py"
    sides = {"baseline": f"sb3:{ckpt / 'ppo_reacher.zip'}",
             "candidate": f"python:{fixtures}:noisy_ppo_reacher"}
    data = {}
    for side, policy in sides.items():
        out = runs / f"{side}-{episodes}"
        if not (out / "report.json").is_file():
            print(f"evaluating {policy} ({5 * episodes} episodes) into {out} ...", flush=True)
            cfg = load_eval_config(
                None, env="gymnasium/Reacher-v5", policy=policy,
                vecnormalize=str(ckpt / "ppo_reacher_vecnormalize.pkl"),
                axes=["embodiment", "object_pose"], severities=[0.5, 1.0], episodes=episodes,
                seed=0, combined=False, backend="serial", videos=0, out=out,
            )
            evaluate(cfg)
        data[side] = load_saved(out)
    grid = tuple(n for n in GRID if n < episodes) + (episodes,)
    rows = []
    for cond in data["baseline"].episodes:
        b = data["baseline"].episodes[cond].success
        c = data["candidate"].episodes[cond].success
        nb, nc = int(np.sum(c & ~b)), int(np.sum(~c & b))
        # the decision is the one the paired test reaches on all episodes
        if ni(nb, nc, b.size, margin).p_value <= alpha:
            want = "pass"
        elif ni(nc, nb, b.size, -margin).p_value <= alpha:
            want = "regression"
        else:
            print(f"Reacher {cond}: undecided on {b.size} paired episodes (success "
                  f"{b.mean():.2f} -> {c.mean():.2f}); left out")
            continue
        # episode orders resampled with replacement (pairs kept): the mean first n is stable
        rng = np.random.default_rng(0)
        orders = [rng.integers(0, b.size, b.size) for _ in range(resamples)]
        streams = [(b[o], c[o]) for o in orders]
        rows.append((f"Reacher PPO vs noisy PPO: {cond} -> {want} ({b.mean():.2f} -> "
                     f"{c.mean():.2f})", compare_streams(streams, grid, margin, alpha, want)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=100, help="synthetic streams per scenario")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--no-real", action="store_true", help="skip the real Reacher runs")
    ap.add_argument("--episodes", type=int, default=300, help="real runs: episodes per condition")
    ap.add_argument("--real-margin", type=float, default=0.15, help="margin of the real part")
    ap.add_argument("--resamples", type=int, default=30,
                    help="real runs: resampled episode orders per condition")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "bench-paired")
    args = ap.parse_args()
    rows = synthetic(args.streams, args.seed, args.margin, args.alpha)
    if not args.no_real:
        rows += real(args.runs, args.episodes, args.real_margin, args.alpha, args.resamples)
    print(f"\nfirst n (episodes per condition and policy) reaching the decision; margin "
          f"{args.margin} (real runs {args.real_margin}), alpha {args.alpha}, grid "
          f"{GRID[0]}..{GRID[-1]}")
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
