"""``eval worlds``: finished ``eval ablate`` comparisons of several pools, side by side.

Each world is one ``eval ablate --learner policy`` output folder. Per world at the last
evaluation: random's held-out lift over the shared step-0 evaluation, over seeds and paired
by held-out task, (1/S) sum_s (y_final(t, s) - y_0(t)) per task t; random's wasted share; and
for every other scheduler the held-out reward minus random's and minus the relabelled
control's, the pool reward minus random's (paired by seed), its wasted share and that minus
random's, and the rollouts to random's final. Intervals containing 0 are marked.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envsched_gnn.eval.ablation.curves_report import markdown_table
from envsched_gnn.eval.stats import format_ci, mean_ci, task_means

REFERENCE = "random"
CONTROL = "envsched_relabelled"


def read_world(folder: str | Path) -> dict:
    """The ``results.json`` of an ``eval ablate`` output folder (a clear error without one)."""
    path = Path(folder) / "results.json"
    if not path.is_file():
        raise ValueError(f"{folder}: no results.json (the output folder of eval ablate)")
    results = json.loads(path.read_text())
    if REFERENCE not in results:
        raise ValueError(f"{folder}: the comparison did not run {REFERENCE!r}, the reference")
    return results


def final_column(results: Mapping) -> str:
    """The last evaluation's column (budget steps) of the reference's scores."""
    return max(results[REFERENCE]["score"], key=int)


def reference_lift(results: Mapping) -> dict:
    """Random's held-out lift over the start: over seeds, and paired by task (module doc)."""
    runs = results[REFERENCE]["runs"]
    final = final_column(results)
    starts = {run["records"][0]["score"] for run in runs}
    if len(starts) != 1:
        raise ValueError(f"the runs of {REFERENCE!r} start from different step-0 rewards")
    start = starts.pop()
    over_seeds = mean_ci([s - start for s in results[REFERENCE]["score"][final]["per_seed"]])
    first: dict[str, float] = {}
    last: dict[str, list[float]] = {}
    for run in runs:
        evals = sorted(run.get("evals", []), key=lambda e: e["step"])
        if not evals or "per_task" not in evals[0]:
            return {"start": start, "over_seeds": over_seeds, "over_tasks": None}
        first = task_means(evals[0]["per_task"])  # the shared step-0 evaluation
        for task, mean in task_means(evals[-1]["per_task"]).items():
            last.setdefault(task, []).append(mean)
    tasks = sorted(set(first) & set(last))
    over_tasks = mean_ci([float(np.mean(last[t])) - first[t] for t in tasks])
    return {"start": start, "over_seeds": over_seeds, "over_tasks": over_tasks}


def world_rows(name: str, results: Mapping) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The world's row of the first table, and one row per scheduler of the second."""
    final = final_column(results)
    reference = results[REFERENCE]
    lift = reference_lift(results)
    world = [
        str(len(reference["seeds"])),
        str(reference["rollouts"]),
        format_ci(reference.get("picks", {}).get("wasted_share")),
        f"{lift['start']:.3f} -> {reference['score'][final]['mean']:.3f}",
        format_ci(lift["over_seeds"], sign=True, noise=True),
        format_ci(lift["over_tasks"], sign=True, noise=True),
    ]
    rows = []
    for scheduler, entry in results.items():
        if scheduler == REFERENCE:
            continue
        picks = entry.get("picks", {})
        reach = entry.get("rollouts_to_random_final", {}).get("score", {})
        median = reach.get("median_rollouts")
        cells = [
            scheduler,
            format_ci(entry.get("margin_over_random", {}).get(final), sign=True, noise=True),
            format_ci(
                entry.get("margin_over_controls", {}).get(CONTROL, {}).get(final),
                sign=True,
                noise=True,
            ),
            format_ci(entry.get("pool_margin_over_random", {}).get(final), sign=True, noise=True),
            format_ci(picks.get("wasted_share")),
            format_ci(picks.get("wasted_minus_random"), sign=True, noise=True),
            f"{'median not reached' if median is None else f'{median:.0f}'} "
            f"({reach.get('reached', 0)}/{reach.get('seeds', len(entry['seeds']))})",
        ]
        rows.append((name, cells))
    return world, rows


def render_worlds(worlds: Sequence[tuple[str, Mapping]]) -> str:
    """The two tables of the module docstring, in Markdown."""
    firsts, seconds = [], []
    for name, results in worlds:
        world, rows = world_rows(name, results)
        firsts.append((name, world))
        seconds += rows
    lines = [
        f"Each world at its last evaluation; {REFERENCE}'s lift over the starting policy, over "
        "seeds and paired by held-out task (mean ± 95 % CI):",
        "",
        *markdown_table(
            [
                "world",
                "seeds",
                "rollouts",
                f"{REFERENCE}'s wasted share",
                f"{REFERENCE}'s held-out: start -> final",
                "lift, over seeds",
                "lift, over tasks",
            ],
            firsts,
        ),
        "",
        f"Every scheduler against {REFERENCE} and the relabelled control at equal rollouts, "
        "paired by seed (held-out and pool reward at the last evaluation):",
        "",
        *markdown_table(
            [
                "world",
                "scheduler",
                f"held-out - {REFERENCE}",
                "held-out - relabelled",
                f"pool - {REFERENCE}",
                "wasted share",
                f"wasted - {REFERENCE}'s",
                f"rollouts to {REFERENCE}'s final (seeds reached)",
            ],
            seconds,
        ),
    ]
    return "\n".join(lines) + "\n"


@dataclass
class WorldsArgs:
    """The worlds ``eval worlds`` puts side by side."""

    world: list[str] | None = None
    """A world's name and its eval ablate output folder, NAME=FOLDER (repeat per world)."""
    out: str | None = None
    """Also write the tables to this Markdown file."""


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.config_cli import add_config_flags

    p = groups["eval"].add_parser(
        "worlds",
        help="finished eval ablate comparisons of several pools side by side",
        description="Reads the results.json of eval ablate output folders (--learner policy) "
        "and prints, per world, random's lift and wasted share, and every scheduler minus "
        "random and minus the relabelled control, with 95 % CIs.",
    )
    add_config_flags(
        p, WorldsArgs, repeatable=["world"], metavars={"world": "NAME=FOLDER", "out": "FILE"}
    )
    p.set_defaults(func=_worlds)


def _worlds(args: argparse.Namespace) -> int:
    from envsched_gnn.validation import check_paths, fail

    if not args.world:
        return fail("--world NAME=FOLDER: give at least one world")
    named = []
    for item in args.world:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            return fail(f"--world {item!r}: expected NAME=FOLDER")
        named.append((name, folder))
    check_paths(folders={"--world": [folder for _, folder in named]}, out_files={"--out": args.out})
    worlds = []
    for name, folder in named:
        try:
            worlds.append((name, read_world(folder)))
        except (ValueError, OSError) as error:
            return fail(error)
    text = render_worlds(worlds)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    return 0
