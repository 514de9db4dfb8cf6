"""``eval worlds``: finished ``eval ablate`` comparisons of several pools, side by side.

Each world is one ``eval ablate --learner policy`` output folder. Per world at the last
evaluation: random's held-out lift over the shared step-0 evaluation, over seeds and paired
by held-out task, (1/S) sum_s (y_final(t, s) - y_0(t)) per task t; random's wasted share; and
for every other scheduler the held-out reward minus random's and minus the relabelled
control's, the pool reward minus random's (paired by seed), its wasted share and that minus
random's, and the rollouts to random's final; where the comparison measured compute to a target
(:mod:`~envsched_gnn.eval.ablation.targets`), the groups rolled per group trained and the
rollouts to 75 % of random's lift against random and random behind dynamic sampling. Intervals
containing 0 are marked. ``--plot``: every world's held-out curve with its band.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envsched_gnn.eval.ablation.curves_report import markdown_table
from envsched_gnn.eval.stats import NOISE_MARK, format_ci, mean_ci, task_means

REFERENCE = "random"
CONTROL = "envsched_relabelled"
TARGET = "0.75"
"""The share of the reference's lift whose rollouts the worlds compare."""


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
        reach = entry.get("compute_to_target", {}).get("rollouts_to", {}).get("1.0")
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
            _reached(reach),
        ]
        rows.append((name, cells))
    return world, rows


def _reached(reach: Mapping | None) -> str:
    """Median rollouts to a target (seeds reached); n/a for a comparison made before compute to
    a target was measured."""
    if reach is None:
        return "n/a"
    median = "median not reached" if reach["median"] is None else f"{reach['median']:.0f}"
    return f"{median} ({reach['reached']}/{reach['seeds']})"


def target_rows(name: str, results: Mapping) -> list[tuple[str, list[str]]]:
    """Per scheduler of a world: groups rolled per group trained, rollouts to 75 % of random's
    lift, and how many times fewer than random and than random behind dynamic sampling."""
    rows = []
    for scheduler, entry in results.items():
        compute = entry.get("compute_to_target", {})
        if "versus" not in compute:  # a world measured before compute to a target
            continue
        cells = [
            scheduler,
            format_ci(compute["groups_per_trained"], 2),
            _reached(compute["rollouts_to"][TARGET]),
            *(
                fewer_times(compute["versus"].get(ref, {}).get("rollouts_to", {}).get(TARGET))
                for ref in (REFERENCE, REFERENCE + "+ds")
            ),
            format_ci(compute["versus"].get(REFERENCE, {}).get("area"), 4, sign=True, noise=True),
        ]
        rows.append((name, cells))
    return rows


def fewer_times(entry: Mapping | None) -> str:
    """A reference's rollouts to a target over the run's, with its interval and pairs."""
    if entry is None or entry["ratio"] is None:
        return "-" if entry is None else f"- ({entry['pairs']} pairs)"
    ratio, interval = entry["ratio"], entry["ratio"]["interval"]
    if interval is None:
        return f"{ratio['mean']:.2f} ({entry['pairs']} pairs)"
    noise = NOISE_MARK if interval[0] <= 1.0 <= interval[1] else ""
    return f"{ratio['mean']:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]{noise} ({entry['pairs']})"


def render_worlds(worlds: Sequence[tuple[str, Mapping]]) -> str:
    """The tables of the module docstring, in Markdown."""
    firsts, seconds, thirds = [], [], []
    for name, results in worlds:
        world, rows = world_rows(name, results)
        firsts.append((name, world))
        seconds += rows
        thirds += target_rows(name, results)
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
    if thirds:
        lines += [
            "",
            f"Compute to a target: the rollouts to {float(TARGET):.0%} of {REFERENCE}'s final "
            "lift (median over seeds, seeds reached), and how many times fewer than "
            f"{REFERENCE} and {REFERENCE}+ds needed (geometric mean over the seeds where both "
            "reached, 95 % interval); the area: the mean held-out reward over the budget, "
            f"minus {REFERENCE}'s, paired by seed:",
            "",
            *markdown_table(
                [
                    "world",
                    "scheduler",
                    "groups rolled / trained",
                    "rollouts to target",
                    f"fewer x than {REFERENCE}",
                    f"fewer x than {REFERENCE}+ds",
                    f"area - {REFERENCE}",
                ],
                thirds,
            ),
        ]
    return "\n".join(lines) + "\n"


def plot_worlds(worlds: Sequence[tuple[str, Mapping]], path: str | Path) -> Path:
    """One panel per world: every scheduler's held-out reward against rollouts, the mean and
    its 95 % band over seeds."""
    from envsched_gnn.plots import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(worlds), figsize=(7 * len(worlds), 5), squeeze=False)
    for ax, (name, results) in zip(axes[0], worlds, strict=True):
        per_step = results[REFERENCE]["rollouts"] / max(results[REFERENCE]["curve"]["budget_step"])
        for i, (scheduler, entry) in enumerate(results.items()):
            curve = entry["curve"]
            x = np.asarray(curve["budget_step"]) * per_step
            y = np.asarray(curve["score_mean"])
            ci = np.asarray([np.nan if c is None else c for c in curve["score_ci95"]])
            ax.plot(x, y, marker="o", markersize=3, color=f"C{i % 10}", label=scheduler)
            ax.fill_between(x, y - ci, y + ci, color=f"C{i % 10}", alpha=0.12)
        ax.set_title(f"{name}: held-out reward, 95 % bands over seeds")
        ax.set_xlabel("rollouts spent")
        ax.set_ylabel("held-out mean reward")
        ax.legend(fontsize=7)
    return save_figure(fig, Path(path))


@dataclass
class WorldsArgs:
    """The worlds ``eval worlds`` puts side by side."""

    world: list[str] | None = None
    """A world's name and its eval ablate output folder, NAME=FOLDER (repeat per world)."""
    out: str | None = None
    """Also write the tables to this Markdown file."""
    plot: str | None = None
    """Also draw every world's held-out reward against rollouts, with 95 % bands, to this PNG."""


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
        p,
        WorldsArgs,
        repeatable=["world"],
        metavars={"world": "NAME=FOLDER", "out": "FILE", "plot": "PNG"},
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
    check_paths(
        folders={"--world": [folder for _, folder in named]},
        out_files={"--out": args.out, "--plot": args.plot},
    )
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
    if args.plot:
        print(f"wrote {plot_worlds(worlds, args.plot)}")
    return 0
