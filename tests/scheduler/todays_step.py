"""Today's analytic predictor (main at 6ff44b1), copied verbatim as the reference of the 1M
step's rewrite: every rank and quantile by a full sort, the observed rows by ``reduceat``
over all entries, the propagation on every node's evidence, shrink on node-major views.

Only the names it imports changed: ``shrink`` takes W broadcast as (N, H, 1) now, so the
node-major call passes ``[..., None]`` itself."""

from __future__ import annotations

import numpy as np
import torch

from envsched_gnn.graph.hetero import csr_tensor
from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.analytic import AnalyticPredictor, intra_op_threads
from envsched_gnn.models.calibration import (
    average_rank,
    decline_penalty,
    graph_prior,
    percentile_from_rank,
    percentile_rank,
    quantile_map,
    reconstructed_variance,
    shrink,
)
from envsched_gnn.models.graph_view import GraphView
from envsched_gnn.models.history import half_life_stats, observed_before
from envsched_gnn.models.prediction import Computation, HalfLifeResult
from envsched_gnn.models.propagation import EnvSchedPropagation


def todays_observed_rows(relation, observed: np.ndarray):
    num_nodes = relation.crow.shape[0] - 1
    has = np.zeros(num_nodes, bool)
    filled = np.flatnonzero(relation.crow[1:] > relation.crow[:-1])
    if filled.shape[0]:
        has[filled] = np.logical_or.reduceat(observed[relation.col], relation.crow[filled])
    rows = np.flatnonzero(has)
    if 2 * rows.shape[0] > num_nodes:
        return None, relation.adj_t
    start, counts = relation.crow[rows], relation.crow[rows + 1] - relation.crow[rows]
    crow = np.zeros(rows.shape[0] + 1, np.int64)
    np.cumsum(counts, out=crow[1:])
    entry = np.repeat(start - crow[:-1], counts) + np.arange(crow[-1])
    return rows, csr_tensor(
        crow, relation.col[entry], relation.sim[entry], (rows.shape[0], num_nodes)
    )


def todays_calibrate(e_v, f, weight_variance, weight_reconstructed):
    pr_v = percentile_rank(e_v)
    pr_f = percentile_rank(f)
    level = weight_variance * pr_v + weight_reconstructed * pr_f
    return {
        "pr_E_v": pr_v,
        "pr_f": pr_f,
        "percentile": level,
        "u": quantile_map(np.sort(e_v), level),
    }


class TodaysPredictor(AnalyticPredictor):
    def compute(self, data, log, step: int) -> Computation:
        step = int(step)
        view = GraphView.of(data)
        config = self.config
        n = view.num_nodes
        history = observed_before(log, step, n)
        evidence = np.empty((len(config.half_lives), 4, n))
        stats = [
            half_life_stats(history, n, h, config.defaults, out=evidence[k].T)
            for k, h in enumerate(config.half_lives)
        ]
        relation = self._todays_propagate(view, evidence, np.stack([s.g for s in stats]))
        prior = graph_prior(relation, config.relation_weights)
        node_major = (
            evidence[:, :3].transpose(2, 0, 1),
            evidence[:, 3].T[..., None],
            prior.transpose(2, 0, 1),
        )
        estimate = np.ascontiguousarray(shrink(*node_major, config.lambda_s).transpose(1, 2, 0))
        results = []
        for k, s in enumerate(stats):
            e_v, e_m, e_d = estimate[k]
            f = reconstructed_variance(e_m, e_d)
            calibrated = todays_calibrate(
                e_v, f, config.weight_variance_rank, config.weight_reconstructed_rank
            )
            per_relation = {r: relation[r][k].T for r in RELATIONS}
            results.append(
                HalfLifeResult(s, per_relation, prior[k].T, estimate[k].T, f, **calibrated)
            )
        long, short = results
        u = decline_penalty(long.u, short.u, config.eta)
        rank = average_rank(u)
        return Computation(step, view, history, long, short, u, rank, percentile_from_rank(rank))

    def _todays_propagate(self, view, evidence, g):
        half_lives, n = g.shape[0], view.num_nodes
        g_t = torch.from_numpy(g)
        observed = (evidence[:, 3] > 0).any(axis=0)
        targets = {r: todays_observed_rows(view.relations[r], observed) for r in RELATIONS}
        x = torch.from_numpy(np.ascontiguousarray(evidence.transpose(2, 0, 1)))
        layer = EnvSchedPropagation(lambda_g=self.config.lambda_g)
        no_neighbour = layer.update(x.new_zeros(1, 4 * half_lives), g_t).numpy()[0]
        work = 4 * half_lives * sum(int(a.values().shape[0]) for _, a in targets.values())
        out = {}
        with intra_op_threads(work):
            for r, (rows, adjacency) in targets.items():
                if rows is None:
                    estimate = layer(x, g_t, adjacency).numpy().transpose(1, 2, 0)
                    out[r] = np.ascontiguousarray(estimate)
                    continue
                out[r] = np.empty((half_lives, 3, n))
                out[r][:] = no_neighbour[..., None]
                if rows.shape[0]:
                    out[r][:, :, rows] = layer(x, g_t, adjacency).numpy().transpose(1, 2, 0)
        return out
