"""``envsched-gnn bench grpo``: the two halves of a GRPO step, rollout and update, on a policy.

Each step rolls out B random train tasks x K samples, then runs the update twice from the same
weights: the prefix-shared one the trainer uses (:mod:`~envsched_gnn.training.grpo.batch`) and
the plain one (every row whole). Prints rollout and update seconds and tokens/s per step and as
medians, and update / rollout (target <= 1 at B = 8, K = 8 on 2 cores).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.training.grpo.batch import UpdateItem, collate, pack_micro_batches
from envsched_gnn.validation import check_bounds, check_paths


@dataclass
class BenchGRPOArgs:
    """What ``bench grpo`` measures."""

    model: str
    """The policy: a local Hugging Face causal LM folder (e.g. the demo's SFT policy)."""
    pool: str | None = None
    """Pool folder (default: generate the demo preset's pool of --seed)."""
    batch_size: int = 8
    """B: train tasks per measured step (a seeded random choice)."""
    group_size: int = 8
    """K: samples per task."""
    steps: int = 4
    """Measured steps (after one warm-up rollout)."""
    micro_batch_size: int = 32
    """Most episodes per forward/backward pass of both updates."""
    threads: int = 0
    """torch threads (0: torch's default)."""
    seed: int = 0
    """Seed of the generated pool, the batches and the rollouts."""

    def __post_init__(self) -> None:
        sizes = ("batch_size", "steps", "micro_batch_size")
        check_bounds(
            self,
            integers=(*sizes, "group_size", "threads", "seed"),
            at_least={**dict.fromkeys(sizes, 1), "group_size": 2},
            non_negative=("threads", "seed"),
        )


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    p = groups["bench"].add_parser(
        "grpo",
        help="rollout vs update time of a GRPO step (prefix-shared and plain update)",
        description=__doc__.split("\n\n", 1)[1].replace("\n", " "),
    )
    add_config_flags(p, BenchGRPOArgs)
    p.set_defaults(func=_bench)


def _bench(namespace: argparse.Namespace) -> int:
    from envsched_gnn.training.grpo.objective import get_advantage_estimator
    from envsched_gnn.training.policy import check_policy_folder, load_agent_config
    from envsched_gnn.training.policy_engine import open_engine
    from envsched_gnn.training.rollout import EpisodeSpec

    args = config_from_args(BenchGRPOArgs, namespace)
    check_paths(folders={"--pool": args.pool})
    check_policy_folder(args.model, "--model")
    pool = _pool(args)
    agent = load_agent_config(args.model)
    advantages_of = get_advantage_estimator("grpo")
    train = [t.task_id for t in pool.split("train")]
    rng = np.random.default_rng(args.seed)
    rows = []
    with open_engine(args.model, pool, agent, device="cpu", threads=args.threads) as engine:
        model = engine.policy
        engine.rollout(train[:2], k=2, seed=args.seed)  # warm-up: workers, allocator
        for step in range(args.steps):
            tasks = [train[i] for i in rng.choice(len(train), args.batch_size, replace=False)]
            specs = [EpisodeSpec(t, k) for t in tasks for k in range(args.group_size)]
            start = time.perf_counter()
            episodes = engine.rollout_episodes(specs, seed=args.seed * 1000 + step)
            rollout_s = time.perf_counter() - start
            rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float64)
            advantages = advantages_of(rewards, args.group_size)
            items = [UpdateItem(float(a), e) for a, e in zip(advantages, episodes, strict=True)]
            shared_s, tokens = _timed_update(model, items, agent.temperature, args, shared=True)
            plain_s, _ = _timed_update(model, items, agent.temperature, args, shared=False)
            policy_tokens = sum(int(e.policy_mask.sum()) for e in episodes)
            row = {
                "step": step,
                "rollout_s": rollout_s,
                "rollout_policy_tokens_per_s": policy_tokens / rollout_s,
                "update_s": shared_s,
                "update_tokens_per_s": tokens / shared_s,
                "plain_update_s": plain_s,
                "plain_update_tokens_per_s": tokens / plain_s,
                "update_over_rollout": shared_s / rollout_s,
                "mean_reward": float(rewards.mean()),
                "tokens": tokens,
                "policy_tokens": policy_tokens,
            }
            rows.append(row)
            print(
                f"step {step}: rollout {rollout_s:.2f} s ({row['rollout_policy_tokens_per_s']:.0f} "
                f"policy tokens/s), update {shared_s:.2f} s ({row['update_tokens_per_s']:.0f} "
                f"tokens/s), plain update {plain_s:.2f} s, update / rollout "
                f"{row['update_over_rollout']:.2f}",
                flush=True,
            )
    summary = {
        name: statistics.median(r[name] for r in rows)
        for name in rows[0]
        if name not in ("step", "mean_reward")
    }
    summary |= {
        "batch_size": args.batch_size,
        "group_size": args.group_size,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
    }
    print(json.dumps({"median": summary}))
    return 0


def _pool(args: BenchGRPOArgs):
    if args.pool:
        from envsched_gnn.envs.pool_io import load_pool

        return load_pool(Path(args.pool))
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.pipeline.presets import PRESETS

    demo = PRESETS["demo"]
    return generate_pool(
        demo.envs, demo.tasks_per_env, args.seed, demo.test_per_env, max_calls=demo.max_calls
    )


def token_log_probs(
    logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Log-probability of each next token under ``softmax(logits / T)``, the distribution the
    rollouts sampled from (so that the ratio is 1 before the first update): the plain update's,
    every row whole and the head at every position.

    Shapes: logits (N, T, V), input_ids (N, T) -> (N, T-1); entry t is
    ``log pi(input_ids[:, t+1] | input_ids[:, :t+1])``; float32, or float64 for float64 logits.
    """
    logits = logits[:, :-1]
    if logits.dtype != torch.float64:
        logits = logits.float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return torch.gather(logp, -1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def _timed_update(
    model: torch.nn.Module,
    items: list[UpdateItem],
    temperature: float,
    args: BenchGRPOArgs,
    shared: bool,
) -> tuple[float, int]:
    """Seconds of one update (forward, backward, clip, AdamW step) on a copy of ``model``,
    and the sequence tokens it processed."""
    from envsched_gnn.training.grpo.batch import policy_log_probs
    from envsched_gnn.training.grpo.objective import policy_loss

    policy = copy.deepcopy(model).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    total = float(sum(int(i.episode.policy_mask.sum()) for i in items))
    if shared:
        micro_batches = pack_micro_batches(items, args.micro_batch_size, 1 << 30)
    else:
        ordered = sorted(items, key=lambda i: i.episode.token_ids.numel())
        size = args.micro_batch_size
        micro_batches = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    start = time.perf_counter()
    tokens = 0
    optimizer.zero_grad(set_to_none=True)
    for micro in micro_batches:
        batch = collate(micro)
        if shared:
            logp, _ = policy_log_probs(policy, batch, temperature)
        else:
            logits = policy(input_ids=batch.ids).logits
            logp = token_log_probs(logits, batch.ids, temperature)[batch.policy[:, 1:]]
        loss = policy_loss(logp, batch.old_logp, batch.advantages, total)
        loss.backward()
        tokens += batch.tokens
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimizer.step()
    return time.perf_counter() - start, tokens
