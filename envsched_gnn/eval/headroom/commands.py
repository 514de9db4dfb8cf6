"""CLI: ``eval headroom``, "will GRPO have anything to learn from on my pool with my policy?"
(K samples of every task, at one or more temperatures;
:mod:`~envsched_gnn.eval.headroom.measure`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.validation import check_bounds, check_paths


@dataclass
class HeadroomArgs:
    """What ``eval headroom`` measures, and where."""

    pool: str
    """Pool folder (envs.json, tasks.json)."""
    model: str
    """The policy: a local Hugging Face causal LM folder."""
    out: str
    """Folder for headroom.json, headroom.md and headroom.png."""
    splits: tuple[str, ...] = ("train",)
    """Splits of the pool to sample (train: what GRPO's scheduler spends rollouts on)."""
    k: int = 8
    """Samples per task (GRPO's group size K)."""
    temperatures: tuple[float, ...] | None = None
    """Sampling temperatures, one measurement each (default: the policy's own)."""
    constrained: bool | None = None
    """Decode under the tool-call grammar (default: as the policy was trained)."""
    limit: int = 0
    """Tasks per split: a seeded random subset of this many (0: every task)."""
    seed: int = 0
    """Seed of the sampling and of the subset."""
    tasks_per_batch: int = 16
    """Tasks rolled out together (x k episodes)."""
    device: str = "auto"
    """Where the policy runs: auto (CUDA when there is one), cpu, cuda, cuda:1, ..."""
    threads: int = 1
    """torch threads on CPU (0: torch's default)."""

    def __post_init__(self) -> None:
        from envsched_gnn.training.policy_engine import check_device

        check_bounds(
            self,
            integers=("k", "limit", "seed", "tasks_per_batch", "threads"),
            at_least={"k": 1, "tasks_per_batch": 1},
            non_negative=("limit", "seed", "threads"),
            positive=("temperatures",),
            optional=("temperatures",),
        )
        check_device(self.device, "--device")


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.envs.runtime_config import RuntimeConfig

    p = groups["eval"].add_parser(
        "headroom",
        help="how much GRPO could gain: mean, best of K and spread per task",
        description=(
            "Rolls out K samples of every task of the chosen splits and reports, per task and "
            "grouped by split, environment, checklist length and operation count: the mean "
            "reward, the best of K, the headroom (best - mean) with 95 % intervals, and the "
            "shares of zero-variance, all-ones and all-zeros groups; and where the variance "
            "lies between environments, call counts and operation patterns."
        ),
    )
    add_config_flags(p, HeadroomArgs)
    add_config_flags(p, RuntimeConfig, fields=["workers", "reward"])
    p.set_defaults(func=_headroom)


def _headroom(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.eval.headroom.measure import headroom_stat, policy_headroom
    from envsched_gnn.eval.headroom.report import write_headroom
    from envsched_gnn.eval.stats import format_ci
    from envsched_gnn.training.held_out import split_subset
    from envsched_gnn.training.policy import check_policy_folder, load_agent_config
    from envsched_gnn.training.policy_engine import open_engine

    # every cheap input first: a wrong one is refused before the policy loads
    options = config_from_args(HeadroomArgs, args)
    runtime = config_from_args(RuntimeConfig, args)
    check_paths(folders={"--pool": options.pool}, out_folders={"--out": options.out})
    check_policy_folder(options.model, "--model")
    pool = load_pool(options.pool)
    tasks = [
        t
        for split in options.splits
        for t in split_subset(pool, split, options.limit, options.seed)
    ]
    own = load_agent_config(options.model, constrained=options.constrained)
    temperatures = options.temperatures or (own.temperature,)
    runs = []
    with open_engine(options.model, pool, own, runtime, options.device, options.threads) as opened:
        for temperature in temperatures:
            agent = load_agent_config(
                options.model, temperature=temperature, constrained=options.constrained
            )
            engine = opened.with_agent(agent)
            table = policy_headroom(
                engine, pool, tasks, options.k, options.seed, options.tasks_per_batch, "headroom"
            )
            overall = table["overall"]
            print(
                f"T={temperature}: {overall['tasks']} tasks x K={options.k}: mean "
                f"{overall['mean_reward']:.3f}, best of K {overall['mean_best']:.3f}, headroom "
                f"{format_ci(headroom_stat(overall))}, zero-variance "
                f"{overall['zero_variance_share']:.2f}, all ones {overall['all_ones_share']:.2f}, "
                f"malformed calls/episode {table['malformed_call_rate']:.3f} "
                f"({table['rollout_s']:.0f} s)",
                flush=True,
            )
            runs.append(
                {
                    "temperature": temperature,
                    "k": options.k,
                    "constrained": agent.constrained,
                    "reward": runtime.reward,
                }
                | table
            )
    header = [
        f"policy {options.model}, pool {options.pool}, splits {', '.join(options.splits)}",
        f"K = {options.k} samples per task, seed {options.seed}, "
        f"{'constrained' if own.constrained else 'unconstrained'} decoding, "
        f"{len(tasks)} tasks, reward: {runtime.reward}",
        f"command: envsched-gnn eval headroom --pool {options.pool} --model {options.model} "
        f"--splits {' '.join(options.splits)} --k {options.k} --temperatures "
        f"{' '.join(str(t) for t in temperatures)} --limit {options.limit} --seed {options.seed} "
        f"--reward {runtime.reward}",
    ]
    for path in write_headroom(runs, header, options.out):
        print(f"wrote {path}")
    return 0
