"""Does the greedy data-collection plan beat an equal split? A check on a built-in task.

Not a timed test: a script that runs the whole method once and prints what it finds.

1. Measure factored scaling curves with the scale loop (:func:`robogen.scaling.loop.run_scale`):
   base nominal demonstrations plus ``x`` demonstrations per factor, BC per point, evaluated on
   the factor's held-out ``test`` values.
2. Plan the same budget with every method of ``--methods`` (default: ``greedy``, ``fsc_topk``,
   ``worst_first`` and ``equal``), and print the planner's own difference from the equal
   split with its procedure-bootstrap interval
   (:func:`robogen.scaling.planner.compare_with_equal`).
3. For each plan, collect its demonstrations (on top of the base data, factor values from the
   ``train`` split, same demonstration streams as the curves), train ``--final-seeds`` BC
   models on base + the plan's demonstrations of every factor, and evaluate each on the
   ``test`` condition of every factor in the plan with a fresh evaluation seed (initial states
   and factor draws the curves never saw; the same for both plans, so outcomes are paired).
   With ``--rounds R`` the closed loop (:func:`robogen.scaling.adaptive.run_adaptive`,
   ``robogen plan --rounds``) also spends the budget in R rounds on the same scale run, and
   its final allocation is validated like the one-shot plans (no planner interval for it).
4. Print the success rate of each plan with its Wilson interval and its measured difference
   from ``equal`` with a paired bootstrap interval over episodes
   (:func:`robogen.stats.intervals.paired_gap`), next to the planner's prediction; write
   ``OUT/validate_plan.json``.

Usage::

    python benchmarks/validate_plan.py                       # Reach, ~5-10 min on 2 cores
    python benchmarks/validate_plan.py --budget 60 --factors object_pose,physics
    # factors whose curves differ (docs/benchmarks.md), with a 3-round closed loop:
    python benchmarks/validate_plan.py --base 40 --points 0,20,60 --eval-episodes 30 \
        --n-boot 200 --budget 30 --final-seeds 4 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402


def main() -> None:
    """Parse arguments, run the check, print and save the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="robogen/Reach-v0")
    ap.add_argument("--factors", default="object_pose,physics,embodiment")
    ap.add_argument("--points", default="0,10,20,40", help="curve points (demos added)")
    ap.add_argument("--base", type=int, default=20, help="nominal base demonstrations")
    ap.add_argument("--seeds", type=int, default=2, help="training seeds per curve point")
    ap.add_argument("--eval-episodes", type=int, default=40, help="episodes per curve point")
    ap.add_argument("--budget", type=float, default=60, help="demonstrations to allocate")
    ap.add_argument("--methods", default="greedy,fsc_topk,worst_first",
                    help="plans under test (each is compared with the equal split)")
    ap.add_argument("--severity", type=float, default=1.0, help="severity of the factors")
    ap.add_argument("--final-seeds", type=int, default=3, help="training seeds per plan")
    ap.add_argument("--final-episodes", type=int, default=50,
                    help="evaluation episodes per factor and seed")
    ap.add_argument("--steps", type=int, default=None, help="BC steps (default: the loop's)")
    ap.add_argument("--n-boot", type=int, default=500, help="bootstrap refits per curve")
    ap.add_argument("--rounds", type=int, default=0,
                    help="also run the closed loop (robogen plan --rounds) with --loop-method "
                         "in this many rounds and validate its final allocation (0: off)")
    ap.add_argument("--loop-method", default="greedy", help="planning method of the loop")
    ap.add_argument("--seed", type=int, default=0, help="run seed of the curves")
    ap.add_argument("--out", type=Path, default=Path("runs/validate_plan"))
    args = ap.parse_args()

    from robogen.scaling import loop
    from robogen.scaling.curves import load_curves
    from robogen.scaling.planner import compare_with_equal, plan_budget

    t0 = time.perf_counter()
    factors = tuple(f.strip() for f in args.factors.split(",") if f.strip())
    overrides = {} if args.steps is None else {"steps": args.steps}
    config = loop.ScaleConfig(
        task=args.task, factors=factors, points=loop.parse_points(args.points), base=args.base,
        eval_episodes=args.eval_episodes, seeds=args.seeds, seed=args.seed,
        severity=args.severity, n_boot=args.n_boot,
        bc=loop.default_bc_config("state", **overrides))
    print(f"[1/4] scaling curves of {', '.join(factors)} on {args.task} "
          f"(base {args.base}, points {list(config.points)}, {args.seeds} seeds)", flush=True)
    scale = loop.run_scale(config, args.out / "scale", progress=_printer())
    curves = load_curves(scale.curves_path, task=args.task)
    for name, c in curves.curves.items():
        pts = ", ".join(f"x={p.x}: {p.successes}/{p.n}" for p in c.points)
        print(f"  {name}: a={c.fit.a:.3g} b={c.fit.b:.3g} n0={c.fit.n0:.3g}  [{pts}]")

    methods = [m.strip() for m in args.methods.split(",") if m.strip() and m.strip() != "equal"]
    plans = {m: plan_budget(curves, args.budget, method=m) for m in [*methods, "equal"]}
    versus = compare_with_equal(curves, args.budget, methods)
    print(f"[2/4] plans for a budget of {args.budget:g} demonstrations")
    for plan in plans.values():
        v = versus.get(plan.method)
        vs = "" if v is None else (f"  vs equal {v.difference:+.3f} [{v.low:+.3f}, "
                                   f"{v.high:+.3f}]")
        print(f"  {plan.method}: {plan.demos}  predicted mean success "
              f"{plan.mean_success:.3f}{vs}")

    if args.rounds:
        from robogen.scaling.adaptive import AdaptiveConfig, run_adaptive

        name = f"{args.loop_method}-{args.rounds}rounds"
        print(f"[2b/4] closed loop: {name}", flush=True)
        res = run_adaptive(args.out / "scale", AdaptiveConfig(args.budget, args.rounds,
                                                              args.loop_method),
                           out=args.out / name, progress=_printer())
        for r in res.rounds:
            print(f"  round {r.round}: +{r.added} -> {r.demos}; predicted "
                  f"{r.predicted_planned:.3f} before refit, {r.predicted:.3f} after; "
                  f"measured {({n: round(v, 3) for n, v in r.measured.items()})}")
        plans[name] = res.final
        print(f"  {name}: {res.final.demos}  predicted mean success (final curves) "
              f"{res.final.mean_success:.3f}")

    print("[3/4] collect and train", flush=True)
    targets = {"none": config.base}
    for plan in plans.values():
        for f, n in plan.demos.items():
            targets[f] = max(targets.get(f, 0), n)
    store = loop.collect_demos(args.task, targets, args.out / "scale" / "demos", seed=config.seed,
                               severity=config.severity, image_size=config.image_size,
                               batch_size=config.collect_batch_size)
    jobs = {m: [loop.ModelJob(f"{m}-s{s}", {"none": config.base, **plan.demos},
                              config.train_seed(s)) for s in range(args.final_seeds)]
            for m, plan in plans.items()}
    from robogen.envs import make

    probe = make(args.task)
    trained, reused = loop.train_models(
        store, [j for js in jobs.values() for j in js], args.out / "models", config=config.bc,
        action_low=probe.action_space.low, action_high=probe.action_space.high)
    probe.close()
    print(f"  {trained} models trained, {reused} reused")

    from robogen.scaling.demos import factor_condition

    eval_seed = config.seed + 1
    conditions = [factor_condition(c, config.severity, "test") for c in curves.names]
    print(f"[4/4] evaluate on {', '.join(c.name for c in conditions)}, "
          f"{args.final_episodes} episodes each, eval seed {eval_seed}", flush=True)
    outcomes: dict[str, dict[str, list[np.ndarray]]] = {}
    for m, js in jobs.items():
        outcomes[m] = {c.name: [] for c in conditions}
        for job in js:
            manifest = loop.eval_manifest(
                args.task, f"flax:{(args.out / 'models' / job.name).resolve()}", conditions,
                n_episodes=args.final_episodes, seed=eval_seed)
            by = loop.outcomes_by_condition(
                loop.run_eval(args.out / "evals" / job.name, manifest))
            for c in conditions:
                outcomes[m][c.name].append(by[c.name])
    summary = _summarize(plans, outcomes, conditions, args, versus)
    summary["wall_time_s"] = round(time.perf_counter() - t0, 1)
    (args.out / "validate_plan.json").write_text(json.dumps(summary, indent=2))
    print(f"\nwrote {args.out / 'validate_plan.json'} ({summary['wall_time_s']} s)")


def _summarize(plans, outcomes, conditions, args, versus) -> dict:  # noqa: ANN001 - script
    from robogen.stats.intervals import paired_gap, wilson_interval

    flat = {m: np.concatenate([o for c in conditions for o in outcomes[m][c.name]])
            for m in plans}
    res: dict = {"task": args.task, "factors": args.factors, "budget": args.budget,
                 "plans": {}, "vs_equal": {}}
    print(f"\n{'plan':<12} {'demos per factor':<48} {'success [95% Wilson]':<26} per factor")
    for m, plan in plans.items():
        k, n = int(flat[m].sum()), int(flat[m].size)
        lo, hi = wilson_interval(k, n)
        per = {c.name: float(np.concatenate(outcomes[m][c.name]).mean()) for c in conditions}
        res["plans"][m] = {"demos": plan.demos, "predicted_mean_success": plan.mean_success,
                           "successes": k, "n": n, "rate": k / n, "ci_low": lo, "ci_high": hi,
                           "per_condition": per}
        print(f"{m:<12} {json.dumps(plan.demos):<48} {k}/{n} = {k / n:.3f} "
              f"[{lo:.3f}, {hi:.3f}]  " + ", ".join(f"{c} {r:.2f}" for c, r in per.items()))
    print(f"\n{'plan - equal':<14} {'planner predicted [95%]':<28} measured [95% paired bootstrap "
          "over episodes] [95% over training seeds]")
    for m in plans:
        if m == "equal":
            continue
        gap = paired_gap(flat[m], flat["equal"], seed=0)
        v = versus.get(m)
        lo2, hi2 = _seed_interval(outcomes[m], outcomes["equal"], conditions)
        res["vs_equal"][m] = {
            "predicted": None if v is None else v.to_dict(),
            "measured": {"value": gap.gap, "ci_low": gap.ci_low, "ci_high": gap.ci_high,
                         "n10": gap.n10, "n01": gap.n01, "ci_method": gap.ci_method,
                         "seed_ci": [lo2, hi2]},
            "per_seed": {"plan": _per_seed(outcomes[m], conditions),
                         "equal": _per_seed(outcomes["equal"], conditions)}}
        pred = "(closed loop: none)" if v is None else \
            f"{v.difference:+.3f} [{v.low:+.3f}, {v.high:+.3f}]"
        print(f"{m:<14} {pred:<28} "
              f"{gap.gap:+.3f} [{gap.ci_low:+.3f}, {gap.ci_high:+.3f}] [{lo2:+.3f}, {hi2:+.3f}] "
              f"({gap.n10} episodes only {m} solved, {gap.n01} only equal)")
    return res


def _per_seed(by_condition, conditions) -> list[float]:  # noqa: ANN001 - script
    """Success rate of each training seed's model over all conditions."""
    n = len(by_condition[conditions[0].name])
    return [float(np.concatenate([by_condition[c.name][s] for c in conditions]).mean())
            for s in range(n)]


def _seed_interval(plan, equal, conditions, n_boot: int = 4000,  # noqa: ANN001 - script
                   confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of ``mean(plan) - mean(equal)`` resampling training seeds.

    A cluster bootstrap (Davison & Hinkley 1997, sec. 3.8: resample the top stage only;
    resampling episodes inside each seed as well would count episode noise twice): seed
    index ``s`` pairs plan and equal models trained with the same seed, each evaluated on
    the same episodes, so the spread between BC training seeds counts.
    """
    rng = np.random.default_rng(0)
    n = len(plan[conditions[0].name])
    d = np.array([np.concatenate([plan[c.name][s] for c in conditions]).mean()
                  - np.concatenate([equal[c.name][s] for c in conditions]).mean()
                  for s in range(n)])
    diff = d[rng.integers(0, n, (n_boot, n))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(diff, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def _printer():  # noqa: ANN202 - script
    last: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        step = max(1, total // 5)
        if done == total or done // step != last.get(stage, -1):
            last[stage] = done // step
            print(f"  {stage}: {done}/{total}", flush=True)

    return report


if __name__ == "__main__":
    main()
