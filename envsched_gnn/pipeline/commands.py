"""CLI: the main job ``run`` and ``train demo-policy`` (the SFT policy package it starts from)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args, split_names
from envsched_gnn.validation import check_bounds, check_paths, config_error


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

    def __post_init__(self) -> None:
        from envsched_gnn.pipeline.presets import PRESETS

        check_bounds(self, integers=("seed",), non_negative=("seed",))
        if self.preset not in PRESETS:
            raise config_error(self, "preset", self.preset, f"one of {sorted(PRESETS)}")


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.pipeline.job import RunOptions
    from envsched_gnn.pipeline.presets import PRESETS
    from envsched_gnn.scheduler.commands import add_sampling_flags
    from envsched_gnn.training.policy_engine import ACCELERATORS
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
        choices={"preset": sorted(PRESETS), "accelerator": ACCELERATORS},
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
    from envsched_gnn.graph_store.connect import check_store_spec
    from envsched_gnn.pipeline.job import RunOptions, run_pipeline
    from envsched_gnn.scheduler.commands import sampling_from_args
    from envsched_gnn.training.policy import check_policy_folder

    options = config_from_args(RunOptions, args, sampling=sampling_from_args(args))
    check_paths(out_folders={"--out": options.out})
    check_store_spec(options.store)
    if options.model is not None:
        check_policy_folder(options.model, "--model")
    run_pipeline(options)
    return 0


def _demo_policy(args: argparse.Namespace) -> int:
    from envsched_gnn.pipeline.demo_policy import package_demo_policy
    from envsched_gnn.training.sft_config import SFTConfig

    package = config_from_args(DemoPolicyArgs, args)
    SFTConfig(threads=args.threads)  # its bounds, before the preset's pool is generated
    check_paths(out_folders={"--out": package.out})
    out = package_demo_policy(
        package.out, package.preset, package.seed, args.threads, package.stage
    )
    print(f"packaged SFT policy in {out}")
    return 0
