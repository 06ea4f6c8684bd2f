"""What a check compares: the outcomes of a baseline and a candidate, and their protocols.

A side of the comparison is a saved run directory (per-episode outcomes, so
episodes can be paired), a ``report.json`` alone (per-condition counts only,
so the test is unpaired), or a policy URI that robogen evaluates for the check
(:mod:`robogen.check.evaluation`). Both sides must share the evaluation
*protocol* (:data:`PROTOCOL_FIELDS`); the run seed and the number of episodes
may differ (a different seed makes the comparison unpaired; a different
number of episodes pairs the common episode indices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robogen.check.records import RunInfo
from robogen.errors import InvalidSpecError, RunDirError
from robogen.rollout.manifest import PROTOCOL_FIELDS, outcomes_manifest
from robogen.rollout.manifest import differences as protocol_differences
from robogen.types import (
    INVALID_CAUSES,
    NOMINAL,
    Condition,
    EpisodeResult,
    EvalManifest,
)

__all__ = [  # PROTOCOL_FIELDS and protocol_differences live in robogen.rollout.manifest
    "NO_EPISODES", "NOT_FOUND", "PROTOCOL_FIELDS", "PROTOCOL_MISMATCH", "ConditionOutcomes",
    "RunData", "check_protocols", "is_saved", "load_saved",
    "protocol_differences", "refuse_sequential", "require_policy_uri", "run_data_from_arrays",
]

PROTOCOL_MISMATCH = (
    "the baseline and candidate were evaluated under different protocols, so their success "
    "rates are not comparable; differing fields: {fields}. Evaluate the candidate under the "
    "baseline's manifest instead: robogen check --baseline {baseline} --candidate POLICY_URI"
)
NOT_FOUND = (
    "{role} {source!r} is neither an existing run directory or report.json nor a policy URI "
    "({forms}); check the path"
)
NO_EPISODES = (
    "{role} run directory {path!r} has no finished episodes and no report.json; "
    "finish it with: robogen eval --resume {path}"
)


@dataclass(frozen=True, slots=True)
class ConditionOutcomes:
    """Per-episode success of one condition of one run.

    Attributes:
        episode_index: (n,) int64 episode indices, strictly increasing.
        success: (n,) bool success of each of those episodes.
    """

    episode_index: NDArray[np.int64]
    success: NDArray[np.bool_]

    def first(self, n: int) -> ConditionOutcomes:
        """The episodes with index < n (the first n planned episodes)."""
        keep = self.episode_index < n
        return ConditionOutcomes(self.episode_index[keep], self.success[keep])


@dataclass(frozen=True, slots=True)
class RunData:
    """One side of a comparison.

    Attributes:
        manifest: The run's evaluation manifest.
        info: Provenance shown in the outputs.
        counts: Condition name -> (successes, episodes).
        episodes: Condition name -> per-episode outcomes; None when only a
            report.json was available (the comparison is then unpaired).
        not_applied: Conditions whose axes changed nothing in any episode.
        invalid: Condition name -> episodes left out because the machinery failed, not
            the policy (cause in :data:`~robogen.types.INVALID_CAUSES`); ``counts`` and
            ``episodes`` hold valid episodes only, so a pair drops when either side's
            episode is invalid.
        invalid_index: Condition name -> episode indices of those invalid episodes (None
            when only a report.json was available).
        safety: Condition name -> safety metric -> episode index -> value, of the valid
            episodes that recorded it (``robogen eval --safety``); None when only a
            report.json was available.
    """

    manifest: EvalManifest
    info: RunInfo
    counts: Mapping[str, tuple[int, int]]
    episodes: Mapping[str, ConditionOutcomes] | None = None
    not_applied: frozenset[str] = field(default_factory=frozenset)
    invalid: Mapping[str, int] = field(default_factory=dict)
    invalid_index: Mapping[str, tuple[int, ...]] | None = None
    safety: Mapping[str, Mapping[str, Mapping[int, float]]] | None = None

    def invalid_share(self, condition: str) -> float:
        """Invalid share of the recorded episodes of ``condition`` (0 when none)."""
        bad = self.invalid.get(condition, 0)
        total = bad + self.counts.get(condition, (0, 0))[1]
        return bad / total if total else 0.0

    @classmethod
    def from_results(
        cls, manifest: EvalManifest, results: Sequence[EpisodeResult], info: RunInfo
    ) -> RunData:
        """Group episode results by condition (episodes of unknown conditions are ignored)."""
        names = {c.name: c for c in manifest.conditions}
        rows: dict[str, dict[int, tuple[bool, bool]]] = {n: {} for n in names}
        bad: dict[str, list[int]] = {n: [] for n in names}
        for r in results:
            if r.condition in rows and r.cause in INVALID_CAUSES:
                bad[r.condition].append(r.episode_index)
            elif r.condition in rows:
                applied = set(names[r.condition].axes) <= set(r.changed_axes)
                rows[r.condition][r.episode_index] = (r.success, applied)
        from robogen.reports.safety import episode_values

        safety = {n: v for n, v in episode_values(results).items() if n in names}
        episodes, counts, not_applied = {}, {}, set()
        for name, by_index in rows.items():
            idx = np.array(sorted(by_index), dtype=np.int64)
            succ = np.array([by_index[i][0] for i in idx], dtype=np.bool_)
            episodes[name] = ConditionOutcomes(idx, succ)
            counts[name] = (int(succ.sum()), int(idx.size))
            if names[name].axes and idx.size and not any(a for _, a in by_index.values()):
                not_applied.add(name)
        return cls(manifest, info, counts, episodes, frozenset(not_applied),
                   {k: len(v) for k, v in bad.items()},
                   {k: tuple(sorted(v)) for k, v in bad.items()}, safety)

    def first(self, n: int, conditions: Sequence[str] | None = None) -> RunData:
        """This run restricted to episode indices < n (of ``conditions``, others unchanged)."""
        if self.episodes is None:
            return self
        names = set(self.episodes if conditions is None else conditions)
        eps = {k: (v.first(n) if k in names else v) for k, v in self.episodes.items()}
        counts = {k: (int(v.success.sum()), int(v.success.size)) for k, v in eps.items()}
        idx = self.invalid_index
        if idx is None:
            return replace(self, episodes=eps, counts=counts)
        kept = {k: (tuple(i for i in v if i < n) if k in names else v) for k, v in idx.items()}
        return replace(self, episodes=eps, counts=counts, invalid_index=kept,
                       invalid={k: len(v) for k, v in kept.items()})


def run_data_from_arrays(
    outcomes: Mapping[str, ArrayLike],
    *,
    env_id: str = "synthetic",
    policy: str = "synthetic",
    seed: int = 0,
    source: str = "arrays",
) -> RunData:
    """A :class:`RunData` from per-condition success arrays (episode i = entry i).

    For tests, benchmarks and users' own outcome streams. Condition names
    ``axis@severity`` become single-axis conditions, ``nominal`` the nominal one,
    anything else a condition over the axes joined by ``+`` before the ``@``.

    Args:
        outcomes: Condition name -> (n,) bool success per episode index.
        env_id: Env id written in the synthetic manifest.
        policy: Policy id.
        seed: Run seed; two runs with equal seeds are paired by episode index.
        source: Provenance shown in the outputs.

    Raises:
        InvalidSpecError: If an array is not 1-D 0/1 data.
    """
    from robogen.types import AxisLevel

    conds, results_counts, episodes = [], {}, {}
    for name, arr in outcomes.items():
        a = np.asarray(arr)
        if a.ndim != 1 or (a.size and not np.isin(a, (0, 1)).all()):
            raise InvalidSpecError(
                f"outcomes[{name!r}] must be a 1-D array of success flags (bool or 0/1), "
                f"got shape {a.shape}"
            )
        a = a.astype(np.bool_)
        if name == NOMINAL:
            conds.append(Condition(NOMINAL, ()))
        else:
            head, _, sev = name.partition("@")
            try:
                s = float(sev) if sev else 1.0
            except ValueError:
                s = 1.0
            conds.append(Condition(name, tuple(AxisLevel(x, s) for x in head.split("+"))))
        episodes[name] = ConditionOutcomes(np.arange(a.size, dtype=np.int64), a)
        results_counts[name] = (int(a.sum()), int(a.size))
    n = max((v.success.size for v in episodes.values()), default=0)
    manifest = outcomes_manifest(conds, env_id=env_id, policy=policy, n_episodes=n, seed=seed)
    info = RunInfo(source=source, kind="run_dir", policy=policy, run_dir=None, seed=seed,
                   n_episodes=n)
    return RunData(manifest, info, results_counts, episodes)


def is_saved(source: str | Path) -> bool:
    """Whether ``source`` names an existing run directory or report file (else a policy URI)."""
    return Path(source).exists()


def require_policy_uri(source: str | Path, role: str) -> str:
    """``source`` as a policy URI, or raise if it is neither a saved run nor a policy.

    Raises:
        RunDirError: If ``source`` is not an existing path and its scheme is not a
            registered policy scheme (a mistyped run directory, usually).
    """
    from robogen.policies import POLICY_SCHEMES, policy_uri_help, split_uri

    uri = str(source)
    scheme, _ = split_uri(uri)
    if scheme not in POLICY_SCHEMES:
        raise RunDirError(NOT_FOUND.format(role=role, source=uri, forms=policy_uri_help()))
    return uri


def load_saved(
    source: str | Path, role: str = "baseline", *, require_complete: bool = True
) -> RunData:
    """Load a run directory or a report.json.

    A run directory gives per-episode outcomes (pairable); a report.json alone
    gives per-condition counts. A report.json next to its run's episodes is
    validated, then the episodes are used.

    Raises:
        RunDirError: If the path is missing, not a run directory or report, has
            no finished episodes, is unfinished (``require_complete``; a run
            stopped early by the sequential mode is partial on purpose), or its
            manifest or report is corrupt.
    """
    from robogen.reports.writers import load_report
    from robogen.rollout.store import MANIFEST, ResultStore

    path = Path(source)
    if not path.exists():
        raise RunDirError(NOT_FOUND.format(role=role, source=str(source),
                                           forms=_policy_uri_help()))
    report = None
    if path.is_file():
        if path.suffix != ".json":
            raise RunDirError(
                f"{role} {str(path)!r} is a file but not a report.json; pass a run directory, "
                "a report.json or a policy URI"
            )
        report = load_report(path)
        run_dir = path.parent
    else:
        run_dir = path
    if (run_dir / MANIFEST).is_file():
        store = ResultStore.open(run_dir)
        refuse_sequential(store.manifest, role, source)
        results = store.load_results()
        if results:
            from robogen.rollout.runner import plan_units

            missing = len(plan_units(store.manifest)) - len(store.done_units())
            if missing > 0 and require_complete:
                raise RunDirError(
                    f"{role} run {str(run_dir)!r} is incomplete: {missing} of "
                    f"{len(plan_units(store.manifest))} work units have no episodes; finish it "
                    f"with robogen eval --resume {str(run_dir)!r}"
                )
            m = store.manifest
            info = RunInfo(str(source), "run_dir", m.policy, str(run_dir), m.seed, m.n_episodes)
            return RunData.from_results(m, results, info)
    if report is None:
        if not (run_dir / "report.json").is_file():
            if (run_dir / MANIFEST).is_file():
                raise RunDirError(NO_EPISODES.format(role=role, path=str(run_dir)))
            raise RunDirError(
                f"{role} {str(run_dir)!r} is not a robogen run directory: it has neither "
                "manifest.json nor report.json"
            )
        report = load_report(run_dir)
    m = report.manifest
    refuse_sequential(m, role, source)
    counts = {c.condition: (int(c.successes), int(c.n)) for c in report.conditions}
    not_applied = frozenset(
        c.condition for c in report.conditions if c.axes and c.n > 0 and c.n_applied == 0
    )
    info = RunInfo(str(source), "report", m.policy, None, m.seed, m.n_episodes)
    invalid = {c.condition: int(c.n_invalid) for c in report.conditions}
    return RunData(m, info, counts, None, not_applied, invalid)


SEQUENTIAL_RUN = (
    "{role} {source!r} was evaluated with --episodes auto: its conditions stopped at "
    "data-dependent episode counts, so it is not a fixed protocol that check's tests (fixed-n "
    "or --sequential looks) can pair with or re-run; nothing was evaluated. Evaluate the "
    "{role} with --episodes N (e.g. the largest count it used) and check against that run"
)


def refuse_sequential(manifest: EvalManifest, role: str, source: str | Path) -> None:
    """Refuse an ``--episodes auto`` run as a side of ``robogen check``.

    Raises:
        InvalidSpecError: If ``manifest`` has a sequential rule (:data:`SEQUENTIAL_RUN`).
    """
    if manifest.sequential is not None:
        raise InvalidSpecError(SEQUENTIAL_RUN.format(role=role, source=str(source)))


def _policy_uri_help() -> str:
    from robogen.policies import policy_uri_help

    return policy_uri_help()


def check_protocols(baseline: RunData, candidate: RunData) -> None:
    """Raise if the two runs do not share an evaluation protocol.

    Raises:
        InvalidSpecError: Naming every differing field with both values.
    """
    diffs = protocol_differences(baseline.manifest, candidate.manifest)
    if diffs:
        raise InvalidSpecError(
            PROTOCOL_MISMATCH.format(fields="; ".join(diffs), baseline=baseline.info.source)
        )
