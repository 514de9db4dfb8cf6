"""CLI: ``train sft``, the SFT warm start."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.validation import check_paths


@dataclass
class SFTArgs:
    """The inputs and outputs of ``train sft``; its settings are SFTConfig's fields."""

    pool: str
    """Pool folder (envs.json, tasks.json); SFT imitates its train split's references."""
    out: str
    """Output folder: policy/ (the trained policy), checkpoints, the CSV log, sft_summary.json."""
    model: str | None = None
    """A local Hugging Face causal LM folder to train (default: build the built-in policy)."""
    competence: bool = False
    """Mix imperfect demonstrations at the competence profile's rates (--competence-* options)."""


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.envs.generator.mistakes import MISTAKE_KINDS
    from envsched_gnn.training.agent_format import TOOL_FORMATS, AgentConfig
    from envsched_gnn.training.competence_profile import PROFILE_UNITS, CompetenceProfile
    from envsched_gnn.training.policy_engine import ACCELERATORS
    from envsched_gnn.training.sft_config import SFTConfig

    p = groups["train"].add_parser("sft", help="SFT warm start on the train split's references")
    add_config_flags(p, SFTArgs)
    add_config_flags(
        p,
        SFTConfig,
        fields=[
            "minutes",
            "max_steps",
            "batch_size",
            "learning_rate",
            "extra_tasks_per_env",
            "extra_operations",
        ],
        flags={"learning_rate": "--lr", "extra_tasks_per_env": "--extra-per-env"},
        metavars={"learning_rate": "LR", "extra_tasks_per_env": "EXTRA_PER_ENV"},
    )
    add_config_flags(p, AgentConfig, fields=["tool_format"], choices={"tool_format": TOOL_FORMATS})
    add_config_flags(
        p,
        SFTConfig,
        fields=["threads", "include_train_split", "seed", "accelerator"],
        flags={"include_train_split": "--no-train-split"},
        choices={"accelerator": ACCELERATORS},
    )
    add_config_flags(
        p,
        CompetenceProfile,
        dest_prefix="competence_",
        flags={name: f"--competence-{name}" for name in ("by", "mean", "concentration", "seed")}
        | {"kinds": "--competence-kinds"},
        choices={"by": PROFILE_UNITS, "kinds": MISTAKE_KINDS},
    )
    p.set_defaults(func=_train_sft)


def _train_sft(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.training.agent_format import AgentConfig
    from envsched_gnn.training.competence_profile import CompetenceProfile
    from envsched_gnn.training.policy import check_policy_folder
    from envsched_gnn.training.sft import SFTConfig, run_sft

    # every cheap input first: a wrong one is refused before the references run
    run = config_from_args(SFTArgs, args)
    profile = config_from_args(CompetenceProfile, args, dest_prefix="competence_")
    agent = config_from_args(AgentConfig, args)
    competence = profile if run.competence else None
    config = config_from_args(SFTConfig, args, agent=agent, competence=competence)
    check_paths(folders={"--pool": run.pool}, out_folders={"--out": run.out})
    if run.model is not None:
        check_policy_folder(run.model, "--model")
    policy = run_sft(load_pool(run.pool), run.model, config, run.out)
    summary = json.loads((Path(run.out) / "sft_summary.json").read_text())
    print(
        f"SFT: {summary['steps']} steps, {summary['epochs']:.1f} epochs over "
        f"{int(summary['examples'])} trajectories in {summary['train_s']:.0f} s "
        f"({summary['trajectories_per_s']:.1f} trajectories/s, "
        f"{summary['tokens_per_s']:.0f} tokens/s; data {summary['prepare_s']:.0f} s), "
        f"loss {summary['first_loss']:.3f} -> {summary['final_loss']:.3f}; policy at {policy}"
    )
    return 0
