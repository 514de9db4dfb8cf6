"""Node features of the learned propagation, and the analytic estimates it refines.

Per half-life h and y in (v, m, d), each scaled to [0, 1] (v by 4), from spec 4.1-4.5:

    own(i)      = ybar(i,t), or g_y(t) where W(i,t) = 0
    seen(i)     = 1[W(i,t) > 0]
    evidence(i) = log(1 + W(i,t))
    global      = g_y(t)
    env(i)      = (sum_{j in e(i)} W(j,t) ybar(j,t) + lambda_g g_y(t))
                  / (sum_{j in e(i)} W(j,t) + lambda_g)
    env_evidence(i) = log(1 + sum_{j in e(i)} W(j,t) / n_e),  env_seen(i) = share of e(i) observed
    G_r(i)      = the relation estimate of spec 4.4, r in (within, cross)
    r_evidence(i) = log(1 + sum_{j in N_t^r(i)} sim_r(i,j) W(j,t))
    E(i)        = the analytic estimate E_y(i,t) of spec 4.5 (:attr:`NodeFeatures.base`)
    count(i)    = log(1 + #observations of i),  long(i) = 1[h = h_long]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.config import Y_NAMES, PredictorConfig

SCALE = np.array([4.0, 1.0, 1.0])
"""Per-channel scale of (v, m, d) so that every statistic lies in [0, 1]."""

FEATURE_NAMES = (
    *(f"own_{y}" for y in Y_NAMES),
    "seen",
    "evidence",
    *(f"global_{y}" for y in Y_NAMES),
    *(f"env_{y}" for y in Y_NAMES),
    "env_evidence",
    "env_seen",
    *(f"{r}_{y}" for r in RELATIONS for y in Y_NAMES),
    *(f"{r}_evidence" for r in RELATIONS),
    *(f"analytic_{y}" for y in Y_NAMES),
    "count",
    "long",
)


@dataclass
class NodeFeatures:
    """``x``: float64 (2, N, F) features per half-life; ``base``: float64 (2, N, 3) the analytic
    estimates (E_v, E_m, E_d) per half-life, unscaled."""

    x: np.ndarray
    base: np.ndarray


def node_features(data, log, step: int, config: PredictorConfig, predictor=None) -> NodeFeatures:
    """Features of every task at ``step`` for (h_long, h_short) (module docstring)."""
    from envsched_gnn.models.analytic import AnalyticPredictor

    predictor = predictor or AnalyticPredictor(config)
    computation = predictor.compute(data, log, step)
    env = computation.view.env
    if env is None:
        raise ValueError("the graph has no environments (data['task'].env)")
    n = env.shape[0]
    n_env = int(env.max()) + 1 if n else 0
    env_size = np.bincount(env, minlength=n_env).astype(np.float64)
    count = np.log1p(np.bincount(computation.history.task, minlength=n).astype(np.float64))
    out = np.empty((2, n, len(FEATURE_NAMES)))
    base = np.empty((2, n, len(Y_NAMES)))
    for k, result in enumerate((computation.long, computation.short)):
        stats = result.stats
        seen = stats.weight > 0
        own = np.where(seen[:, None], stats.own_estimate(), stats.g)
        env_weight = np.bincount(env, weights=stats.weight, minlength=n_env)
        env_sum = np.stack(
            [
                np.bincount(env, weights=stats.weighted_sum[:, c], minlength=n_env)
                for c in range(len(Y_NAMES))
            ],
            axis=1,
        )
        env_estimate = (env_sum + config.lambda_g * stats.g) / (env_weight + config.lambda_g)[
            :, None
        ]
        env_seen = np.bincount(env, weights=seen.astype(np.float64), minlength=n_env) / env_size
        relation_evidence = [
            np.log1p(_neighbour_weight(computation.view.relations[r], stats.weight))
            for r in RELATIONS
        ]
        out[k] = np.column_stack(
            [
                own * SCALE,
                seen,
                np.log1p(stats.weight),
                np.broadcast_to(stats.g * SCALE, (n, len(Y_NAMES))),
                env_estimate[env] * SCALE,
                np.log1p(env_weight / env_size)[env],
                env_seen[env],
                *(result.relation[r] * SCALE for r in RELATIONS),
                *relation_evidence,
                result.estimate * SCALE,
                count,
                np.full(n, 1.0 if k == 0 else 0.0),
            ]
        )
        base[k] = result.estimate
    return NodeFeatures(out, base)


def _neighbour_weight(relation, weight: np.ndarray) -> np.ndarray:
    """sum_j sim(i,j) W(j,t) over the in-neighbours j of each target i. Shapes: (N,) -> (N,)."""
    n = relation.crow.shape[0] - 1
    target = np.repeat(np.arange(n), np.diff(relation.crow))
    return np.bincount(target, weights=relation.sim * weight[relation.col], minlength=n)
