"""CLI: ``train grpo``, one GRPO run with a scheduler choosing every batch."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.validation import RUN_ERROR, check_bounds, check_paths, fail

AGENT_FIELDS = ("temperature", "max_turns", "max_new_tokens")
"""The AgentConfig fields a run may override (default: the policy's agent_config.json)."""


@dataclass
class GRPOArgs:
    """The inputs and outputs of ``train grpo``; its settings are the configs' fields."""

    pool: str
    """Pool folder (envs.json, tasks.json); GRPO trains on its train split."""
    model: str
    """The policy to train: a local Hugging Face causal LM folder."""
    out: str
    """Run folder: checkpoints/, logs/, policy/ (the trained policy), grpo_result.json."""
    graph: str | None = None
    """The task graph as a graph.json file (default: read the graph from --store)."""
    store: str | None = None
    """Graph store (a folder or a Bolt URI); the run's observations are written there."""
    resume: str | None = None
    """Continue the run of this checkpoint (a .ckpt file of an earlier run's checkpoints/)."""
    stop_after: int | None = None
    """Stop after this many steps in total (counting a resumed run's earlier steps)."""
    retire_envs: list[str] | None = None
    """Environments whose tasks are no longer selected (their observations stay evidence)."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"stop_after": 1}, optional=("stop_after",))


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.scheduler.commands import add_sampling_flags
    from envsched_gnn.training.agent_format import AgentConfig
    from envsched_gnn.training.grpo.config import GRPOConfig, LaunchConfig
    from envsched_gnn.training.grpo.objective import ADVANTAGE_ESTIMATORS
    from envsched_gnn.training.policy_engine import ACCELERATORS

    p = groups["train"].add_parser(
        "grpo",
        help="GRPO with a scheduler choosing every batch (EnvSched, ablations, baselines)",
        description=(
            "Trains the policy in --model with GRPO on the pool's train split; --scheduler "
            "chooses each batch from the task graph (--graph file, or read from --store). "
            "--resume continues a run, also on a grown pool and graph (graph add-env): the "
            "scheduler keeps every observation and the new tasks join unobserved. "
            "Observations go to --store when given. With --devices > 1 (DDP) and the "
            "managed local store, pass --graph (each process reads it). --temperature, "
            "--max-turns and --max-new-tokens default to the policy's agent_config.json, "
            "else to AgentConfig's defaults."
        ),
    )
    add_config_flags(p, GRPOArgs, fields=["pool", "model", "out", "graph", "store"])
    add_config_flags(
        p,
        GRPOConfig,
        fields=[
            "scheduler",
            "batch_size",
            "group_size",
            "steps",
            "lr",
            "lr_warmup_steps",
            "ppo_epochs",
            "mini_batches",
            "clip",
            "kl_coef",
            "advantage_estimator",
            "micro_batch_size",
            "micro_batch_tokens",
            "eval_every",
            "eval_rollouts",
            "eval_tasks",
            "eval_samples",
            "pool_eval_samples",
            "pool_eval_tasks",
        ],  # fmt: skip
        flags={"advantage_estimator": "--advantage"},
        choices={"advantage_estimator": tuple(ADVANTAGE_ESTIMATORS)},
    )
    add_sampling_flags(p)
    add_config_flags(p, AgentConfig, fields=AGENT_FIELDS, defaults=dict.fromkeys(AGENT_FIELDS))
    add_config_flags(p, RuntimeConfig, fields=["workers", "reward"])
    add_config_flags(p, GRPOConfig, fields=["seed"])
    add_config_flags(
        p,
        GRPOArgs,
        fields=["resume", "stop_after", "retire_envs"],
        flags={"retire_envs": "--retire-env"},
        metavars={"resume": "CKPT", "retire_envs": "ENV"},
    )
    add_config_flags(
        p,
        LaunchConfig,
        fields=["checkpoint_every", "accelerator", "devices", "strategy", "progress_bar"],
        choices={"accelerator": ACCELERATORS},
    )
    p.set_defaults(func=_train_grpo)


def _train_grpo(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.graph_store.connect import check_store_spec, open_store
    from envsched_gnn.observations import check_reward
    from envsched_gnn.scheduler.commands import sampling_from_args
    from envsched_gnn.training.grpo.config import GRPOConfig, LaunchConfig
    from envsched_gnn.training.grpo.train import train_grpo
    from envsched_gnn.training.observation_sink import StoreWriter
    from envsched_gnn.training.policy import check_policy_folder, load_agent_config

    # every cheap input first: a wrong one is refused before the pool, graph or policy loads
    run = config_from_args(GRPOArgs, args)
    config = config_from_args(GRPOConfig, args, sampling=sampling_from_args(args))
    runtime = config_from_args(RuntimeConfig, args)
    launch = config_from_args(LaunchConfig, args)
    if not run.graph and not run.store:
        return fail("give --graph FILE or --store SPEC to read the task graph from")
    check_paths(
        folders={"--pool": run.pool},
        files={"--graph": run.graph, "--resume": run.resume},
        out_folders={"--out": run.out},
    )
    check_policy_folder(run.model, "--model")
    check_store_spec(run.store)
    agent = load_agent_config(run.model, **{name: getattr(args, name) for name in AGENT_FIELDS})
    pool = load_pool(run.pool)
    graph = read_graph(run.graph) if run.graph else None
    if run.store and (graph is None or launch.devices == 1):
        # the store's reward is checked before the policy loads (DDP ranks given --graph leave
        # the store to rank 0's writer, whose every write checks it too)
        with open_store(run.store) as store:
            if graph is None:
                graph = store.read_graph()
            stored = store.observation_reward()
        if stored is not None:
            check_reward(stored, runtime.reward, f"the store {run.store}")
    writer = StoreWriter(run.store) if run.store else None
    try:
        result = train_grpo(
            pool,
            graph,
            run.model,
            config,
            run.out,
            agent_config=agent,
            runtime_config=runtime,
            launch=launch,
            write_observations=writer,
            resume=run.resume,
            stop_after=run.stop_after,
            retire_envs=run.retire_envs or (),
        )
    finally:
        if writer is not None:
            writer.close()
    if result.rank != 0:
        return 0
    last = result.evals[-1]["mean_reward"] if result.evals else None
    print(
        json.dumps(
            {
                "out": str(Path(run.out)),
                "scheduler": result.scheduler,
                "steps": len(result.steps),
                "rollouts": result.rollouts,
                "heldout_mean_reward": last,
                "wall_s": round(result.wall_s, 1),
            }
        )
    )
    if result.unwritten_observations:  # the store stayed away: the run is whole, its writes not
        out = Path(run.out)
        return fail(
            f"the store {run.store} did not take {result.unwritten_observations} of the run's "
            f"observations within {result.config['store_flush_timeout_s']:g} s after training; "
            f"the run is complete ({out / 'history.jsonl'} holds every observation) and they are "
            f"kept in {out / 'unwritten_observations.jsonl'} and the checkpoint: once the store "
            f"is back, run this command again with --resume {out / 'checkpoints' / 'last.ckpt'}",
            RUN_ERROR,
        )
    return 0
