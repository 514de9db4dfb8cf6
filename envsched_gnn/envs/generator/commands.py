"""``envsched-gnn pool generate``: write the built-in pool in the EnvScaler layout."""

from __future__ import annotations

import argparse
import json
import sys
import time


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
    parser.add_argument("--envs", type=int, default=51, help="number of environments (51)")
    parser.add_argument("--tasks-per-env", type=int, default=50, help="tasks per environment (50)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument(
        "--test-per-env", type=int, default=10, help="tasks per environment split test (10)"
    )
    parser.add_argument(
        "--holdout-envs", type=int, default=0, help="whole environments split test (0)"
    )
    parser.add_argument(
        "--max-calls",
        type=int,
        default=None,
        metavar="N",
        help="only tasks whose reference solution has at most N calls (default: 1-6)",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="pool folder to write")
    parser.set_defaults(func=_generate)


def _generate(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.generator.tasks import GeneratorError, generate_pool, write_pool_files

    started = time.perf_counter()
    try:
        pool = generate_pool(
            n_envs=args.envs,
            tasks_per_env=args.tasks_per_env,
            seed=args.seed,
            test_per_env=args.test_per_env,
            holdout_envs=args.holdout_envs,
            max_calls=args.max_calls,
        )
    except GeneratorError as error:
        print(f"envsched-gnn pool generate: {error}", file=sys.stderr)
        return 2
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
