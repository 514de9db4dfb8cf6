"""CLI: ``eval policy``, the held-out evaluation of a policy (K samples per task)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.validation import check_bounds, check_paths, fail

EVAL_AGENT_FIELDS = ("temperature", "tool_format")
"""The AgentConfig fields an evaluation may override (default: the policy's agent_config.json)."""


@dataclass
class EvalPolicyArgs:
    """What ``eval policy`` evaluates, and how."""

    pool: str
    """Pool folder (envs.json, tasks.json)."""
    model: str
    """The policy: a local Hugging Face causal LM folder."""
    split: str = "test"
    """Split of the pool to evaluate."""
    k: int = 8
    """Samples per task."""
    seed: int = 0
    """Seed of the sampling."""
    limit: int | None = None
    """Evaluate only the first N tasks of the split."""
    tasks_per_batch: int = 16
    """Tasks rolled out together (x k episodes)."""
    device: str = "auto"
    """Where the policy runs: auto (CUDA when there is one), cpu, cuda, cuda:1, ..."""
    threads: int = 1
    """torch threads on CPU (0: torch's default; 1 was 2.5-3.6x faster on 2 busy cores)."""
    out: str | None = None
    """Write the full result as JSON to this file."""

    def __post_init__(self) -> None:
        from envsched_gnn.training.policy_engine import check_device

        check_bounds(
            self,
            integers=("k", "seed", "limit", "tasks_per_batch", "threads"),
            at_least={"k": 1, "limit": 1, "tasks_per_batch": 1},
            non_negative=("seed", "threads"),
            optional=("limit",),
        )
        check_device(self.device, "--device")


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.training.agent_format import TOOL_FORMATS, AgentConfig

    p = groups["eval"].add_parser(
        "policy",
        help="held-out evaluation: K samples per task",
        description=(
            "--temperature and --tool-format default to the policy's agent_config.json (what "
            "it was trained with), else to AgentConfig's defaults."
        ),
    )
    add_config_flags(p, EvalPolicyArgs, fields=["pool", "model", "split", "k", "seed", "limit"])
    add_config_flags(
        p,
        AgentConfig,
        fields=EVAL_AGENT_FIELDS,
        defaults=dict.fromkeys(EVAL_AGENT_FIELDS),
        choices={"tool_format": TOOL_FORMATS},
    )
    add_config_flags(p, EvalPolicyArgs, fields=["tasks_per_batch"])
    add_config_flags(p, RuntimeConfig, fields=["workers", "reward"])
    add_config_flags(p, EvalPolicyArgs, fields=["device", "threads", "out"])
    p.set_defaults(func=_eval_policy)


def _eval_policy(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.eval.policy_eval import evaluate_policy
    from envsched_gnn.training.policy import check_policy_folder, load_agent_config
    from envsched_gnn.training.policy_engine import open_engine

    # every cheap input first: a wrong one is refused before the policy loads
    evaluation = config_from_args(EvalPolicyArgs, args)
    runtime = config_from_args(RuntimeConfig, args)
    check_paths(folders={"--pool": evaluation.pool}, out_files={"--out": evaluation.out})
    check_policy_folder(evaluation.model, "--model")
    agent = load_agent_config(
        evaluation.model, **{name: getattr(args, name) for name in EVAL_AGENT_FIELDS}
    )
    pool = load_pool(evaluation.pool)
    tasks = [task.task_id for task in pool.split(evaluation.split)][: evaluation.limit]
    if not tasks:
        return fail(f"pool {evaluation.pool} has no task in split {evaluation.split!r}")
    with open_engine(
        evaluation.model, pool, agent, runtime, evaluation.device, evaluation.threads
    ) as engine:
        result = evaluate_policy(
            engine, tasks, evaluation.k, evaluation.seed, evaluation.tasks_per_batch
        )
    result["reward"] = runtime.reward
    print(
        f"{evaluation.split}: {result['tasks']} tasks x K={evaluation.k}: mean reward "
        f"{result['mean_reward']:.3f}, full success {result['full_success_rate']:.3f}, "
        f"zero-variance groups {result['zero_variance_share']:.3f}, "
        f"malformed calls/episode {result['malformed_call_rate']:.3f}, "
        f"{result['rollout_s']:.1f} s (T={agent.temperature}, {agent.tool_format} tools, "
        f"{runtime.reward} reward)"
    )
    for env, row in result["per_env"].items():
        print(
            f"  {env}: {row['tasks']} tasks, mean {row['mean_reward']:.3f}, "
            f"zero-variance {row['zero_variance_share']:.2f}"
        )
    if evaluation.out:
        write_json_atomically(evaluation.out, result, indent=2)
    return 0
