"""Several GRPO runs from one starting policy, in spawned processes when the cores allow; each
is :func:`~envsched_gnn.training.grpo.train.train_grpo` unchanged, results in run order, the
shared step-0 evaluation made once (:func:`evaluate_start`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.grpo.config import GRPOConfig, LaunchConfig
from envsched_gnn.training.grpo.train import GRPOResult, policy_evaluator
from envsched_gnn.training.policy_engine import on_gpu, open_engine
from envsched_gnn.workers import map_in_workers


@dataclass
class GRPORun:
    """One run: a config, the folder it writes and the graph its scheduler reads."""

    config: GRPOConfig
    out_dir: Path
    graph: TaskGraph


@dataclass
class SharedStart:
    """What every run shares (sent once to each worker process)."""

    pool: Pool
    policy_dir: Path
    agent: AgentConfig
    runtime: RuntimeConfig
    launch: LaunchConfig
    """How each run's trainer runs (no progress bar; ``print_steps`` prints lines instead)."""
    initial_eval: dict[str, Any] | None = None
    """The starting policy's step-0 evaluation, made once (None: each run makes its own)."""
    eval_seed: int | None = None
    """Seed of the held-out subset and its sampling (None: each run's own seed)."""


def evaluate_start(start: SharedStart, config: GRPOConfig) -> dict[str, Any]:
    """The step-0 evaluation each run of ``config``'s evaluation settings would make, made
    once: seeded by ``start.eval_seed`` (else ``config.seed``), as ``train_grpo`` seeds it."""
    evaluate = policy_evaluator(start.pool, config, start.eval_seed)
    with open_engine(
        start.policy_dir, start.pool, start.agent, start.runtime, start.launch.accelerator
    ) as engine:
        return evaluate(engine, 0)


def parallel_workers(requested: int, runs: int, accelerator: str) -> int:
    """Processes to use: ``requested`` when positive; otherwise one per run up to the CPU
    cores on a CPU-only machine, and 1 when a GPU is used (one process owns it)."""
    if requested > 0:
        return min(requested, runs)
    if on_gpu(accelerator):
        return 1
    return max(1, min(runs, os.cpu_count() or 1))


def train_runs(start: SharedStart, runs: Sequence[GRPORun], workers: int) -> Iterator[GRPOResult]:
    """Train every run from ``start``, yielding results in run order (``workers`` > 1: spawned)."""
    return map_in_workers(_train, runs, start, workers)


def _train(run: GRPORun, shared: SharedStart) -> GRPOResult:
    from envsched_gnn.training.grpo.train import train_grpo

    return train_grpo(
        shared.pool,
        run.graph,
        shared.policy_dir,
        run.config,
        run.out_dir,
        agent_config=shared.agent,
        runtime_config=shared.runtime,
        launch=replace(shared.launch, progress_bar=False),
        initial_eval=shared.initial_eval,
        eval_seed=shared.eval_seed,
    )
