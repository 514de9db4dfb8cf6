"""The ``envsched-gnn`` command line: parses arguments and hands them to the packages.

Each package's ``commands`` module exposes ``register(groups)`` (``groups``: group name, ``""``
for top-level commands, -> sub-parsers) and sets ``func`` (Namespace -> exit code) with
``set_defaults``; handlers import heavy dependencies lazily so ``--help`` stays fast. The
commands of :data:`POOL_COMMANDS` get ``--trust-pool`` and ``--sandbox-package`` here, passed on
as ``ENVSCHED_TRUST_POOL`` / ``ENVSCHED_SANDBOX_PACKAGES``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from envsched_gnn.config_cli import RUN_ERROR, fail

GROUPS = {
    "pool": "generate, check and import pools of executable environments",
    "graph": "build, export and grow the dual-relation task graph in the store",
    "store": "query the graph store with Cypher; its observations as history.jsonl",
    "train": "SFT warm start and GRPO training of the policy",
    "eval": "held-out evaluation, predictor comparison, ablations",
    "bench": "benchmarks that print speed and memory numbers",
}

COMMAND_MODULES = (
    "envsched_gnn.envs.commands",
    "envsched_gnn.envs.generator.commands",
    "envsched_gnn.graph_store.graph_commands",
    "envsched_gnn.graph_store.store_commands",
    "envsched_gnn.models.commands",
    "envsched_gnn.scheduler.commands",
    "envsched_gnn.training.commands",
    "envsched_gnn.training.grpo.commands",
    "envsched_gnn.pipeline.commands",
    "envsched_gnn.eval.policy_commands",
    "envsched_gnn.eval.headroom.commands",
    "envsched_gnn.eval.commands",
    "envsched_gnn.eval.ablation.worlds",
    "envsched_gnn.eval.cold_start.commands",
    "envsched_gnn.bench.predictor",
    "envsched_gnn.bench.scheduler",
    "envsched_gnn.bench.graph",
    "envsched_gnn.bench.runtime",
    "envsched_gnn.bench.grpo",
)
POOL_COMMANDS = (
    ("pool", "check"),
    ("bench", "runtime"),
    ("bench", "grpo"),
    ("train", "sft"),
    ("train", "grpo"),
    ("train", "demo-policy"),
    ("eval", "policy"),
    ("eval", "headroom"),
    ("eval", "ablate"),
    ("eval", "cold-start"),
    ("", "run"),
)
"""Commands that run environment code in the sandboxed runtime."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envsched-gnn",
        description="Environment-aware rollout scheduling (EnvSched) for agentic GRPO.",
    )
    root = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {"": root}
    for name, help_text in GROUPS.items():
        group = root.add_parser(name, help=help_text, description=help_text)
        groups[name] = group.add_subparsers(dest=f"{name}_command", metavar="COMMAND")
        group.set_defaults(func=_print_help_of(group))
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(groups)
    for group, name in POOL_COMMANDS:
        _sandbox_options(groups[group].choices[name])
    return parser


def _sandbox_options(parser: argparse.ArgumentParser) -> None:
    """``--trust-pool`` and ``--sandbox-package``, from the runtime's and the sandbox's config
    fields; their destinations are prefixed so that a command building its ``RuntimeConfig``
    from the namespace does not take them for its own fields (they reach it through the
    environment, see :func:`_export_sandbox_options`)."""
    from envsched_gnn.config_cli import add_config_flags
    from envsched_gnn.envs.runtime_config import RuntimeConfig, SandboxConfig

    add_config_flags(
        parser,
        RuntimeConfig,
        fields=["trust_pool"],
        defaults={"trust_pool": False},
        dest_prefix="sandbox_",
    )
    add_config_flags(
        parser,
        SandboxConfig,
        fields=["packages"],
        defaults={"packages": None},
        flags={"packages": "--sandbox-package"},
        repeatable=["packages"],
        metavars={"packages": "NAME"},
        dest_prefix="sandbox_",
    )


def _export_sandbox_options(args: argparse.Namespace) -> None:
    """Hands the sandbox options to every runtime config the command builds (and its DDP
    ranks), as the defaults they read from the environment."""
    from envsched_gnn.envs.runtime_config import PACKAGES_VARIABLE, TRUST_POOL_VARIABLE

    if getattr(args, "sandbox_trust_pool", False):
        os.environ[TRUST_POOL_VARIABLE] = "1"
    packages = getattr(args, "sandbox_packages", None)
    if packages:
        known = [name for name in os.environ.get(PACKAGES_VARIABLE, "").split(",") if name]
        os.environ[PACKAGES_VARIABLE] = ",".join(dict.fromkeys([*known, *packages]))


def _print_help_of(parser: argparse.ArgumentParser):
    def print_help(_: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    return print_help


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    _export_sandbox_options(args)
    from envsched_gnn.envs.sandbox import SandboxUnavailable
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.observations import ObservationError
    from envsched_gnn.scheduler.base import SchedulerError

    try:
        return int(func(args) or 0)
    # a scheduler refuses what the user asked (an unknown environment to retire, a checkpoint
    # of tasks the graph lost, rewards of the other kind): the message says what and why, a
    # traceback adds nothing
    except (SandboxUnavailable, StoreError, SchedulerError, ObservationError) as error:
        return fail(error, RUN_ERROR)


if __name__ == "__main__":
    sys.exit(main())
