"""CLI: the main job ``run`` and ``train demo-policy`` (the SFT policy package it starts from)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args, fail, split_names


@dataclass
class DemoPolicyArgs:
    """What ``train demo-policy`` packages (its torch threads are :class:`SFTConfig`'s)."""

    out: str
    """Package folder (replaced): the policy, its agent format and manifest.json."""
    preset: str = "demo"
    """Main-job preset whose pool and SFT recipe the package is built from."""
    seed: int = 0
    """Seed of the pool and of SFT."""
    stage: str = "base"
    """Which package: ``base`` (SFT of the built-in policy; the project ships the demo
    preset's at envsched_gnn/data/demo_sft) or ``start`` (the packaged base fine-tuned into
    the preset's start that is sometimes right; envsched_gnn/data/demo_start)."""


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.pipeline.job import RunOptions
    from envsched_gnn.pipeline.presets import PRESETS
    from envsched_gnn.scheduler.commands import add_sampling_flags
    from envsched_gnn.training.sft_config import SFTConfig

    p = groups[""].add_parser(
        "run",
        help="the main job: pool, graph, SFT, GRPO with EnvSched vs random, evaluation, report",
        description=(
            "On the default store (a managed local ArcadeDB server): generate the demo pool, "
            "build the graph, SFT warm start, then GRPO with each scheduler at the same rollout "
            "budget from the same SFT policy, held-out evaluation, and a report folder "
            "reports/<run>/."
        ),
    )
    add_config_flags(
        p,
        RunOptions,
        fields=[
            "preset",
            "seed",
            "out",
            "store",
            "reset_store",
            "steps",
            "lr",
            "schedulers",
            "model",
            "accelerator",
            "workers",
            "reward",
        ],  # fmt: skip
        choices={"preset": sorted(PRESETS), "accelerator": ("auto", "cpu", "gpu")},
        defaults={"schedulers": ",".join(RunOptions().schedulers)},
        parsers={"schedulers": split_names},
    )
    add_sampling_flags(p)
    p.set_defaults(func=_run)

    p = groups["train"].add_parser(
        "demo-policy",
        help="SFT of the built-in policy on the demo pool, packaged for the main job",
        description=(
            "Generates the preset's pool, runs SFT of the built-in policy with the preset's "
            "recipe and writes the policy with manifest.json (the fingerprint of SFT's "
            "inputs, which --threads is not part of). The main job uses such a package "
            "instead of running SFT when its own inputs have the same fingerprint; the "
            "project ships the demo preset's at envsched_gnn/data/demo_sft."
        ),
    )
    add_config_flags(p, DemoPolicyArgs, choices={"stage": ("base", "start")})
    add_config_flags(p, SFTConfig, fields=["threads"])
    p.set_defaults(func=_demo_policy)


def _run(args: argparse.Namespace) -> int:
    from envsched_gnn.pipeline.job import RunOptions, run_pipeline
    from envsched_gnn.scheduler.commands import sampling_from_args
    from envsched_gnn.scheduler.registry import is_scheduler_name, scheduler_names_expected

    options = config_from_args(RunOptions, args, sampling=sampling_from_args(args))
    unknown = [name for name in options.schedulers if not is_scheduler_name(name)]
    if unknown or not options.schedulers:
        return fail(f"unknown scheduler(s) {unknown}; expected {scheduler_names_expected()}")
    run_pipeline(options)
    return 0


def _demo_policy(args: argparse.Namespace) -> int:
    from envsched_gnn.pipeline.demo_policy import package_demo_policy

    package = config_from_args(DemoPolicyArgs, args)
    out = package_demo_policy(
        package.out, package.preset, package.seed, args.threads, package.stage
    )
    print(f"packaged SFT policy in {out}")
    return 0
