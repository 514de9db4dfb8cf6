"""EnvSched: the analytic (or a learned) predictor's q fed to the greedy selector (spec 4-5).
Ties draw on a generator seeded by (seed, t), so a restored run continues with the same batches.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.scheduler.base import BaseScheduler, SchedulerError
from envsched_gnn.scheduler.config import SelectorConfig
from envsched_gnn.scheduler.selector import GreedySelector, coverage_slots
from envsched_gnn.scheduler.similarity import SimilarityNeighbours


class EnvSchedScheduler(BaseScheduler):
    """The EnvSched scheduler.

    Args:
        graph: the task graph (node order = ``graph.task_ids``).
        batch_size: B, default 64.
        seed: seed of the tie-breaking order, default 0.
        config: selector configuration, default :class:`SelectorConfig` ().
        predictor: anything with ``predict(data, log, step) -> Prediction``; default the
            analytic predictor. Its ``update(data, log, step)``, if any, runs once per new step
            before predicting, and its ``state_dict`` travels with the scheduler's.
        name: the name reported in metrics and state (default ``"envsched"``).
        penalty_graph: the graph the similarity penalty reads (same nodes; default ``graph``).
        operations: ``{task_id: operation pattern}``, required when
            ``config.operation_coverage``, ignored otherwise.
    """

    name = "envsched"

    def __init__(
        self,
        graph: TaskGraph,
        *,
        batch_size: int = 64,
        seed: int = 0,
        config: SelectorConfig | None = None,
        predictor=None,
        name: str | None = None,
        penalty_graph: TaskGraph | None = None,
        operations: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        if penalty_graph is not None and penalty_graph.task_ids != graph.task_ids:
            raise ValueError("penalty_graph must have the nodes of graph, in the same order")
        if name is not None:
            self.name = name
        self.config = config if config is not None else SelectorConfig()
        if predictor is None:
            from envsched_gnn.models.analytic import AnalyticPredictor

            predictor = AnalyticPredictor()
        self.predictor = predictor
        self._penalty_graph = penalty_graph
        self._operations = operations
        self._graph_changed()
        self.last_prediction = None
        self._updated_step: int | None = None

    def _graph_changed(self) -> None:
        self.data = to_hetero_data(self.graph)
        self.neighbours = SimilarityNeighbours(
            self._penalty_graph if self._penalty_graph is not None else self.graph,
            self.config.penalty_relations,
        )
        self.selector = GreedySelector(
            self.env, self.neighbours, self.config, self._operation_codes()
        )

    def _operation_codes(self) -> np.ndarray | None:
        """Each task's operation-pattern index (first-seen order), when the selector reads
        them; a :class:`SchedulerError` naming the tasks ``operations`` lacks."""
        if not self.config.operation_coverage:
            return None
        if self._operations is None:
            raise SchedulerError(
                f"scheduler {self.name!r} spreads its coverage stage over operation patterns: "
                "it needs operations={task_id: pattern} (envs.abstract.operation_patterns)"
            )
        missing = [t for t in self.graph.task_ids if t not in self._operations]
        if missing:
            raise SchedulerError(
                f"scheduler {self.name!r}: no operation pattern for {len(missing)} task(s), "
                f"e.g. {missing[:3]}"
            )
        codes: dict[str, int] = {}
        patterns = (self._operations[t] for t in self.graph.task_ids)
        return np.fromiter(
            (codes.setdefault(p, len(codes)) for p in patterns), np.int64, self.graph.num_tasks
        )

    def grow(self, graph: TaskGraph) -> None:
        if self._penalty_graph is not None:
            raise SchedulerError(
                f"scheduler {self.name!r} reads a separate penalty graph (a control): it has "
                "no grown counterpart; build the scheduler on the grown graphs instead"
            )
        super().grow(graph)

    def _select(self, step: int, size: int):
        cfg = self.config
        start = time.perf_counter()
        if hasattr(self.predictor, "update") and self._updated_step != step:
            self.predictor.update(self.data, self.log, step)
            self._updated_step = step
        prediction = self.predictor.predict(self.data, self.log, step)
        predict_seconds = time.perf_counter() - start
        q = np.asarray(prediction.q, dtype=np.float64)
        self.last_prediction = prediction
        selection = self.selector.select(
            q,
            self.selections.counts_before(step),
            self.selections.window_counts(step, cfg.window_steps),
            self.selections.consecutive_blocked(step, cfg.consecutive_cap),
            size,
            self.rng(step).random(q.shape[0]),
            excluded=None if self.eligible.all() else ~self.eligible,
        )
        extra = {
            "scheduler/predict_seconds": predict_seconds,
            "scheduler/mean_q": float(q[selection.indices].mean()),
            "scheduler/coverage_slots": float(coverage_slots(cfg.rho, size)),
        }
        return selection.indices, selection.stages, selection.relaxed, extra

    def _pick_scores(self, indices: np.ndarray) -> np.ndarray | None:
        """q of the picked tasks at the step they were picked."""
        return np.asarray(self.last_prediction.q, dtype=np.float64)[indices]

    def _pick_spread(self, indices: np.ndarray) -> np.ndarray | None:
        """E_z of the picked tasks under the spread target (spec 9.3); None under the others."""
        e_z = getattr(self.last_prediction, "E_z", None)
        return None if e_z is None else np.asarray(e_z, dtype=np.float64)[indices]

    def _extra_state(self) -> dict:
        state: dict = {"updated_step": self._updated_step}
        if hasattr(self.predictor, "state_dict"):
            state["predictor"] = self.predictor.state_dict()
        return state

    def _load_extra_state(self, state: dict) -> None:
        self._updated_step = state.get("updated_step")
        if "predictor" in state and hasattr(self.predictor, "load_state_dict"):
            self.predictor.load_state_dict(state["predictor"])
