"""The ``envsched-gnn`` command line: parses arguments and hands them to the packages.

Each package owns its sub-commands in a ``commands`` module exposing
``register(groups)``, where ``groups`` maps a group name (``""`` for top-level
commands such as ``run`` or ``predict``) to an ``argparse`` sub-parser collection.
A command sets ``func`` (a callable taking the parsed ``Namespace`` and returning
an exit code) with ``parser.set_defaults(func=...)``. Handlers import their heavy
dependencies lazily so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

GROUPS = {
    "pool": "generate, check and import pools of executable environments",
    "graph": "build, export and grow the dual-relation task graph in the store",
    "train": "SFT warm start and GRPO training of the policy",
    "eval": "held-out evaluation, predictor comparison, ablations",
    "bench": "benchmarks that print speed and memory numbers",
}

COMMAND_MODULES = (
    "envsched_gnn.envs.commands",
    "envsched_gnn.envs.generator.commands",
    "envsched_gnn.graph_store.commands",
    "envsched_gnn.models.commands",
    "envsched_gnn.scheduler.commands",
    "envsched_gnn.training.commands",
    "envsched_gnn.training.grpo_commands",
    "envsched_gnn.eval.commands",
    "envsched_gnn.bench.predictor",
    "envsched_gnn.bench.scheduler",
    "envsched_gnn.bench.graph",
    "envsched_gnn.bench.grpo",
)


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
    return parser


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
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
