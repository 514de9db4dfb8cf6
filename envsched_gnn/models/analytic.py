"""The analytic EnvSched predictor: spec section 4 end to end, float64 and deterministic.

Per half-life: history (4.1-4.3), one propagation per relation for both half-lives (4.4),
prior and shrinkage (4.5), u_h = Q_v(0.65 pr(E_v) + 0.35 pr(f)) (4.6); then
u = u_long - eta max(u_long - u_short, 0), q = pr(u) (4.7). With ``target = "spread"`` z
travels as a fourth channel and u_h = E_z (docs/design.md §9.3).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.calibration import (
    average_rank,
    calibrate,
    decline_penalty,
    graph_prior,
    percentile_from_rank,
    reconstructed_variance,
    shrink,
)
from envsched_gnn.models.config import PredictorConfig
from envsched_gnn.models.evidence import evidence_row, explain_task
from envsched_gnn.models.graph_view import GraphView
from envsched_gnn.models.history import (
    HistoryStats,
    ObservedHistory,
    half_life_stats,
    observed_before,
)
from envsched_gnn.models.prediction import Computation, HalfLifeResult, Prediction
from envsched_gnn.models.propagation import EnvSchedPropagation
from envsched_gnn.observations import ObservationLog

HistoryInput = ObservationLog | Mapping[str, np.ndarray]

SERIAL_WORK = 1 << 25
"""Propagations with fewer multiply-adds (propagated entries x channels) than this, about 0.1 s
of one core, run on one torch thread: on 2 shared cores a second thread cost more than it
saved at every size measured (whole-graph products, load ~5: 2,550 tasks 2 vs 36 ms per
prediction, 100,000 tasks 84 vs 235 ms, 1,000,000 tasks 1.2 vs 1.9 s). Larger ones use
torch's configured thread count."""


@contextmanager
def intra_op_threads(work: int) -> Iterator[None]:
    """Run the block on one torch thread if ``work`` < :data:`SERIAL_WORK`, restoring after."""
    threads = torch.get_num_threads()
    if work >= SERIAL_WORK or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class AnalyticPredictor:
    """The fixed EnvSched predictor (spec section 4) over a ``HeteroData`` task graph.

    ``predict(data, log, step)`` reads observations with s < ``step`` from ``log`` (an
    :class:`ObservationLog` in node order, or its ``arrays()``) and each relation's ``adj_t``
    from ``data``; it caches nothing. ``E_v``, ``E_m``, ``E_d`` are the long half-life's.
    """

    def __init__(self, config: PredictorConfig | None = None) -> None:
        self.config = config if config is not None else PredictorConfig()

    def predict(self, data, log: HistoryInput, step: int) -> Prediction:
        return self._run(data, log, step).prediction()

    def explain(self, data, log: HistoryInput, step: int, task_id: str) -> dict:
        """The evidence behind ``task_id``'s prediction at ``step`` (see :mod:`.evidence`)."""
        self._check_evidence_target()
        computation = self.compute(data, log, step)
        return explain_task(computation, self.config, self._node_of(computation.view, task_id))

    def evidence_rows(
        self, data, log: HistoryInput, step: int, task_ids: list[str] | None = None
    ) -> list[dict]:
        """Evidence of ``task_ids`` (default: all) as rows for the store's ``write_predictions``."""
        self._check_evidence_target()
        computation = self.compute(data, log, step)
        view = computation.view
        if task_ids is None:
            nodes = range(view.num_nodes)
        else:
            index = {t: i for i, t in enumerate(view.task_ids or [])}
            unknown = [t for t in task_ids if t not in index]
            if unknown:
                raise ValueError(f"unknown task(s) {unknown[:5]}: not nodes of the graph")
            nodes = [index[t] for t in task_ids]
        return [evidence_row(computation, self.config, i) for i in nodes]

    def _check_evidence_target(self) -> None:
        if self.config.target != "variance":
            raise ValueError(
                f"the evidence view accounts for the paper's variance target; this predictor "
                f"ranks by target {self.config.target!r} (use the default target to explain)"
            )

    def compute(self, data, log: HistoryInput, step: int) -> Computation:
        """Run spec section 4 and keep every intermediate value of every node."""
        return self._run(data, log, step).computation()

    def _run(self, data, log: HistoryInput, step: int) -> _Run:
        """Spec section 4 on the nodes :meth:`_propagate` returns (all, or the touched and one
        quiet node)."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        step = int(step)
        view = GraphView.of(data)
        if (
            isinstance(log, ObservationLog)
            and view.task_ids is not None
            and log.task_ids != view.task_ids
        ):
            raise ValueError(
                "the ObservationLog's task ids are not the graph's task ids in node order"
            )
        config = self.config
        n = view.num_nodes
        history = observed_before(log, step, n, config.statistics)
        # the evidence [W ybar_v, W ybar_m, W ybar_d, (W ybar_z,) W] of each half-life,
        # channel-major (H, C + 1, N) so that every per-task column is contiguous; the stats
        # write into it
        evidence = np.empty((len(config.half_lives), len(config.statistics) + 1, n))
        stats = [
            half_life_stats(history, n, h, config.defaults, out=evidence[k].T)
            for k, h in enumerate(config.half_lives)
        ]
        relation, nodes = self._propagate(view, evidence, np.stack([s.g for s in stats]))
        prior, estimate = self._prior_and_estimate(evidence, relation, nodes)
        calibrated = []
        for channels in estimate:
            e_v, e_m, e_d = channels[:3]
            f = reconstructed_variance(e_m, e_d)
            if config.target == "spread":
                calibrated.append({"f": f, **_spread_level(channels[3])})
                continue
            weights = config.weight_variance_rank, config.weight_reconstructed_rank
            calibrated.append({"f": f, **calibrate(e_v, f, *weights, nodes.repeats)})
        long, short = calibrated
        u = decline_penalty(long["u"], short["u"], config.eta)
        rank = average_rank(u, nodes.repeats)
        q = percentile_from_rank(rank, n)
        return _Run(
            step, view, history, stats, nodes, relation, prior, estimate, calibrated, u, rank, q
        )

    def _prior_and_estimate(
        self, evidence: np.ndarray, relation: dict, nodes: _Nodes
    ) -> tuple[np.ndarray, np.ndarray]:
        """4.5 for both half-lives at once on the ``nodes``, all arrays (H, C, M): P_y and E_y."""
        config = self.config
        weighted, weight = evidence[:, :-1], evidence[:, -1:]  # W broadcast over the C y
        if nodes.touched is not None:
            weighted, weight = weighted[:, :, nodes.index], weight[:, :, nodes.index]
        prior = graph_prior(relation, config.relation_weights)
        return prior, shrink(weighted, weight, prior, config.lambda_s)

    def _propagate(
        self, view: GraphView, evidence: np.ndarray, g: np.ndarray
    ) -> tuple[dict[str, np.ndarray], _Nodes]:
        """G_r for every relation, half-life and y on the nodes it returns: float64 (H, C, M) per
        relation, and those M nodes (all, or the touched ones and one *quiet* node).

        ``evidence`` (H, C + 1, N) and ``g`` (H, C). Only targets with an observed neighbour are
        propagated; every quiet node (unobserved, no observed neighbour) gets g_y(t) and the same
        E, f, u bit for bit, so one stands for them all (``repeats`` of
        :func:`~envsched_gnn.models.calibration.average_rank`) until the outputs are written.
        """
        (half_lives, channels), n = g.shape, view.num_nodes
        g_t = torch.from_numpy(g)
        observed = (evidence[:, -1] > 0).any(axis=0)
        targets = {r: view.relations[r].observed_rows(observed) for r in RELATIONS}
        nodes = _Nodes(n)
        # the layer's input, node-major (N, H, C + 1): of every node when a relation is propagated
        # whole, else of the observed nodes (see _observed_columns)
        if any(rows is None for rows, _ in targets.values()):
            x = torch.from_numpy(np.ascontiguousarray(evidence.transpose(2, 0, 1)))
        else:
            x, targets = _observed_columns(evidence, observed, targets)
            mask = observed.copy()
            for rows, _ in targets.values():
                mask[rows] = True
            quiet = int(np.argmin(mask)) if n else 0
            if n and not mask[quiet]:
                nodes = _Nodes(n, np.flatnonzero(mask), quiet)
        layer = self.__dict__.get("_layer")
        if layer is None or layer.lambda_g != self.config.lambda_g:
            # building a MessagePassing inspects signatures (milliseconds): once per predictor
            layer = self.__dict__["_layer"] = EnvSchedPropagation(lambda_g=self.config.lambda_g)
        no_neighbour = layer.update(x.new_zeros(1, (channels + 1) * half_lives), g_t).numpy()[0]
        work = (
            (channels + 1) * half_lives * sum(int(a.values().shape[0]) for _, a in targets.values())
        )
        width = n if nodes.touched is None else nodes.touched.shape[0] + 1
        out = {}
        with intra_op_threads(work):
            for r, (rows, adjacency) in targets.items():
                if rows is None:
                    estimate = layer(x, g_t, adjacency).numpy().transpose(1, 2, 0)
                    out[r] = np.ascontiguousarray(estimate)
                    continue
                out[r] = np.empty((half_lives, channels, width))
                out[r][:] = no_neighbour[..., None]
                if rows.shape[0]:
                    at = rows if nodes.touched is None else np.searchsorted(nodes.touched, rows)
                    out[r][:, :, at] = layer(x, g_t, adjacency).numpy().transpose(1, 2, 0)
        return out, nodes

    @staticmethod
    def _node_of(view: GraphView, task_id: str) -> int:
        if view.task_ids is None:
            raise ValueError("the graph carries no task ids (data.task_ids); cannot look up a task")
        try:
            return view.task_ids.index(task_id)
        except ValueError:
            raise ValueError(f"unknown task {task_id!r}: it is not a node of the graph") from None


def _spread_level(e_z: np.ndarray) -> dict[str, np.ndarray]:
    """u_h = E_z under the spread target, which replaces 4.6: its percentiles and quantile map
    are not computed (NaN in a :class:`Computation`, which the evidence view refuses)."""
    unused = np.full_like(e_z, np.nan)
    return {"pr_E_v": unused, "pr_f": unused, "percentile": unused, "u": e_z.copy()}


def _observed_columns(
    evidence: np.ndarray, observed: np.ndarray, targets: dict
) -> tuple[torch.Tensor, dict]:
    """The evidence of the ``observed`` nodes (O + 1, H, C + 1), last row zeros, and the kept
    rows of ``targets`` with columns renumbered into it (others to the zero row); same sums.
    """
    from envsched_gnn.graph.hetero import csr_tensor

    sources = np.flatnonzero(observed)
    x = np.zeros((sources.shape[0] + 1, *evidence.shape[:2]))
    x[:-1] = evidence[:, :, sources].transpose(2, 0, 1)
    renumbered = {}
    for r, (rows, adjacency) in targets.items():
        col = adjacency.col_indices().numpy()
        col = np.where(observed[col], np.searchsorted(sources, col), sources.shape[0])
        crow, sim = adjacency.crow_indices().numpy(), adjacency.values().numpy()
        renumbered[r] = (rows, csr_tensor(crow, col, sim, (rows.shape[0], x.shape[0])))
    return torch.from_numpy(x), renumbered


@dataclass(frozen=True)
class _Nodes:
    """The nodes a prediction computes: every node (``touched`` None), or the ``touched`` ones
    (sorted) and the ``quiet`` one, which stands for the ``repeats`` untouched nodes."""

    num_nodes: int
    touched: np.ndarray | None = None
    quiet: int = 0

    @property
    def repeats(self) -> int:
        return 1 if self.touched is None else self.num_nodes - self.touched.shape[0]

    @property
    def index(self) -> np.ndarray:
        """The computed nodes in order: the touched ones, then the quiet one."""
        return np.append(self.touched, self.quiet)

    def expand(self, values: np.ndarray) -> np.ndarray:
        """Per-node values (..., M) -> (..., N): the quiet node's values in every untouched node."""
        if self.touched is None:
            return values
        full = np.empty((*values.shape[:-1], self.num_nodes))
        full[:] = values[..., -1:]
        full[..., self.touched] = values[..., :-1]
        return full


@dataclass
class _Run:
    """One run of spec section 4 on the ``nodes``: per-half-life arrays (H, C, M), or (M,)."""

    step: int
    view: GraphView
    history: ObservedHistory
    stats: list[HistoryStats]
    nodes: _Nodes
    relation: dict[str, np.ndarray]
    prior: np.ndarray
    estimate: np.ndarray
    calibrated: list[dict[str, np.ndarray]]
    u: np.ndarray
    rank: np.ndarray
    q: np.ndarray

    def prediction(self) -> Prediction:
        """The outputs, written out for every node (the long half-life's E)."""
        expand = self.nodes.expand
        e_v, e_m, e_d, *e_z = expand(self.estimate[0])
        long, short = self.calibrated
        return Prediction(
            q=expand(self.q),
            u=expand(self.u),
            u_long=expand(long["u"]),
            u_short=expand(short["u"]),
            E_v=e_v,
            E_m=e_m,
            E_d=e_d,
            E_z=e_z[0] if e_z else None,
        )

    def computation(self) -> Computation:
        """Every intermediate value, written out for every node."""
        expand = self.nodes.expand
        relation = {r: expand(g) for r, g in self.relation.items()}
        prior, estimate = expand(self.prior), expand(self.estimate)
        results = [
            HalfLifeResult(
                stats,
                {r: relation[r][k].T for r in RELATIONS},
                prior[k].T,
                estimate[k].T,
                **{name: expand(values) for name, values in calibrated.items()},
            )
            for k, (stats, calibrated) in enumerate(zip(self.stats, self.calibrated, strict=True))
        ]
        long, short = results
        u, rank, q = expand(self.u), expand(self.rank), expand(self.q)
        return Computation(self.step, self.view, self.history, long, short, u, rank, q)
