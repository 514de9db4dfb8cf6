"""``envsched-gnn pool generate``: write the built-in pool in the EnvScaler layout."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags
from envsched_gnn.validation import check_paths


@dataclass
class GenerateArgs:
    """The built-in pool ``pool generate`` writes (the arguments of ``generate_pool``)."""

    out: str
    """Pool folder to write."""
    envs: int = 51
    """Number of environments (distinct domains, at most 51)."""
    tasks_per_env: int = 50
    """Tasks per environment."""
    seed: int = 0
    """Random seed."""
    test_per_env: int = 10
    """Tasks per environment split test."""
    holdout_envs: int = 0
    """Whole environments split test."""
    max_calls: int | None = None
    """Only tasks whose reference solution has at most N calls (default: 1-6)."""
    operations: tuple[str, ...] | None = None
    """Only these generator operations (update, forward, delete, create, state_gate, ...;
    default: all of each domain's)."""


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    parser = groups["pool"].add_parser(
        "generate",
        help="generate the built-in pool of executable environments and tasks",
        description=(
            "Writes envs.json and tasks.json to --out: up to 51 distinct domains, each an "
            "executable environment class with 6-12 tools, and tasks of 1-6 calls with "
            "checks, reference solutions, abstracts and train/test splits. Deterministic "
            "per --seed. Prints a JSON summary as the last line."
        ),
    )
    add_config_flags(
        parser,
        GenerateArgs,
        fields=[
            "envs",
            "tasks_per_env",
            "seed",
            "test_per_env",
            "holdout_envs",
            "max_calls",
            "operations",
            "out",
        ],
        metavars={"max_calls": "N", "out": "DIR"},
    )
    parser.set_defaults(func=_generate)


def _generate(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.generator.tasks import generate_pool, write_pool_files

    check_paths(out_folders={"--out": args.out})
    started = time.perf_counter()
    pool = generate_pool(
        n_envs=args.envs,
        tasks_per_env=args.tasks_per_env,
        seed=args.seed,
        test_per_env=args.test_per_env,
        holdout_envs=args.holdout_envs,
        max_calls=args.max_calls,
        operations=tuple(args.operations) if args.operations else None,
    )
    directory = write_pool_files(pool, args.out)
    summary = {
        "out": str(directory),
        "envs": len(pool.envs),
        "tasks": len(pool.tasks),
        "train": len(pool.split("train")),
        "test": len(pool.split("test")),
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(summary))
    return 0
