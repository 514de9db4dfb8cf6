"""``envsched-gnn pool check`` / ``pool import-envscaler`` and ``bench runtime``."""

from __future__ import annotations

import argparse
import json
import os
import sys

from envsched_gnn.envs.runtime_config import RuntimeConfig


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
    check.add_argument("directory", metavar="DIR", help="pool folder (envs.json, tasks.json)")
    _add_runtime_arguments(check)
    check.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    check.add_argument(
        "--write-effects",
        action="store_true",
        help="snapshot the state around every reference call and write what each tool's calls "
        "did to it as DIR/tool_effects.json (the abstract extractor then uses it to categorise "
        "tools); the summary lists the tools whose category that changes",
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
    importer.add_argument(
        "sources", metavar="SRC", nargs="+", help="a folder, or the environments and tasks files"
    )
    importer.add_argument("--out", required=True, metavar="DIR", help="pool folder to write")
    importer.set_defaults(func=_import_envscaler)

    bench = groups["bench"].add_parser(
        "runtime",
        help="environment runtime throughput (tool calls per second)",
        description=(
            "Resets EPISODES episodes of the pool's tasks, makes CALLS rounds of one tool call "
            "per episode (the task's reference solution, cycled), scores and releases them; "
            "prints the timings as JSON."
        ),
    )
    bench.add_argument("--pool", required=True, metavar="DIR", help="pool folder")
    bench.add_argument("--episodes", type=int, default=512, help="episodes per round (512)")
    bench.add_argument("--calls", type=int, default=4, help="tool calls per episode (4)")
    bench.add_argument("--repeats", type=int, default=3, help="measured repetitions (3)")
    _add_runtime_arguments(bench)
    bench.set_defaults(func=_bench)


def _add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = RuntimeConfig()
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or defaults.workers,
        help="worker processes (default: the number of CPUs)",
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=defaults.call_timeout_s,
        help=f"seconds per tool call, instantiation or check ({defaults.call_timeout_s:g})",
    )
    parser.add_argument(
        "--memory-limit-mb",
        type=int,
        default=defaults.memory_limit_mb,
        help=f"address-space limit of each worker in MiB ({defaults.memory_limit_mb})",
    )


def _runtime_config(args: argparse.Namespace) -> RuntimeConfig:
    return RuntimeConfig(
        workers=args.workers,
        call_timeout_s=args.call_timeout,
        memory_limit_mb=args.memory_limit_mb,
    )


def _check(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.check import CheckConfig, check_pool

    config = CheckConfig(
        runtime=_runtime_config(args),
        progress=not args.no_progress,
        record_effects=args.write_effects,
    )
    summary = check_pool(args.directory, config)
    for error in summary["errors"]:
        print(f"error: {error}", file=sys.stderr)
    if args.write_effects and "tool_effects" in summary:
        from envsched_gnn.envs.tool_effects import parse_tool_effects, write_tool_effects

        effects = parse_tool_effects(summary.pop("tool_effects"), "pool check")
        path = write_tool_effects(args.directory, effects)
        summary["tool_effects_file"] = str(path)
        for change in summary["recategorised"]:
            print(f"recategorised by the replay: {change}", file=sys.stderr)
    print(json.dumps(summary))
    return 1 if summary["errors"] else 0


def _import_envscaler(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.envscaler import EnvScalerImportError, import_envscaler
    from envsched_gnn.envs.pool_parse import PoolError

    try:
        pool = import_envscaler(args.sources, args.out)
    except (EnvScalerImportError, PoolError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"envs": len(pool.envs), "tasks": len(pool.tasks), "out": args.out}))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from envsched_gnn.bench.runtime import bench_runtime
    from envsched_gnn.envs.pool_io import load_pool

    result = bench_runtime(
        load_pool(args.pool),
        _runtime_config(args),
        episodes=args.episodes,
        calls=args.calls,
        repeats=args.repeats,
    )
    print(json.dumps(result))
    return 0
