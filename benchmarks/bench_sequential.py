"""Episodes needed for the same paired-gap half-width: fixed-n unpaired, fixed-n paired, sequential.

Not a timed benchmark: it counts episodes and measures coverage. For each
scenario (nominal and perturbed success rates and the per-episode
correlation ``rho`` between the conditions: episode i shares its latent
difficulty with probability ``rho``, as under common random numbers; see
``paired_streams``), ``--streams`` seeded synthetic streams are drawn and
every method aims at the same half-width ``--target`` of the gap interval at
level 95%:

(a) fixed-n unpaired: Newcombe's hybrid score interval of a difference of two
    independent proportions (Newcombe 1998, Stat. Med. 17, method 10), on the
    success counts of the first n episodes of each condition, the perturbed
    condition run on its own independent episodes (an unpaired design);
(b) fixed-n paired: the Agresti-Min adjusted Wald interval of a paired
    difference (Agresti & Min 2005; what ``robogen.stats.intervals.paired_gap``
    uses with few discordant pairs);
(c) sequential paired: the hedged-capital betting confidence sequence of
    Waudby-Smith & Ramdas (2024, JRSS-B 86(1)) (``robogen.stats.anytime``),
    stopped by ``robogen.stats.stopping.StopRule`` (half-width <= target, or the cap), batches of
    ``--batch`` episodes.

For (a) and (b), n is the *oracle* design: the smallest n (step ``--batch``)
whose mean half-width over the streams is <= target at the true rates, which
a user cannot know in advance (the table also prints the n a user must plan
without knowing them: worst case p = 0.5 for (a), Var(d) = 1 for (b)). (c)
needs no such knowledge: it adapts. Coverage is measured for (a) and (b) at
their n, for (c) at its data-dependent stop (the stopping rule itself). As a
warning, (d) shows the coverage of the fixed-n paired interval (b) stopped by
the same rule (peeking every batch): that is what must not be done.

The real part (optional, ``--run RUN_DIR``, repeatable) reads an evaluation
run dir written by ``robogen eval`` (``episodes/*.parquet``), pairs every
perturbed condition with the nominal one by episode index, and resamples the
pairs with replacement into streams of ``--cap`` episodes (the run's own gap is
the truth of the resampled population), then runs the same comparison.

Usage::

    python benchmarks/bench_sequential.py                      # ~2 min on 2 cores
    python benchmarks/bench_sequential.py --streams 200 --run runs/reacher
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from robogen.stats.stopping import StopRule, simulate_stop_rule  # noqa: E402

SCENARIOS = (  # (p_nominal, p_perturbed, rho)
    (0.5, 0.5, 0.8),
    (0.8, 0.8, 0.9),
    (0.8, 0.7, 0.8),
    (0.8, 0.6, 0.8),
    (0.9, 0.6, 0.5),
    (0.7, 0.6, 0.0),
)


def paired_streams(rng: np.random.Generator, s: int, n: int, p_nom: float, p_pert: float,
                   rho: float) -> tuple[np.ndarray, np.ndarray]:
    """(s, n) bool nominal and perturbed outcomes; marginal rates exact, correlation via rho."""
    u, v, w = rng.random((s, n)), rng.random((s, n)), rng.random((s, n))
    return u < p_nom, np.where(w < rho, u < p_pert, v < p_pert)


def wilson(k: np.ndarray, n: int, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized Wilson score interval (same formula as robogen.stats.intervals)."""
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.where(k == 0, 0.0, np.maximum(center - half, 0)), np.where(
        k == n, 1.0, np.minimum(center + half, 1))


def newcombe(nom: np.ndarray, pert: np.ndarray, n: int, z: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe (1998) hybrid score interval of p_nom - p_pert from independent samples."""
    k1, k2 = nom[:, :n].sum(1), pert[:, :n].sum(1)
    p1, p2 = k1 / n, k2 / n
    l1, u1 = wilson(k1, n, z)
    l2, u2 = wilson(k2, n, z)
    d = p1 - p2
    return d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + np.sqrt((u1 - p1) ** 2 +
                                                                      (p2 - l2) ** 2)


def agresti_min(nom: np.ndarray, pert: np.ndarray, n: int, z: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized Agresti-Min interval (robogen.stats.intervals.agresti_min_interval)."""
    n10 = (nom[:, :n] & ~pert[:, :n]).sum(1)
    n01 = (~nom[:, :n] & pert[:, :n]).sum(1)
    m = n + 2.0
    p10, p01 = (n10 + 0.5) / m, (n01 + 0.5) / m
    d = p10 - p01
    se = np.sqrt(np.maximum(p10 + p01 - d * d, 0) / m)
    return np.maximum(-1, d - z * se), np.minimum(1, d + z * se)


def oracle_n(interval, nom, pert, target, batch, cap, z):  # noqa: ANN001, ANN201 - script
    """Smallest n (multiple of batch) whose mean half-width over the streams is <= target."""

    def mean_half(k: int) -> float:
        lo, hi = interval(nom, pert, k * batch, z)
        return float(np.mean(hi - lo)) / 2

    lo_k, hi_k = 1, cap // batch
    if mean_half(hi_k) > target:
        return None
    while lo_k < hi_k:  # the mean half-width falls with n: bisection on the batch grid
        mid = (lo_k + hi_k) // 2
        if mean_half(mid) <= target:
            hi_k = mid
        else:
            lo_k = mid + 1
    return lo_k * batch


def peeking(nom, pert, target, batch, cap, z):  # noqa: ANN001, ANN201 - script
    """Fixed-n paired interval recomputed every batch, stopped at the target width."""
    s = nom.shape[0]
    stop_lo, stop_hi = np.full(s, np.nan), np.full(s, np.nan)
    ns = np.full(s, cap)
    open_ = np.ones(s, bool)
    for n in range(batch, cap + 1, batch):
        lo, hi = agresti_min(nom, pert, n, z)
        hit = open_ & (((hi - lo) / 2 <= target) | (n == cap))
        stop_lo[hit], stop_hi[hit], ns[hit] = lo[hit], hi[hit], n
        open_ &= ~hit
        if not open_.any():
            break
    return ns, stop_lo, stop_hi


def compare(nom: np.ndarray, pert: np.ndarray, pert_indep: np.ndarray, true_gap: float,
            args: argparse.Namespace) -> dict[str, float]:
    """All methods on (S, cap) outcome streams: paired, and perturbed drawn independently."""
    z = float(stats.norm.ppf(0.975))
    res: dict[str, float] = {}
    for key, fn, other in (("a", newcombe, pert_indep), ("b", agresti_min, pert)):
        n = oracle_n(fn, nom, other, args.target, args.batch, args.cap, z)
        res[f"{key}_n"] = math.nan if n is None else float(n)
        if n is not None:
            lo, hi = fn(nom, other, n, z)
            res[f"{key}_cover"] = float(np.mean((lo <= true_gap) & (true_gap <= hi)))
        else:
            res[f"{key}_cover"] = math.nan
    rule = StopRule(target_halfwidth=args.target, max_episodes=args.cap, batch_size=args.batch)
    d = nom.astype(np.float64) - pert.astype(np.float64)
    n, reasons, lo, hi = simulate_stop_rule(d, rule)
    res["c_n"] = float(np.mean(n))
    res["c_cover"] = float(np.mean((lo <= true_gap) & (true_gap <= hi)))
    res["c_cap"] = float(np.mean([r == "cap" for r in reasons]))
    nd, lo, hi = peeking(nom, pert, args.target, args.batch, args.cap, z)
    res["d_n"] = float(np.mean(nd))
    res["d_cover"] = float(np.mean((lo <= true_gap) & (true_gap <= hi)))
    return res


def real_streams(run: Path, s: int, cap: int, seed: int
                 ) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray, float]]:
    """Resampled paired streams of every perturbed condition of a run dir against nominal."""
    from robogen.rollout.store import ResultStore

    df = ResultStore.open(run).load_frame()
    if "cause" in df:  # infrastructure failures are not policy outcomes
        df = df[~df["cause"].fillna("").astype(str).str.startswith("infra")]
    by = {c: g.set_index("episode_index")["success"].astype(bool)
          for c, g in df.groupby("condition")}
    if "nominal" not in by:
        raise SystemExit(f"{run}: no 'nominal' condition among {sorted(by)}")
    out = []
    rng = np.random.default_rng(seed)
    for cond, y in by.items():
        if cond == "nominal":
            continue
        common = by["nominal"].index.intersection(y.index)
        a = by["nominal"].loc[common].to_numpy()
        b = y.loc[common].to_numpy()
        idx = rng.integers(0, len(common), size=(s, cap))
        other = rng.integers(0, len(common), size=(s, cap))  # an unpaired design's episodes
        out.append((f"{run.name}: {cond} ({len(common)} pairs, {a.mean():.2f} -> "
                    f"{b.mean():.2f}, rho {np.corrcoef(a, b)[0, 1]:.2f})" if a.std() * b.std()
                    else f"{run.name}: {cond} ({len(common)} pairs, {a.mean():.2f} -> "
                    f"{b.mean():.2f})", a[idx], b[idx], b[other], float(a.mean() - b.mean())))
    return out


def main() -> None:
    """Run every scenario and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--target", type=float, default=0.05, help="half-width of the gap interval")
    ap.add_argument("--cap", type=int, default=3000, help="max episodes per condition")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run", type=Path, action="append", default=[],
                    help="robogen eval run dir(s) to resample (optional)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    z = float(stats.norm.ppf(0.975))
    rows = []
    for p_nom, p_pert, rho in SCENARIOS:
        rng = np.random.default_rng(args.seed)
        nom, pert = paired_streams(rng, args.streams, args.cap, p_nom, p_pert, rho)
        _, indep = paired_streams(rng, args.streams, args.cap, p_nom, p_pert, 0.0)
        rows.append((f"p {p_nom:.1f} -> {p_pert:.1f}, rho {rho:.1f}",
                     compare(nom, pert, indep, p_nom - p_pert, args)))
        print(f"  {rows[-1][0]} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr,
              flush=True)
    for run in args.run:
        for label, nom, pert, indep, gap in real_streams(run, args.streams, args.cap,
                                                          args.seed):
            rows.append((label, compare(nom, pert, indep, gap, args)))
    print(f"\nepisodes per condition to reach a 95% gap interval half-width <= {args.target} "
          f"({args.streams} streams each; cap {args.cap}, batches of {args.batch})")
    print("(a) fixed-n unpaired Newcombe, (b) fixed-n paired Agresti-Min: oracle n (knows the "
          "rates); (c) sequential paired betting CS (Waudby-Smith & Ramdas 2024): mean n at "
          "its stop; (d) = (b) stopped by peeking every batch (invalid)")
    hdr = (f"{'scenario':<44} {'n (a)':>6} {'n (b)':>6} {'n (c)':>7} {'c/a':>5} {'c/b':>5}  "
           f"{'cover a':>7} {'cover b':>7} {'cover c':>7} {'cover d':>7} {'c at cap':>8}")
    print(hdr)
    for label, r in rows:
        print(f"{label:<44} {r['a_n']:>6.0f} {r['b_n']:>6.0f} {r['c_n']:>7.1f} "
              f"{r['c_n'] / r['a_n']:>5.2f} {r['c_n'] / r['b_n']:>5.2f}  {r['a_cover']:>7.3f} "
              f"{r['b_cover']:>7.3f} {r['c_cover']:>7.3f} {r['d_cover']:>7.3f} "
              f"{r['c_cap']:>8.2f}")
    worst_a = math.ceil(z * z * 0.5 / args.target ** 2)
    worst_b = math.ceil(z * z * 1.0 / args.target ** 2)
    print(f"\nplanned without knowing the rates (worst case), a fixed-n design needs "
          f"{worst_a} episodes (a, p = 0.5) or {worst_b} (b, Var(d) = 1) per condition.")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
