"""CLI: ``train grpo`` (one GRPO run, a scheduler choosing each batch) and the main job ``run``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.training.agent_format import AgentConfig
    from envsched_gnn.training.grpo_config import GRPOConfig

    grpo, agent = GRPOConfig(), AgentConfig()
    p = groups["train"].add_parser(
        "grpo",
        help="GRPO with a scheduler choosing every batch (EnvSched, ablations, baselines)",
        description=(
            "Trains the policy in --model with GRPO on the pool's train split; --scheduler "
            "chooses each batch from the task graph (--graph file, or read from --store). "
            "Observations go to --store when given. With --devices > 1 (DDP) and the "
            "embedded store, pass --graph (each process reads it)."
        ),
    )
    p.add_argument("--pool", required=True, help="pool folder (envs.json, tasks.json)")
    p.add_argument("--model", required=True, help="policy: a local HF causal LM folder")
    p.add_argument("--out", required=True, help="run folder (checkpoints, logs, policy)")
    p.add_argument("--graph", help="graph.json (default: read the graph from --store)")
    p.add_argument("--store", help="store URI or folder; observations are written there")
    p.add_argument("--scheduler", default=grpo.scheduler, help="scheduler name (registry)")
    p.add_argument("--batch-size", type=int, default=grpo.batch_size, help="B")
    p.add_argument("--group-size", type=int, default=grpo.group_size, help="K")
    p.add_argument("--steps", type=int, default=grpo.steps)
    p.add_argument("--lr", type=float, default=grpo.lr)
    p.add_argument("--lr-warmup-steps", type=int, default=grpo.lr_warmup_steps)
    p.add_argument("--ppo-epochs", type=int, default=grpo.ppo_epochs, help="passes per batch")
    p.add_argument(
        "--mini-batches", type=int, default=grpo.mini_batches, help="optimiser steps per pass"
    )
    p.add_argument("--clip", type=float, default=grpo.clip, help="PPO clip range")
    p.add_argument("--kl-coef", type=float, default=grpo.kl_coef)
    p.add_argument("--advantage", choices=("grpo", "dr_grpo"), default=grpo.advantage_estimator)
    p.add_argument("--micro-batch-size", type=int, default=grpo.micro_batch_size)
    p.add_argument("--micro-batch-tokens", type=int, default=grpo.micro_batch_tokens)
    p.add_argument("--eval-every", type=int, default=grpo.eval_every)
    p.add_argument("--eval-tasks", type=int, default=grpo.eval_tasks)
    p.add_argument("--eval-samples", type=int, default=grpo.eval_samples)
    saved = "default: the policy's agent_config.json, else"
    p.add_argument(
        "--temperature", type=float, help=f"sampling temperature ({saved} {agent.temperature})"
    )
    p.add_argument("--max-turns", type=int, help=f"turns per episode ({saved} {agent.max_turns})")
    p.add_argument(
        "--max-new-tokens", type=int, help=f"tokens per turn ({saved} {agent.max_new_tokens})"
    )
    p.add_argument("--workers", type=int, default=2, help="environment worker processes")
    p.add_argument("--seed", type=int, default=grpo.seed)
    p.add_argument("--resume", metavar="CKPT", help="continue the run of this checkpoint")
    p.add_argument("--stop-after", type=int, help="stop after this many steps in total")
    p.add_argument("--checkpoint-every", type=int, default=0, help="keep a checkpoint every N")
    p.add_argument("--accelerator", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--devices", type=int, default=1, help="processes (DDP when > 1)")
    p.add_argument("--strategy", default="auto", help="Lightning strategy, e.g. ddp")
    p.add_argument("--no-progress-bar", action="store_true")
    p.set_defaults(func=_train_grpo)

    from envsched_gnn.pipeline import add_run_arguments

    p = groups[""].add_parser(
        "run",
        help="the main job: pool, graph, SFT, GRPO with EnvSched vs random, evaluation, report",
        description=(
            "On the embedded default store: generate the demo pool, build the graph, SFT warm "
            "start, then GRPO with each scheduler at the same rollout budget from the same SFT "
            "policy, held-out evaluation, and a report folder reports/<run>/."
        ),
    )
    add_run_arguments(p)
    p.set_defaults(func=_run)

    p = groups["train"].add_parser(
        "demo-policy",
        help="SFT of the built-in policy on the demo pool, packaged for the main job",
        description=(
            "Generates the preset's pool, runs SFT of the built-in policy with the preset's "
            "recipe and writes the policy with manifest.json (the fingerprint of SFT's "
            "inputs). The main job uses such a package instead of running SFT when its own "
            "inputs have the same fingerprint; the project ships the demo preset's at "
            "envsched_gnn/data/demo_sft."
        ),
    )
    p.add_argument("--out", required=True, help="package folder (replaced)")
    p.add_argument("--preset", default="demo", help="main-job preset (demo)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pool and SFT (0)")
    p.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default; not hashed)"
    )
    p.set_defaults(func=_demo_policy)


def _train_grpo(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.training.grpo_config import GRPOConfig
    from envsched_gnn.training.grpo_train import LaunchConfig, train_grpo
    from envsched_gnn.training.observation_sink import StoreWriter
    from envsched_gnn.training.policy import load_agent_config

    config = GRPOConfig(
        scheduler=args.scheduler,
        batch_size=args.batch_size,
        group_size=args.group_size,
        steps=args.steps,
        advantage_estimator=args.advantage,
        lr=args.lr,
        lr_warmup_steps=args.lr_warmup_steps,
        ppo_epochs=args.ppo_epochs,
        mini_batches=args.mini_batches,
        clip=args.clip,
        kl_coef=args.kl_coef,
        micro_batch_size=args.micro_batch_size,
        micro_batch_tokens=args.micro_batch_tokens,
        eval_every=args.eval_every,
        eval_tasks=args.eval_tasks,
        eval_samples=args.eval_samples,
        seed=args.seed,
    )
    pool = load_pool(args.pool)
    if args.graph:
        graph = read_graph(args.graph)
    elif args.store:
        with open_store(args.store) as store:
            graph = store.read_graph()
    else:
        print("error: give --graph FILE or --store SPEC to read the task graph from")
        return 2
    writer = StoreWriter(args.store) if args.store else None
    try:
        result = train_grpo(
            pool,
            graph,
            args.model,
            config,
            args.out,
            agent_config=load_agent_config(
                args.model,
                max_turns=args.max_turns,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
            ),
            runtime_config=RuntimeConfig(workers=args.workers),
            launch=LaunchConfig(
                accelerator=args.accelerator,
                devices=args.devices,
                strategy=args.strategy,
                checkpoint_every=args.checkpoint_every,
                progress_bar=not args.no_progress_bar,
            ),
            write_observations=writer,
            resume=args.resume,
            stop_after=args.stop_after,
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
                "out": str(Path(args.out)),
                "scheduler": result.scheduler,
                "steps": len(result.steps),
                "rollouts": result.rollouts,
                "heldout_mean_reward": last,
                "wall_s": round(result.wall_s, 1),
            }
        )
    )
    return 0


def _demo_policy(args: argparse.Namespace) -> int:
    from envsched_gnn.pipeline import package_demo_policy

    out = package_demo_policy(args.out, args.preset, args.seed, args.threads)
    print(f"packaged SFT policy in {out}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from envsched_gnn.pipeline import run_from_args

    return run_from_args(args)
