"""``envsched-gnn pool check`` / ``pool import-envscaler`` / ``pool import-bfcl``, and the
environment runtime's flags every command that runs a pool's code shares
(:func:`add_runtime_flags`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.envs.bfcl import CATEGORIES
from envsched_gnn.envs.check import CheckConfig
from envsched_gnn.envs.runtime_config import RuntimeConfig

RUNTIME_PREFIX = "runtime_"
"""Namespace prefix of the runtime flags: ``RuntimeConfig.trust_pool`` is not one of them, but
the CLI's ``--trust-pool`` shares its name."""


@dataclass
class CheckArgs:
    """The pool ``pool check`` replays."""

    directory: str
    """Pool folder (envs.json, tasks.json)."""


@dataclass
class ImportArgs:
    """The inputs and output of ``pool import-envscaler``."""

    sources: list[str]
    """A folder, or the environments and tasks files."""
    out: str
    """Pool folder to write."""


@dataclass
class BfclArgs:
    """The input and output of ``pool import-bfcl``."""

    source: str
    """The bfcl-eval wheel (pip download bfcl-eval --no-deps), or a folder holding its
    bfcl_eval/ (an unpacked wheel, site-packages, a checkout of
    berkeley-function-call-leaderboard)."""
    out: str
    """Pool folder to write."""
    category: str = "base"
    """BFCL's multi-turn category to convert: base or long_context."""


def add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """``--workers`` (default: the number of CPUs), ``--call-timeout``, ``--memory-limit-mb``:
    the :class:`RuntimeConfig` of a command, built back by :func:`runtime_config`."""
    add_config_flags(
        parser,
        RuntimeConfig,
        fields=["workers", "call_timeout_s", "memory_limit_mb"],
        defaults={"workers": os.cpu_count() or RuntimeConfig.workers},
        flags={"call_timeout_s": "--call-timeout"},
        dest_prefix=RUNTIME_PREFIX,
    )


def runtime_config(args: argparse.Namespace) -> RuntimeConfig:
    return config_from_args(RuntimeConfig, args, dest_prefix=RUNTIME_PREFIX)


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    check = groups["pool"].add_parser(
        "check",
        help="validate a pool and replay its reference solutions and empty trajectories",
        description=(
            "Validates the pool in DIR, replays every reference solution and the empty "
            "trajectory (no tool call) of every task in the sandboxed runtime, and prints a "
            "JSON summary as the last line. Exit code 1 when there are errors."
        ),
    )
    add_config_flags(check, CheckArgs, positional=["directory"], metavars={"directory": "DIR"})
    add_runtime_flags(check)
    add_config_flags(
        check,
        CheckConfig,
        fields=["progress", "record_effects"],
        flags={"record_effects": "--write-effects"},
    )
    check.set_defaults(func=_check)

    importer = groups["pool"].add_parser(
        "import-envscaler",
        help="convert EnvScaler's released environment and scenario files into a pool",
        description=(
            "Reads EnvScaler's released files (JSON or JSONL lists of environment items and of "
            "scenario/task items, with JSON-string fields) from SRC, a folder or two files, "
            "and writes a pool in this project's layout to --out."
        ),
    )
    add_config_flags(
        importer,
        ImportArgs,
        positional=["sources"],
        metavars={"sources": "SRC", "out": "DIR"},
    )
    importer.set_defaults(func=_import_envscaler)

    bfcl = groups["pool"].add_parser(
        "import-bfcl",
        help="convert BFCL's multi-turn API classes and tasks (bfcl-eval) into a pool",
        description=(
            "Reads the bfcl-eval package's multi-turn API classes, function documents, tasks "
            "and ground truth from SRC (as data: nothing of it is imported) and writes a pool "
            "to --out: one environment per set of involved classes, one task per BFCL task "
            "with its ground truth as reference solution and BFCL's state and response checks "
            "on the final state."
        ),
    )
    add_config_flags(
        bfcl,
        BfclArgs,
        positional=["source"],
        metavars={"source": "SRC", "out": "DIR", "category": "NAME"},
        choices={"category": CATEGORIES},
    )
    bfcl.set_defaults(func=_import_bfcl)


def _check(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.check import check_pool

    config = config_from_args(CheckConfig, args, runtime=runtime_config(args))
    summary = check_pool(args.directory, config)
    for error in summary["errors"]:
        print(f"error: {error}", file=sys.stderr)
    if config.record_effects and "tool_effects" in summary:
        from envsched_gnn.envs.tool_effects import parse_tool_effects, write_tool_effects

        effects = parse_tool_effects(summary.pop("tool_effects"), "pool check")
        path = write_tool_effects(args.directory, effects)
        summary["tool_effects_file"] = str(path)
        for change in summary["recategorised"]:
            print(f"recategorised by the replay: {change}", file=sys.stderr)
    print(json.dumps(summary))
    return 1 if summary["errors"] else 0


def _import_envscaler(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.envscaler import import_envscaler

    pool = import_envscaler(args.sources, args.out)
    print(json.dumps({"envs": len(pool.envs), "tasks": len(pool.tasks), "out": args.out}))
    return 0


def _import_bfcl(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.bfcl import import_bfcl

    pool = import_bfcl(args.source, args.out, args.category)
    print(json.dumps({"envs": len(pool.envs), "tasks": len(pool.tasks), "out": args.out}))
    return 0
