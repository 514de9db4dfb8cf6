"""The evidence behind one task's prediction: who moved its estimate, and by how much.

For relation r, observed neighbour j contributes the share a_r(i,j,t) / (sum_j a_r + lambda_g)
of G_r, and the global reference g_y(t) the share lambda_g / (sum_j a_r + lambda_g); they sum
to 1 and G_r = sum_j share_j ybar(j,t) + share_g g_y(t). The own history takes the share
W / (W + lambda_s) of E_y, the graph prior lambda_s / (W + lambda_s).
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.config import Y_NAMES, PredictorConfig
from envsched_gnn.models.history import CLIP_UPPER
from envsched_gnn.models.prediction import Computation, HalfLifeResult


def _by_name(values: np.ndarray) -> dict[str, float]:
    return {name: float(values[c]) for c, name in enumerate(Y_NAMES)}


def _env_of(computation: Computation, j: int) -> str | None:
    view = computation.view
    if view.env is None:
        return None
    code = int(view.env[j])
    return view.env_names[code] if view.env_names is not None else str(code)


def _task_of(computation: Computation, j: int) -> str:
    ids = computation.view.task_ids
    return ids[j] if ids is not None else str(j)


def relation_evidence(
    computation: Computation, result: HalfLifeResult, config: PredictorConfig, relation: str, i: int
) -> dict:
    """G_r(i,t) and each observed in-neighbour's part in it, largest share first."""
    cols, sims = computation.view.relations[relation].neighbours(i)
    weight = result.stats.weight[cols]
    observed = weight > 0
    cols, sims, weight = cols[observed], sims[observed], weight[observed]
    a = sims * weight
    denominator = float(a.sum()) + config.lambda_g
    ybar = result.stats.weighted_sum[cols] / weight[:, None]
    neighbours = [
        {
            "task_id": _task_of(computation, int(j)),
            "env": _env_of(computation, int(j)),
            "sim": float(sims[k]),
            "W": float(weight[k]),
            **{f"y_{name}": float(ybar[k, c]) for c, name in enumerate(Y_NAMES)},
            "share": float(a[k] / denominator),
        }
        for k, j in enumerate(cols)
    ]
    neighbours.sort(key=lambda row: (-row["share"], row["task_id"]))
    return {
        "weight": float(config.relation_weights[relation]),
        "G": _by_name(result.relation[relation][i]),
        "global_share": config.lambda_g / denominator,
        "neighbours": neighbours,
    }


def half_life_evidence(
    computation: Computation, result: HalfLifeResult, config: PredictorConfig, i: int
) -> dict:
    """Steps 4.1-4.6 for task i at one half-life."""
    stats = result.stats
    own_weight = float(stats.weight[i])
    return {
        "half_life": stats.half_life,
        "g": _by_name(stats.g),
        "relations": {r: relation_evidence(computation, result, config, r, i) for r in RELATIONS},
        "prior": _by_name(result.prior[i]),
        "own_W": own_weight,
        "own_ybar": _by_name(stats.weighted_sum[i] / own_weight) if own_weight > 0 else None,
        "shrink_share": own_weight / (own_weight + config.lambda_s),
        "prior_share": config.lambda_s / (own_weight + config.lambda_s),
        "E": _by_name(result.estimate[i]),
        "f": float(result.f[i]),
        "pr_E_v": float(result.pr_E_v[i]),
        "pr_f": float(result.pr_f[i]),
        "percentile": float(result.percentile[i]),
        "u": float(result.u[i]),
    }


def own_history(computation: Computation, config: PredictorConfig, i: int) -> list[dict]:
    """Task i's observations before step t, with their weights and centred values per half-life."""
    history = computation.history
    rows = np.flatnonzero(history.task == i)
    out = []
    for k in rows[np.argsort(history.step[rows], kind="stable")]:
        s = int(history.step[k])
        row: dict = {"step": s, **{name: float(history.y[name][k]) for name in Y_NAMES}}
        for label, result in (("long", computation.long), ("short", computation.short)):
            row[f"w_{label}"] = float(2.0 ** (-(computation.step - s) / result.stats.half_life))
            row[f"centred_{label}"] = {
                name: float(
                    np.clip(
                        history.deviation[name][k] + result.stats.g[c],
                        0.0,
                        CLIP_UPPER[name],
                    )
                )
                for c, name in enumerate(Y_NAMES)
            }
        out.append(row)
    return out


def explain_task(computation: Computation, config: PredictorConfig, i: int) -> dict:
    """The full account of task i's prediction (headline numbers: long half-life, for v)."""
    long = half_life_evidence(computation, computation.long, config, i)
    short = half_life_evidence(computation, computation.short, config, i)
    return {
        "task_id": _task_of(computation, i),
        "env": _env_of(computation, i),
        "step": computation.step,
        "num_tasks": computation.view.num_nodes,
        "q": float(computation.q[i]),
        "rank": float(computation.rank[i]),
        "u": float(computation.u[i]),
        "u_long": long["u"],
        "u_short": short["u"],
        "E_v": long["E"]["v"],
        "E_m": long["E"]["m"],
        "E_d": long["E"]["d"],
        "f": long["f"],
        "G_within": long["relations"]["within"]["G"]["v"],
        "G_cross": long["relations"]["cross"]["G"]["v"],
        "prior": long["prior"]["v"],
        "own_W": long["own_W"],
        "shrink_share": long["shrink_share"],
        "half_lives": {"long": long, "short": short},
        "own_history": own_history(computation, config, i),
        "config": asdict(config),
    }


def evidence_row(computation: Computation, config: PredictorConfig, i: int) -> dict:
    """Task i's evidence (long half-life) in the row format of the store's ``write_predictions``."""
    long = half_life_evidence(computation, computation.long, config, i)
    return {
        "task_id": _task_of(computation, i),
        "q": float(computation.q[i]),
        "u": float(computation.u[i]),
        "u_long": long["u"],
        "u_short": float(computation.short.u[i]),
        "E_v": long["E"]["v"],
        "E_m": long["E"]["m"],
        "E_d": long["E"]["d"],
        "G_within": long["relations"]["within"]["G"]["v"],
        "G_cross": long["relations"]["cross"]["G"]["v"],
        "prior": long["prior"]["v"],
        "own_W": long["own_W"],
        "shrink_share": long["shrink_share"],
        "rank": float(computation.rank[i]),
        "neighbours": [
            {
                "task_id": n["task_id"],
                "relation": relation,
                "sim": n["sim"],
                "W": n["W"],
                "y_v": n["y_v"],
                "y_m": n["y_m"],
                "y_d": n["y_d"],
                "share": n["share"],
            }
            for relation in RELATIONS
            for n in long["relations"][relation]["neighbours"]
        ],
    }
