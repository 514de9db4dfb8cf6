"""Cold start: does the graph predict the reward variance of environments that join a pool?
(``envsched-gnn eval cold-start``)

The environments are split into F seeded folds; each fold in turn joins at step J: its
observations before J are dropped and each new task i is predicted at its first visit s_i
(first observation at a step >= J) from the other folds' observations at s < s_i, on the whole
graph (growth equals a rebuild, docs/design.md §9.2). Every within neighbour is then unobserved,
G_within(i, s_i) = g_v(s_i), and the cross relation carries the prediction alone.

Estimates of v(i, s_i): ``q`` (spec 4.7), ``cross`` (G_cross,v at h_long, spec 4.4),
``global`` (g_v(s_i), the environment-free prior: the same for every new task, so Spearman 0
and AUC 0.5 by definition) and ``relabelled_q`` / ``relabelled_cross`` on the relabelled control
graph (spec 7), the mean over D draws seeded by (seed, draw). Scored as ``eval graph-signal``
scores (the AUC only with at least :data:`MIN_CLASS` targets in each class); 95 % intervals
from a percentile bootstrap over the new environments (one control draw per replicate), the
differences q - relabelled_q and cross - relabelled_cross paired on the same resample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.eval.controls import relabelled_graph
from envsched_gnn.eval.graph_signal.measure import score_sample
from envsched_gnn.eval.stats import env_bootstrap, percentile_ci
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.models.config import PredictorConfig
from envsched_gnn.observations import Observation, ObservationLog
from envsched_gnn.validation import check_bounds

ESTIMATES = ("q", "cross")
"""The graph's estimates, each also on the relabelled control."""
METRICS = ("spearman", "auc")
ENVIRONMENT_FREE = {"spearman": 0.0, "auc": 0.5}
"""The environment-free prior's scores: a constant ranks nothing."""
MIN_CLASS = 10
"""Fewest targets with and without reward spread for an AUC: below it, the AUC (and its
bootstrap, which resamples a handful of groups) is reported as undefined."""


@dataclass
class ColdStartConfig:
    """How ``eval cold-start`` simulates the growth and scores it."""

    folds: int = 5
    """Environments are split into this many seeded folds; each fold joins the pool in turn
    (the number of environments: one environment at a time)."""
    join_step: int = 1
    """The new environments join at this step: their observations before it are dropped, and
    a new task's first visit is its first observation at a step >= it."""
    control_draws: int = 20
    """Relabelled control graphs drawn (spec 7), each from (seed, draw)."""
    bootstrap: int = 1000
    """Bootstrap resamples of the new environments for the 95 % intervals."""
    seed: int = 0
    """Seed of the folds, the control draws and the bootstrap."""
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    """The analytic predictor's settings (spec defaults)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            at_least={"folds": 2, "join_step": 1, "control_draws": 1, "bootstrap": 1},
            integers=("seed",),
            non_negative=("seed",),
        )


@dataclass
class FirstVisits:
    """The targets of one fold at one step: node indices, environment codes, realised v, and
    each estimate on the real graph (n,) and on every control draw (D, n)."""

    fold: int
    step: int
    tasks: np.ndarray
    env: np.ndarray
    observed: np.ndarray
    real: dict[str, np.ndarray]
    control: dict[str, np.ndarray]


def env_folds(env_names: Sequence[str], folds: int, seed: int) -> list[list[str]]:
    """The environments in ``folds`` near-equal seeded parts."""
    if folds > len(env_names):
        raise ValueError(f"{folds} folds of {len(env_names)} environments: at most one per fold")
    order = np.random.default_rng([seed, 1]).permutation(len(env_names))
    return [sorted(env_names[i] for i in part) for part in np.array_split(order, folds)]


def _estimates(predictor, data, log: ObservationLog, step: int, tasks: np.ndarray) -> dict:
    computation = predictor.compute(data, log, step)
    return {"q": computation.q[tasks], "cross": computation.long.relation["cross"][tasks, 0]}


def first_visits(
    graph: TaskGraph, observations: Sequence[Observation], config: ColdStartConfig
) -> list[FirstVisits]:
    """Every fold's first visits with their estimates (module docstring)."""
    from envsched_gnn.models.analytic import AnalyticPredictor

    env_names, env = graph.env_index()
    unknown = sorted({o.task_id for o in observations} - set(graph.index))
    if unknown:
        raise ValueError(f"the history names task(s) {unknown[:5]} that are not graph nodes")
    predictor = AnalyticPredictor(config.predictor)
    graphs = [graph] + [
        relabelled_graph(graph, (config.seed, draw)) for draw in range(config.control_draws)
    ]
    datas = [to_hetero_data(g) for g in graphs]
    sets = []
    for fold, names in enumerate(env_folds(env_names, config.folds, config.seed)):
        joining = np.isin(env, [env_names.index(name) for name in names])
        past = ObservationLog(graph.task_ids)
        past.extend(o for o in observations if not joining[graph.index[o.task_id]])
        first: dict[int, Observation] = {}
        for o in sorted(observations, key=lambda o: o.step):
            i = graph.index[o.task_id]
            if joining[i] and o.step >= config.join_step and i not in first:
                first[i] = o
        by_step: dict[int, list[int]] = {}
        for i, o in first.items():
            by_step.setdefault(o.step, []).append(i)
        for step, members in sorted(by_step.items()):
            tasks = np.array(sorted(members), np.int64)
            per_graph = [_estimates(predictor, d, past, step, tasks) for d in datas]
            sets.append(
                FirstVisits(
                    fold,
                    step,
                    tasks,
                    env[tasks],
                    np.array([first[i].variance for i in tasks.tolist()]),
                    per_graph[0],
                    {n: np.stack([e[n] for e in per_graph[1:]]) for n in ESTIMATES},
                )
            )
    if not sets:
        raise ValueError(
            f"no task has an observation at a step >= {config.join_step} (the join step): the "
            "history needs the new environments' first visits after it (two rounds of "
            "rollouts, or a training run)"
        )
    return sets


def _scores(
    sets: Sequence[FirstVisits], rows: Sequence[np.ndarray], estimates: Sequence[np.ndarray]
) -> np.ndarray:
    """(spearman, auc) of each set's ``estimates`` on its ``rows``."""
    return score_sample(
        [e[r] for e, r in zip(estimates, rows, strict=True)],
        [s.observed[r] for s, r in zip(sets, rows, strict=True)],
    )


@dataclass
class ColdStart:
    """The scores of every estimate and of the paired differences, with their intervals."""

    rows: dict[str, dict[str, object]]
    differences: dict[str, dict[str, object]]
    targets: int
    spread: int
    """Targets whose first visit showed reward spread (v > 0)."""
    environments: int
    folds: list[list[str]]
    steps: list[int]
    config: dict[str, object]

    def to_json(self) -> dict:
        return {
            "what": "first-visit predictions of the tasks of environments that join the pool, "
            "against their realised reward variance; no observation of a new environment used",
            "targets": self.targets,
            "targets_with_spread": self.spread,
            "environments": self.environments,
            "folds": self.folds,
            "steps": self.steps,
            "estimates": self.rows,
            "differences": self.differences,
            "config": self.config,
        }


def cold_start(
    graph: TaskGraph, observations: Sequence[Observation], config: ColdStartConfig | None = None
) -> ColdStart:
    """Simulate the growth of ``graph``'s environments on ``observations`` and score it."""
    config = config or ColdStartConfig()
    sets = first_visits(graph, observations, config)
    everything = [np.arange(s.tasks.shape[0]) for s in sets]
    real = {n: _scores(sets, everything, [s.real[n] for s in sets]) for n in ESTIMATES}
    control = {
        n: np.nanmean(
            [
                _scores(sets, everything, [s.control[n][d] for s in sets])
                for d in range(config.control_draws)
            ],
            axis=0,
        )
        for n in ESTIMATES
    }
    boot = _bootstrap(sets, config)
    rows: dict[str, dict[str, object]] = {}
    differences: dict[str, dict[str, object]] = {}
    for n in ESTIMATES:
        for name, point, draws in (
            (n, real[n], boot[f"real_{n}"]),
            (f"relabelled_{n}", control[n], boot[f"control_{n}"]),
        ):
            rows[name] = {m: float(point[k]) for k, m in enumerate(METRICS)}
            rows[name].update(
                {f"{m}_ci": percentile_ci(draws[:, k]) for k, m in enumerate(METRICS)}
            )
        differences[n] = {m: float(real[n][k] - control[n][k]) for k, m in enumerate(METRICS)}
        paired = boot[f"real_{n}"] - boot[f"control_{n}"]
        differences[n].update(
            {f"{m}_ci": percentile_ci(paired[:, k]) for k, m in enumerate(METRICS)}
        )
    spread = int(sum(int((s.observed > 0).sum()) for s in sets))
    targets = int(sum(s.tasks.shape[0] for s in sets))
    if min(spread, targets - spread) < MIN_CLASS:
        for row in (*rows.values(), *differences.values()):
            row["auc"], row["auc_ci"] = math.nan, [math.nan, math.nan]
    rows["global"] = {
        **ENVIRONMENT_FREE,
        **{f"{m}_ci": [v, v] for m, v in ENVIRONMENT_FREE.items()},
    }
    return ColdStart(
        rows=rows,
        differences=differences,
        targets=targets,
        spread=spread,
        environments=int(np.unique(np.concatenate([s.env for s in sets])).shape[0]),
        folds=env_folds(graph.env_index()[0], config.folds, config.seed),
        steps=sorted({s.step for s in sets}),
        config={
            "folds": config.folds,
            "join_step": config.join_step,
            "control_draws": config.control_draws,
            "bootstrap": config.bootstrap,
            "seed": config.seed,
        },
    )


def _bootstrap(sets: Sequence[FirstVisits], config: ColdStartConfig) -> dict[str, np.ndarray]:
    """(B, 2) scores per estimate on resampled new environments: the real graph's, and the
    control's on one draw per replicate."""

    def score(rows: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
        draw = int(rng.integers(config.control_draws))
        return np.stack(
            [
                _scores(
                    sets, rows, [s.real[n] if side == "real" else s.control[n][draw] for s in sets]
                )
                for side in ("real", "control")
                for n in ESTIMATES
            ]
        )

    rng = np.random.default_rng([config.seed, 2])
    draws = env_bootstrap([s.env for s in sets], config.bootstrap, rng, score)
    names = [f"{side}_{n}" for side in ("real", "control") for n in ESTIMATES]
    return {name: draws[:, k] for k, name in enumerate(names)}
