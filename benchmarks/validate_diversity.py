"""Diversity vs quantity on a built-in task: diversity curves, then a validated value plan.

Not a timed test: a script that runs the method once and prints what it finds.

1. Diversity curves (:func:`robogen.scaling.diversity.run_diversity`, ``robogen scale --vary
   values``) for a state or pixel (``--obs-mode``) policy: per factor a grid of BC models
   on ``m`` demonstrations in each of ``k`` distinct train values (``--values``, up to 32 by
   default), evaluated on held-out test values; the diversity and quantity exponents with
   bootstrap intervals.
2. The value planner (:mod:`robogen.scaling.value_planner`) splits ``--budget`` into
   (values, demos per value) per factor with ``--value-cost``; its difference from the equal
   split with the procedure-bootstrap interval.
3. Validation: both splits' demonstrations are collected (train values), ``--final-seeds``
   BC models are trained per split on all factors' demonstrations, and each model is
   evaluated on every factor's held-out values with a fresh evaluation seed (the same
   episodes for both splits: paired). Prints success per split with Wilson intervals and the
   measured difference with a paired bootstrap over episodes and one over training seeds;
   writes ``OUT/validate_diversity.json``.

Usage::

    python benchmarks/validate_diversity.py              # Reach, embodiment + object_pose
    python benchmarks/validate_diversity.py --values 1,2,4,8 --per-value 1,2,4 --n-boot 100
    python benchmarks/validate_diversity.py --obs-mode state+pixels --image-size 40 \
        --factors texture,embodiment --steps 1500 --seeds 1 --out runs/validate_diversity_px

``--obs-mode pixels`` or ``state+pixels`` trains the library's BC CNN (``arch=cnn``, DrQ
random shift) on images of ``--image-size`` px recorded with the demonstrations, and
evaluates it on images rendered the same way; ``--weight-decay`` and ``--lr`` override the
BC defaults of :func:`robogen.scaling.loop.default_bc_config`. A killed run resumes: saved
demonstrations, models and finished evaluation episodes are reused.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's L-BFGS: ~10x faster on busy cores
os.environ.setdefault("MUJOCO_GL", "egl")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def main() -> None:
    """Parse arguments, run the three stages, print and save the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="robogen/Reach-v0")
    ap.add_argument("--factors", default="embodiment,object_pose")
    ap.add_argument("--values", default="1,2,4,8,16,32", help="distinct values k per model")
    ap.add_argument("--per-value", default="1,2,4", help="demonstrations per value m")
    ap.add_argument("--eval-values", type=int, default=10, help="held-out values per model")
    ap.add_argument("--eval-episodes", type=int, default=5, help="episodes per held-out value")
    ap.add_argument("--seeds", type=int, default=2, help="training seeds per grid cell")
    ap.add_argument("--obs-mode", default="state", choices=("state", "pixels", "state+pixels"),
                    help="observation of the BC policies (pixels: the BC CNN)")
    ap.add_argument("--image-size", type=int, default=84, help="image side [px] (pixels)")
    ap.add_argument("--steps", type=int, default=None, help="BC steps (default: the loop's)")
    ap.add_argument("--weight-decay", type=float, default=None,
                    help="BC decoupled weight decay (default: the loop's for --obs-mode)")
    ap.add_argument("--lr", type=float, default=None, help="BC learning rate")
    ap.add_argument("--n-boot", type=int, default=200, help="bootstrap refits per curve")
    ap.add_argument("--budget", type=float, default=48, help="demonstration units to plan")
    ap.add_argument("--value-cost", type=float, default=2.0, help="cost of a new value")
    ap.add_argument("--final-seeds", type=int, default=4, help="training seeds per split")
    ap.add_argument("--final-episodes", type=int, default=5,
                    help="evaluation episodes per held-out value, factor and seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("runs/validate_diversity"))
    args = ap.parse_args()

    from robogen.scaling import diversity
    from robogen.scaling.curves import load_curves
    from robogen.scaling.loop import default_bc_config
    from robogen.scaling.value_planner import (
        compare_values_with_equal,
        diversity_models,
        diversity_verdict,
        exponent_interval,
        plan_values,
    )

    t0 = time.perf_counter()
    overrides = {k: v for k, v in (("steps", args.steps), ("weight_decay", args.weight_decay),
                                   ("lr", args.lr)) if v is not None}
    config = diversity.DiversityConfig(
        task=args.task, factors=tuple(f.strip() for f in args.factors.split(",") if f.strip()),
        values=diversity.parse_grid(args.values),
        per_value=diversity.parse_grid(args.per_value, "--per-value"),
        eval_values=args.eval_values, eval_episodes=args.eval_episodes, seeds=args.seeds,
        seed=args.seed, n_boot=args.n_boot, obs_mode=args.obs_mode, image_size=args.image_size,
        bc=default_bc_config(args.obs_mode, **overrides))
    print(f"[1/3] diversity curves of {', '.join(config.factors)} on {args.task} "
          f"({args.obs_mode}): k {list(config.values)} x m {list(config.per_value)}, "
          f"{args.seeds} seeds", flush=True)
    res = diversity.run_diversity(config, args.out / "diversity", progress=_printer())
    curves = load_curves(res.curves_path, task=args.task)
    summary: dict = {"task": args.task, "config": config.to_dict(), "curves": {}}
    for name, c in curves.curves.items():
        lo, hi = exponent_interval(c.fit)
        pts = ", ".join(f"{p.x}:{p.successes}/{p.n}" for p in c.points)
        summary["curves"][name] = {"b": c.fit.b, "b_low": lo, "b_high": hi, "a": c.fit.a}
        print(f"  {name:<22} b={c.fit.b:+.3f} [{lo:+.3f}, {hi:+.3f}]  [{pts}]")
    models = diversity_models(curves)
    summary["verdicts"] = [diversity_verdict(m, args.value_cost) for m in models.values()]
    for v in summary["verdicts"]:
        print("  " + v["sentence"])

    plan = plan_values(models, args.budget, value_cost=args.value_cost)
    equal = plan_values(models, args.budget, value_cost=args.value_cost, method="equal")
    versus = compare_values_with_equal(models, args.budget, value_cost=args.value_cost)
    print(f"[2/3] budget {args.budget:g}, value cost {args.value_cost:g}: optimal {plan.split} "
          f"(predicted {plan.mean_success:.3f}), equal {equal.split} (predicted "
          f"{equal.mean_success:.3f}); planner: optimal - equal {versus['difference']:+.3f} "
          f"[{versus['low']:+.3f}, {versus['high']:+.3f}]", flush=True)
    summary["plans"] = {"optimal": plan.to_dict(), "equal": equal.to_dict(),
                        "planner_vs_equal": versus}
    summary["measured"] = _validate(args, config, {"optimal": plan.split,
                                                   "equal": equal.split})
    summary["wall_time_s"] = round(time.perf_counter() - t0, 1)
    (args.out / "validate_diversity.json").write_text(json.dumps(summary, indent=2))
    print(f"\nwrote {args.out / 'validate_diversity.json'} ({summary['wall_time_s']} s)")


def _validate(args, config, splits) -> dict:  # noqa: ANN001 - script
    """Collect, train and evaluate both splits; paired differences."""
    from robogen.envs import make
    from robogen.scaling.demos import value_factor
    from robogen.scaling.diversity import eval_conditions
    from robogen.scaling.pipeline import (
        ModelJob,
        collect_demos,
        eval_manifest,
        outcomes_by_condition,
        run_eval,
        train_models,
    )
    from robogen.stats import paired_gap, wilson_interval

    targets: dict[str, int] = {}
    for split in splits.values():
        for f, (k, m) in split.items():
            for i in range(k):
                targets[value_factor(f, i)] = max(targets.get(value_factor(f, i), 0), m)
    print(f"[3/3] validate: {len(targets)} values to collect, {args.final_seeds} seeds per "
          "split", flush=True)
    empty = [name for name, split in splits.items() if not any(k for k, _ in split.values())]
    if empty:
        print(f"  {', '.join(empty)} buys no value at this budget: nothing to validate")
        return {"skipped": f"{empty} buy no value"}
    store = collect_demos(config.task, targets, args.out / "diversity" / "demos",
                          seed=config.seed, severity=config.severity,
                          image_size=config.image_size, batch_size=config.collect_batch_size)
    def tag(split) -> str:  # noqa: ANN001 - the split is in the name: stored models match it
        return "-".join(f"{f}{k}x{m}" for f, (k, m) in split.items())

    jobs = {name: [ModelJob(f"{name}-{tag(split)}-s{s}", {value_factor(f, i): m for f, (k, m) in
                                             split.items() for i in range(k)},
                            config.train_seed(100 + s)) for s in range(args.final_seeds)]
            for name, split in splits.items()}
    probe = make(config.task)
    train_models(store, [j for js in jobs.values() for j in js], args.out / "models",
                 config=config.bc, obs_mode=config.obs_mode, action_low=probe.action_space.low,
                 action_high=probe.action_space.high)
    probe.close()
    conds = [c for f in config.factors for c in eval_conditions(config, f)]
    outcomes: dict[str, list[np.ndarray]] = {}
    for name, js in jobs.items():
        outcomes[name] = []
        for job in js:
            manifest = eval_manifest(config.task,
                                     f"flax:{(args.out / 'models' / job.name).resolve()}",
                                     conds, n_episodes=args.final_episodes,
                                     seed=config.seed + 1, obs_mode=config.obs_mode,
                                     image_size=config.image_size,
                                     batch_size=min(config.eval_batch_size,
                                                    args.final_episodes))
            by = outcomes_by_condition(run_eval(args.out / "evals" / job.name, manifest))
            outcomes[name].append(np.concatenate([by[c.name] for c in conds]))
    res: dict = {}
    for name, per_seed in outcomes.items():
        flat = np.concatenate(per_seed)
        lo, hi = wilson_interval(int(flat.sum()), int(flat.size))
        res[name] = {"split": {f: list(v) for f, v in splits[name].items()},
                     "successes": int(flat.sum()), "n": int(flat.size),
                     "rate": float(flat.mean()), "ci": [lo, hi],
                     "per_seed": [float(o.mean()) for o in per_seed]}
        print(f"  {name:<8} {splits[name]}  {int(flat.sum())}/{flat.size} = "
              f"{flat.mean():.3f} [{lo:.3f}, {hi:.3f}]")
    gap = paired_gap(np.concatenate(outcomes["optimal"]), np.concatenate(outcomes["equal"]),
                     seed=0)
    d = np.array([a.mean() - b.mean() for a, b in zip(outcomes["optimal"], outcomes["equal"],
                                                      strict=True)])
    rng = np.random.default_rng(0)
    boot = d[rng.integers(0, len(d), (4000, len(d)))].mean(axis=1)
    slo, shi = np.quantile(boot, [0.025, 0.975])
    res["optimal_minus_equal"] = {"value": gap.gap, "ci_episodes": [gap.ci_low, gap.ci_high],
                                  "ci_seeds": [float(slo), float(shi)]}
    print(f"  optimal - equal: {gap.gap:+.3f} [{gap.ci_low:+.3f}, {gap.ci_high:+.3f}] over "
          f"episodes, [{slo:+.3f}, {shi:+.3f}] over training seeds")
    return res


def _printer():  # noqa: ANN202 - script
    last: dict[str, int] = {}
    t0 = time.perf_counter()

    def report(stage: str, done: int, total: int) -> None:
        step = max(1, total // 5)
        if done == total or done // step != last.get(stage, -1):
            last[stage] = done // step
            print(f"  {stage}: {done}/{total} ({time.perf_counter() - t0:.0f} s)", flush=True)

    return report


if __name__ == "__main__":
    main()
