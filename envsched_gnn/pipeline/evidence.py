"""The main job's evidence picture: why EnvSched rated its top task at the last step as it did."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.observations import Observation, ObservationLog

EVIDENCE_FILE = "evidence.png"


def write_top_evidence(
    pool: Pool, graph: TaskGraph, observations: Sequence[Observation], step: int, out_dir: Path
) -> dict:
    """Draw the evidence of the task of highest q at ``step`` (the analytic predictor on the
    train split's graph, the scheduler's, with the observations of steps s < ``step``) into
    ``out_dir/evidence.png``; returns ``{"task", "step", "q", "file"}`` for the report (ties:
    the first such task)."""
    from envsched_gnn.graph.hetero import to_hetero_data
    from envsched_gnn.models.analytic import AnalyticPredictor
    from envsched_gnn.models.evidence_picture import write_png

    graph = graph.subgraph([task.task_id for task in pool.split("train")])
    log = ObservationLog(graph.task_ids)
    log.extend(observations)
    data, predictor = to_hetero_data(graph), AnalyticPredictor()
    q = predictor.predict(data, log, step).q
    top = int(np.argmax(q))
    task = graph.task_ids[top]
    path = write_png(predictor.explain(data, log, step, task), Path(out_dir) / EVIDENCE_FILE)
    return {"task": task, "step": step, "q": float(q[top]), "file": path.name}
