"""Does the graph predict reward variance here? (``envsched-gnn eval graph-signal``)

Targets are the tasks observed at a step t, predicted only from observations at s < t and
never from their own: a two-round rollout gives one target step (round A at 0, B at 1), a
training history one per step t >= 1. Estimates, with spec 4.1-4.3's statistics at h_long:

- ``within``, ``cross``: the neighbour-only relation estimate of spec 4.4,
  G_r(i,t) = (sum_{j in N_t^r(i)} sim_r(i,j) W(j,t) ybar_v(j,t) + lambda_g g_v(t))
  / (sum_j sim_r(i,j) W(j,t) + lambda_g);
- ``prior``: P(i,t) = 0.5 G_within + 0.5 G_cross (spec 4.5, before any own history);
- ``env_mean`` (baseline): the same formula over all other tasks of i's environment, sim = 1;
- ``retest`` (ceiling): the task's own earlier estimate ybar_v(i,t), where it has one.

Scores against v(i,t): Spearman's rho and the ROC AUC for v > 0, weighted by targets over
steps. Permutation nulls permute v among a step's targets ``global``-ly or ``within_env``,
P times, p = (1 + #{null >= observed}) / (1 + P) (beating ``within_env`` says: information
beyond the environment); 95 % percentile bootstrap CIs resample environments, B times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.eval.stats import env_bootstrap, percentile_ci, permutation_p
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph
from envsched_gnn.models.calibration import average_rank
from envsched_gnn.models.config import PredictorConfig
from envsched_gnn.observations import Observation, ObservationLog
from envsched_gnn.validation import check_bounds

GRAPH_ESTIMATES = (*RELATIONS, "prior")
"""The estimates the graph makes (the issue's 'within, cross and the 0.5/0.5 prior')."""
ESTIMATES = (*GRAPH_ESTIMATES, "env_mean", "retest")
METRICS = ("spearman", "auc")
NULLS = ("global", "within_env")


@dataclass
class GraphSignalConfig:
    """How ``eval graph-signal`` scores the graph's estimates."""

    permutations: int = 1000
    """Permutations per null (at least 200)."""
    bootstrap: int = 1000
    """Bootstrap resamples of environments for the confidence intervals."""
    alpha: float = 0.05
    """Level at which an estimate is said to beat a null (one-sided permutation p-value)."""
    seed: int = 0
    """Seed of the permutations and the bootstrap."""
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    """h_long, lambda_g and the relation weights of the prior (spec defaults)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            at_least={"permutations": 200, "bootstrap": 1},
            open_unit=("alpha",),
            integers=("seed",),
            non_negative=("seed",),
        )


@dataclass
class TargetSet:
    """The targets of one step t: node indices, environments, realised v and the estimates."""

    step: int
    tasks: np.ndarray
    env: np.ndarray
    observed: np.ndarray
    estimates: dict[str, np.ndarray]
    """Name in :data:`ESTIMATES` -> (n,) estimate; ``retest`` is NaN without own history."""


def target_sets(
    graph: TaskGraph, observations: Sequence[Observation], config: PredictorConfig
) -> list[TargetSet]:
    """One :class:`TargetSet` per observed step t >= 1 that has observations before it."""
    from envsched_gnn.models.analytic import AnalyticPredictor

    if not observations:
        raise ValueError("graph-signal: the history is empty")
    log = ObservationLog(graph.task_ids)
    log.extend(observations)
    columns = log.arrays()
    steps = np.unique(columns["step"])
    if steps.shape[0] < 2:
        raise ValueError(
            "graph-signal: the history has one step only; it needs neighbours' observations "
            "from an earlier step (round A) than the targets' (round B)"
        )
    env = graph.env_index()[1]
    data = to_hetero_data(graph)
    predictor = AnalyticPredictor(config)
    sets = []
    for step in steps[1:].tolist():
        rows = columns["step"] == step
        tasks = columns["task"][rows]
        long = predictor.compute(data, log, step).long
        estimates = {r: long.relation[r][tasks, 0] for r in RELATIONS}
        estimates["prior"] = long.prior[tasks, 0]
        estimates["env_mean"] = _env_mean(long.stats, env, config.lambda_g)[tasks]
        estimates["retest"] = long.stats.own_estimate()[tasks, 0]
        sets.append(TargetSet(int(step), tasks, env[tasks], columns["v"][rows], estimates))
    return sets


def _env_mean(stats, env: np.ndarray, lambda_g: float) -> np.ndarray:
    """(sum_{j in e(i), j != i} W_j ybar_v(j) + lambda_g g_v) / (sum_{j != i} W_j + lambda_g)."""
    n_env = int(env.max()) + 1
    weight, weighted = stats.weight, stats.weighted_sum[:, 0]
    env_weight = np.bincount(env, weights=weight, minlength=n_env)[env] - weight
    env_sum = np.bincount(env, weights=weighted, minlength=n_env)[env] - weighted
    return (env_sum + lambda_g * stats.g[0]) / (env_weight + lambda_g)


@dataclass
class _Ranked:
    """One target set's ranks, centred, for fast permutation scores of one estimate."""

    estimate_rank: np.ndarray
    observed_rank: np.ndarray
    positive: np.ndarray
    env: np.ndarray

    @classmethod
    def of(cls, estimate: np.ndarray, observed: np.ndarray, env: np.ndarray) -> _Ranked:
        return cls(average_rank(estimate), average_rank(observed), observed > 0, env)

    @property
    def n(self) -> int:
        return int(self.estimate_rank.shape[0])

    def scores(self, order: np.ndarray | None = None) -> np.ndarray:
        """(spearman, auc) with the observed values taken in ``order`` ((P, n) or None)."""
        order = np.arange(self.n)[None] if order is None else order
        out = np.full((order.shape[0], 2), np.nan)
        e = self.estimate_rank - self.estimate_rank.mean()
        o = self.observed_rank - self.observed_rank.mean()
        norm = math.sqrt(float(e @ e) * float(o @ o))
        if norm > 0:
            out[:, 0] = o[order] @ e / norm
        positives = int(self.positive.sum())
        negatives = self.n - positives
        if positives and negatives:
            rank_sum = (self.positive[order] * self.estimate_rank).sum(axis=1)
            out[:, 1] = (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)
        return out


def _weighted(scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted mean over target sets, ignoring NaN. Shapes: (S, ..., 2), (S,) -> (..., 2)."""
    w = np.where(np.isnan(scores), 0.0, weights.reshape(-1, *([1] * (scores.ndim - 1))))
    total = w.sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(total > 0, np.nansum(scores * w, axis=0) / total, np.nan)


def _permutations(env: np.ndarray, count: int, within_env: bool, rng) -> np.ndarray:
    """(count, n) orders of the targets; ``within_env`` orders only swap environment-mates."""
    n = env.shape[0]
    keys = rng.random((count, n))
    if not within_env:
        return np.argsort(keys, axis=1)
    grouped = np.argsort(env, kind="stable")
    order = np.empty((count, n), np.int64)
    order[:, grouped] = np.argsort(env[None, :] + keys, axis=1)
    return order


def score_sample(estimates: Sequence[np.ndarray], observed: Sequence[np.ndarray]) -> np.ndarray:
    """(spearman, auc) of pooled per-set samples: weighted mean over the sets. Shape (2,)."""
    scores = np.array(
        [
            _Ranked.of(e, o, np.zeros(len(o), np.int64)).scores()[0]
            if len(o) > 1
            else [np.nan, np.nan]
            for e, o in zip(estimates, observed, strict=True)
        ]
    )
    return _weighted(scores, np.array([len(o) for o in observed], np.float64))


def score_estimate(
    sets: Sequence[TargetSet], name: str, config: GraphSignalConfig, rng
) -> dict[str, object]:
    """Scores, nulls and bootstrap CIs of one estimate over the target sets (module doc)."""
    keep = [np.isfinite(s.estimates[name]) for s in sets]
    ranked = [
        _Ranked.of(s.estimates[name][k], s.observed[k], s.env[k])
        for s, k in zip(sets, keep, strict=True)
    ]
    ranked = [r for r in ranked if r.n > 1]
    n_targets = int(sum(r.n for r in ranked))
    row: dict[str, object] = {"targets": n_targets, "steps": len(ranked)}
    if not ranked:
        for metric in METRICS:
            row[metric] = math.nan
            row[f"{metric}_ci"] = [math.nan, math.nan]
        row["nulls"] = {}
        return row
    weights = np.array([r.n for r in ranked], np.float64)
    observed = _weighted(np.array([r.scores()[0] for r in ranked]), weights)
    for metric, value in zip(METRICS, observed, strict=True):
        row[metric] = float(value)
    nulls = {}
    for null in NULLS:
        per_set = np.stack(
            [
                r.scores(_permutations(r.env, config.permutations, null == "within_env", rng))
                for r in ranked
            ]
        )
        draws = _weighted(per_set, weights)  # (P, 2)
        nulls[null] = {
            metric: _null_summary(draws[:, k], float(observed[k]))
            for k, metric in enumerate(METRICS)
        }
    row["nulls"] = nulls
    boot = env_bootstrap(
        [s.env for s in sets],
        config.bootstrap,
        rng,
        lambda rows, _: score_sample(
            [s.estimates[name][r] for s, r in zip(sets, rows, strict=True)],
            [s.observed[r] for s, r in zip(sets, rows, strict=True)],
        ),
        keep,
    )
    for k, metric in enumerate(METRICS):
        row[f"{metric}_ci"] = percentile_ci(boot[:, k])
    return row


def _null_summary(draws: np.ndarray, observed: float) -> dict[str, float]:
    """The finite null draws' mean, sd and central 95 % (``band``, ``[lo, hi]``), and the
    permutation p-value of ``observed``."""
    finite = draws[np.isfinite(draws)]
    if not finite.size or math.isnan(observed):
        return dict.fromkeys(("mean", "sd", "p"), math.nan) | {"band": [math.nan] * 2}
    return {
        "mean": float(finite.mean()),
        "sd": float(finite.std()),
        "band": percentile_ci(finite),
        "p": permutation_p(finite, observed),
    }


@dataclass
class GraphSignal:
    """The scores of every estimate, with their nulls and CIs, and the verdicts."""

    rows: dict[str, dict[str, object]]
    verdicts: dict[str, str]
    steps: list[int]
    targets: int
    config: dict[str, object]

    def to_json(self) -> dict:
        return {
            "what": "neighbour-only estimates of reward variance (spec 4.4) against the "
            "realised variance of later observations; own observations never used",
            "steps": self.steps,
            "targets": self.targets,
            "estimates": self.rows,
            "verdicts": self.verdicts,
            "config": self.config,
        }


def graph_signal(
    graph: TaskGraph, observations: Sequence[Observation], config: GraphSignalConfig | None = None
) -> GraphSignal:
    """Score the graph's estimates on ``observations`` (module docstring)."""
    config = config or GraphSignalConfig()
    sets = target_sets(graph, observations, config.predictor)
    rng = np.random.default_rng(config.seed)
    rows = {name: score_estimate(sets, name, config, rng) for name in ESTIMATES}
    return GraphSignal(
        rows=rows,
        verdicts=verdicts(rows, config.alpha),
        steps=[s.step for s in sets],
        targets=int(sum(s.tasks.shape[0] for s in sets)),
        config={
            "permutations": config.permutations,
            "bootstrap": config.bootstrap,
            "alpha": config.alpha,
            "seed": config.seed,
            "half_life_long": config.predictor.half_life_long,
            "lambda_g": config.predictor.lambda_g,
            "relation_weights": dict(config.predictor.relation_weights),
        },
    )


LABELS = {
    "within": "within",
    "cross": "cross",
    "prior": "prior (0.5 within + 0.5 cross)",
    "env_mean": "environment mean (baseline)",
    "retest": "test-retest (ceiling)",
}


def _p(row: dict, null: str) -> float:
    return row["nulls"].get(null, {}).get("spearman", {}).get("p", math.nan)


def verdicts(rows: dict[str, dict], alpha: float) -> dict[str, str]:
    """One sentence or three per estimate, in plain words, from its Spearman and its nulls."""
    out = {}
    for name in ESTIMATES:
        row = rows[name]
        rho, (lo, hi) = row["spearman"], row["spearman_ci"]
        if math.isnan(rho):
            out[name] = (
                f"{LABELS[name]}: Spearman undefined over {row['targets']} targets (the estimate "
                "or the realised variance is constant, e.g. no group showed reward spread)."
            )
            continue
        head = (
            f"{LABELS[name]}: Spearman {rho:.3f} (95% CI {lo:.3f} to {hi:.3f}) over "
            f"{row['targets']} targets"
        )
        p_global, p_env = _p(row, "global"), _p(row, "within_env")
        if name == "retest":
            out[name] = (
                head + ": how well one earlier draw of the task itself ranks the later one; no "
                "neighbour estimate is expected to come close."
            )
        elif p_global > alpha:
            out[name] = (
                head + f". It does NOT beat labels permuted globally (p = {p_global:.3f}): no "
                "evidence that it predicts reward variance here."
            )
        elif name == "env_mean":
            out[name] = (
                head + f". It beats labels permuted globally (p = {p_global:.3f}): environments "
                "differ in how much reward spread their tasks show."
            )
        elif p_env > alpha:
            out[name] = (
                head + f". It beats labels permuted globally (p = {p_global:.3f}) but NOT labels "
                f"permuted within environments (p = {p_env:.3f}): what it knows is which "
                "environment a task is in, nothing beyond that."
            )
        else:
            out[name] = (
                head + f". It beats labels permuted globally (p = {p_global:.3f}) and within "
                f"environments (p = {p_env:.3f}): it predicts reward variance beyond environment "
                "membership."
            )
    return out
