"""What the GRPO tests share: the hand-made pool's graph, a small run configuration, a run."""

from __future__ import annotations

import functools
import itertools
from dataclasses import replace
from pathlib import Path

from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.grpo.config import GRPOConfig, LaunchConfig
from envsched_gnn.training.grpo.train import GRPOResult, train_grpo
from envsched_gnn.training.sft import run_sft
from tests.envs.handmade_pool import handmade_pool
from tests.training.tiny_policy import TINY_SFT, _scratch, untrained_policy_dir

POOL = handmade_pool()
AGENT = AgentConfig(max_turns=4, max_new_tokens=48, temperature=1.0)
RUNTIME = RuntimeConfig(workers=1)


@functools.cache
def grpo_policy_dir() -> Path:
    """The tiny policy after an SFT long enough that its K rollouts of a task disagree
    (measured: 150 steps at lr 1e-2 give groups like 1,1,0,1,0,0 on the train tasks at
    T = 1); about a minute on 2 cores."""
    config = replace(TINY_SFT, max_steps=100, learning_rate=1e-2, checkpoint_every_steps=1000)
    return run_sft(POOL, untrained_policy_dir(), config, _scratch() / "grpo-sft")


def handmade_graph() -> TaskGraph:
    """Every pair of tasks linked: ``within`` inside an environment (sim 0.8), ``cross``
    across environments (sim 0.3)."""
    rows = []
    for a, b in itertools.permutations(POOL.tasks, 2):
        relation, sim = ("within", 0.8) if a.env_id == b.env_id else ("cross", 0.3)
        rows.append((a.task_id, b.task_id, relation, sim))
    return TaskGraph.from_edge_rows([(t.task_id, t.env_id) for t in POOL.tasks], rows)


def small_config(**overrides) -> GRPOConfig:
    """B = 2 of the 4 train tasks, K = 4, a learning rate that moves a tiny model."""
    values = dict(
        batch_size=2,
        group_size=4,
        steps=2,
        lr=1e-3,
        micro_batch_size=3,
        eval_every=0,
        eval_samples=2,
        seed=3,
    )
    values.update(overrides)
    return GRPOConfig(**values)


def run(config: GRPOConfig, out: Path, **kwargs) -> GRPOResult:
    return train_grpo(
        POOL,
        handmade_graph(),
        grpo_policy_dir(),
        config,
        out,
        agent_config=AGENT,
        runtime_config=RUNTIME,
        launch=LaunchConfig(accelerator="cpu", progress_bar=False),
        **kwargs,
    )
