"""The report of a scheduler comparison: ``results.json``, ``report.md`` and PNG plots.

``results`` holds every number of the run::

    {"run": str, "config": {...}, "notes": [str, ...], "timings": {name: seconds},
     "schedulers": {name: {"eval": [{"step", "mean_reward", ...}, ...],
                           "steps": [{"step", "batch/mean_reward", ...}, ...],
                           "rollouts": int, "wall_s": float}}}

``eval`` starts at step 0; each evaluation holds ``per_task`` rewards on the same tasks and
seed, so comparisons pair by task: ``(1/N) sum_i (m_i - m'_i)`` with a Student-t 95 % interval
(:mod:`~envsched_gnn.eval.stats`), and likewise ``pool`` (every train task, with its headroom at
start and end). ``steps`` holds spec section 6's metrics, ``rewards`` each step's groups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from envsched_gnn.eval.stats import format_ci, mean_ci, paired_difference, task_means, verdict
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.plots import pyplot, save_figure
from envsched_gnn.scheduler.metrics import BATCH_METRICS

PARTS = {"heldout": "held-out", "pool": "pool (train tasks)"}
"""The evaluations' parts: the held-out tasks, and the train split when it was evaluated."""
PLOTS = (
    ("heldout_reward.png", "held-out mean reward", "heldout"),
    ("pool_reward.png", "pool mean reward (train tasks)", "pool"),
    ("reward_variance.png", "batch mean reward variance", "batch/mean_reward_variance"),
    ("envs_covered.png", "environments covered per batch", "batch/envs_covered"),
)


def summarize(result: Mapping) -> dict[str, float]:
    """One row of the comparison table: held-out reward at start, end and best, the per-step
    batch metrics averaged over the steps (the paper's per-step metrics), the updates made and
    the groups rolled out per group trained (1 without dynamic sampling, which trains every
    group; above 1, the groups with no reward spread it filtered out)."""
    evals = result.get("eval", [])
    steps = result.get("steps", [])
    rolled = sum(len(groups) for groups in result.get("rewards", []))
    trained = sum(s.get("batch/kept_groups", math.nan) for s in steps)
    row: dict[str, float] = {
        "heldout_start": evals[0]["mean_reward"] if evals else math.nan,
        "heldout_end": evals[-1]["mean_reward"] if evals else math.nan,
        "heldout_best": max((e["mean_reward"] for e in evals), default=math.nan),
        "steps": float(len(steps)),
        "updates": steps[-1].get("train/updates_total", math.nan) if steps else math.nan,
        "rolled_per_trained": rolled / trained if trained else math.nan,
        "rollouts": float(result.get("rollouts", 0)),
    }
    for name in BATCH_METRICS:
        values = [s[name] for s in result.get("steps", []) if name in s]
        row[name] = float(np.mean(values)) if values else math.nan
    return row


def part_of(entry: Mapping, part: str) -> Mapping | None:
    """The held-out evaluation (the entry itself) or its ``pool`` part (None when absent)."""
    return entry if part == "heldout" else entry.get(part)


def has_part(results: Mapping, part: str) -> bool:
    """Whether every evaluation of every scheduler has ``part``."""
    evals = [e for r in results["schedulers"].values() for e in r.get("eval", [])]
    return bool(evals) and all(part_of(e, part) for e in evals)


def heldout_ci(entry: Mapping) -> dict:
    """The mean reward of one evaluation with its 95 % interval over tasks (none without
    per-task rewards)."""
    per_task = entry.get("per_task")
    if not per_task:
        return {"mean": entry["mean_reward"], "ci95": None}
    return mean_ci(list(task_means(per_task).values()))


def heldout_difference(a: Mapping, b: Mapping) -> dict | None:
    """Held-out reward of evaluation ``a`` minus ``b``, paired by task (None without
    per-task rewards)."""
    if not a.get("per_task") or not b.get("per_task"):
        return None
    return paired_difference(task_means(a["per_task"]), task_means(b["per_task"]))


def comparison_rows(results: Mapping, part: str = "heldout") -> list[dict]:
    """Per evaluation step: each scheduler's mean reward on ``part`` with its interval, its
    change since step 0 and, for the first scheduler against each other one, the paired
    difference."""
    schedulers = results["schedulers"]
    names = list(schedulers)
    by_step: dict[int, dict[str, Mapping]] = {}
    for name in names:
        for entry in schedulers[name].get("eval", []):
            by_step.setdefault(int(entry["step"]), {})[name] = part_of(entry, part)
    rows = []
    for step in sorted(by_step):
        entries = by_step[step]
        row: dict = {"step": step, "heldout": {}, "change": {}, "difference": {}}
        for name, entry in entries.items():
            row["heldout"][name] = heldout_ci(entry)
            start = part_of(schedulers[name]["eval"][0], part)
            if step > 0:
                row["change"][name] = heldout_difference(entry, start)
        first = names[0]
        for other in names[1:]:
            if first in entries and other in entries:
                row["difference"][other] = heldout_difference(entries[first], entries[other])
        rows.append(row)
    return rows


def write_results(results: Mapping, out_dir: str | Path) -> Path:
    """Write ``results.json`` (atomically), creating ``out_dir``."""
    return write_json_atomically(Path(out_dir) / "results.json", results, indent=2)


def write_report(results: Mapping, out_dir: str | Path) -> list[Path]:
    """Write ``results.json``, ``report.md`` and the PNG plots into ``out_dir``; return paths."""
    out_dir = Path(out_dir)
    paths = [write_results(results, out_dir)]
    paths += plot_results(results, out_dir)
    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(results, [p.name for p in paths[1:]]), encoding="utf-8")
    paths.append(markdown)
    return paths


def render_markdown(results: Mapping, plot_names: Sequence[str] = ()) -> str:
    schedulers = results["schedulers"]
    lines = [f"# EnvSched run `{results.get('run', '')}`", ""]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines += _answer(results)
    for part, title in PARTS.items():
        if has_part(results, part):
            lines += _reward_table(results, part, title)
    if has_part(results, "pool"):
        lines += _headroom_table(results)
    lines += ["", "## The paper's per-step metrics (mean over steps) and the run's totals", ""]
    columns = [
        ("mean reward", "batch/mean_reward", 3),
        ("mean reward var.", "batch/mean_reward_variance", 4),
        ("median reward var.", "batch/median_reward_variance", 4),
        ("median reward", "batch/median_reward", 3),
        ("zero-var. share", "batch/zero_variance_share", 3),
        ("envs covered", "batch/envs_covered", 2),
        ("tools used", "batch/tools_used", 2),
        ("steps", "steps", 0),
        ("updates", "updates", 0),
        ("groups rolled / trained", "rolled_per_trained", 2),
        ("rollouts", "rollouts", 0),
    ]
    lines.append("| scheduler | " + " | ".join(title for title, _, _ in columns) + " |")
    lines.append("|---|" + "---|" * len(columns))
    for name, result in schedulers.items():
        row = summarize(result)
        cells = [_fmt(row[key], digits) for _, key, digits in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    timings = results.get("timings", {})
    if timings:
        lines += ["", "## Wall time", ""]
        lines += [f"- {name}: {seconds:.1f} s" for name, seconds in timings.items()]
    if plot_names:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({name})" for name in plot_names]
    evidence = results.get("evidence")
    if evidence:
        lines += [
            "", "## The evidence behind one prediction", "",
            f"The task EnvSched's predictor rated highest at the last step (step "
            f"{evidence['step']}, from `{next(iter(schedulers))}`'s observations): "
            f"`{evidence['task']}`, q = {evidence['q']:.3f}. Its neighbours by relation, the "
            "global reference's share, its own history and how u was reached "
            f"(`envsched-gnn explain {evidence['task']} --step {evidence['step']} --png FILE`):",
            "", f"![evidence]({evidence['file']})",
        ]  # fmt: skip
    lines += [
        "",
        "Every number above is in `results.json`, computed by this run; the per-task held-out "
        "rewards behind each interval are there too (`schedulers.<name>.eval[i].per_task`).",
        "",
    ]
    return "\n".join(lines)


def _reward_table(results: Mapping, part: str, title: str) -> list[str]:
    """Mean reward of ``part`` at each evaluation: per scheduler, its change since step 0
    and the first scheduler minus each other one, paired by task."""
    names = list(results["schedulers"])
    others = names[1:]
    lines = ["", f"## {title.capitalize()} mean reward at each evaluation (95 % intervals over "
             "tasks)", ""]  # fmt: skip
    header = ["step", *names, *(f"{n} change since step 0" for n in names)]
    header += [f"{names[0]} - {o} (paired)" for o in others]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|" + "---|" * (len(header) - 1))
    for row in comparison_rows(results, part):
        cells = [str(row["step"])]
        cells += [format_ci(row["heldout"].get(n)) for n in names]
        cells += [format_ci(row["change"].get(n)) for n in names]
        cells += [format_ci(row["difference"].get(o)) for o in others]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _headroom_table(results: Mapping) -> list[str]:
    """The pool's headroom (best of K - mean, per train task) at the start and at the end."""
    from envsched_gnn.eval.headroom.measure import summarize_headroom

    lines = ["", "## Headroom of the pool at the start and at the end", ""]
    lines.append(
        "| scheduler | step | mean | best of K | headroom (95 % CI) | zero-var. | all ones |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for name, result in results["schedulers"].items():
        evals = result.get("eval", [])
        for entry in (evals[0], evals[-1]) if len(evals) > 1 else evals:
            pool = entry["pool"]
            if pool["k"] < 2:
                continue
            row = summarize_headroom(pool["per_task"])
            headroom = format_ci({"mean": row["headroom"], "ci95": row["headroom_ci95"]})
            lines.append(
                f"| {name} | {entry['step']} | {row['mean_reward']:.3f} | "
                f"{row['mean_best']:.3f} | {headroom}"
                f" | {row['zero_variance_share']:.2f} | {row['all_ones_share']:.2f} |"
            )
    return lines


def _answer(results: Mapping) -> list[str]:
    """The report's answer in words: did GRPO move the policy (held-out, and on the pool when
    it was evaluated), and did the first scheduler beat the others, each judged by its paired
    interval."""
    names = list(results["schedulers"])
    lines: list[str] = []
    for part, title in PARTS.items():
        if part != "heldout" and not has_part(results, part):
            continue
        rows = comparison_rows(results, part)
        if not rows or rows[-1]["step"] == 0:
            return []
        last = rows[-1]
        if not lines:
            lines = ["", f"## The answer at the last evaluation (step {last['step']})", ""]
        for name in names:
            change = last["change"].get(name)
            if change is not None:
                words = verdict(change, "the policy improved", "the policy got worse")
                lines.append(
                    f"- GRPO with {name}: {title} change since the start {format_ci(change)} "
                    f"(paired over {change['n']} tasks): {words}."
                )
        for other, difference in last["difference"].items():
            if difference is not None:
                words = verdict(difference, f"{names[0]} is ahead", f"{names[0]} is behind")
                lines.append(
                    f"- {title}: {names[0]} - {other}: {format_ci(difference)} (paired over "
                    f"{difference['n']} tasks): {words}."
                )
    lines.append(
        "- Each scheduler trained once (one seed): these intervals cover the evaluation's "
        "noise (which tasks, which samples), not the spread between training runs; "
        "`envsched-gnn eval ablate --learner policy --seeds 5` measures that."
    )
    return lines


def plot_results(results: Mapping, out_dir: str | Path) -> list[Path]:
    """PNG plots with 95 % bands: held-out reward against steps (interval over tasks), batch
    reward variance (interval over the step's groups), environments covered per batch."""
    plt = pyplot()
    out_dir = Path(out_dir)
    paths = []
    for file_name, title, metric in PLOTS:
        if metric in PARTS and not has_part(results, metric):
            continue
        figure, axis = plt.subplots(figsize=(6, 4))
        for name, result in results["schedulers"].items():
            xs, ys, half = _series(result, metric)
            if not xs:
                continue
            line = axis.plot(xs, ys, marker="o" if metric in PARTS else None, label=name)[0]
            if half is not None:
                axis.fill_between(
                    xs, ys - half, ys + half, color=line.get_color(), alpha=0.18, linewidth=0
                )
        axis.set_xlabel("GRPO step")
        axis.set_ylabel(title)
        axis.set_title(title + (" (95 % bands)" if metric != "batch/envs_covered" else ""))
        axis.grid(alpha=0.3)
        axis.legend()
        paths.append(save_figure(figure, out_dir / file_name, dpi=100))
    return paths


def _series(result: Mapping, metric: str | None) -> tuple[list, np.ndarray, np.ndarray | None]:
    """x, y and the half-width of the 95 % band (None where there is no sampling noise to
    show) of one scheduler's curve."""
    if metric in PARTS:
        parts = [(e["step"], part_of(e, metric)) for e in result["eval"]]
        stats = [(step, heldout_ci(p)) for step, p in parts]
        xs = [step for step, _ in stats]
        ys = np.array([stat["mean"] for _, stat in stats], dtype=np.float64)
        half = np.array([stat.get("ci95") or 0.0 for _, stat in stats], dtype=np.float64)
        return xs, ys, half
    points = [(s["step"], s[metric]) for s in result.get("steps", []) if metric in s]
    if not points:
        return [], np.zeros(0), None
    xs = [step for step, _ in points]
    ys = np.array([value for _, value in points], dtype=np.float64)
    if metric != "batch/mean_reward_variance" or not result.get("rewards"):
        return xs, ys, None
    half = []
    for groups in result["rewards"][: len(xs)]:
        variances = [float(np.var(r)) for r in groups.values()]
        half.append(mean_ci(variances)["ci95"] or 0.0)
    return xs, ys, np.asarray(half, dtype=np.float64)


def _fmt(value: float, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"
