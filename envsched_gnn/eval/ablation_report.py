"""The ablation table: per-scheduler summaries with 95 % CIs, results.json, report.md, plots.

One code path for both learners (simulator and real GRPO of the policy); only the labels
differ. For each scheduler and seed: the downstream score at each reported budget step, and
the mean over its steps of every batch metric (spec section 6). Across the n seeds, each
number is reported as mean +- t_{0.975, n-1} * sd / sqrt(n). "steps to reach random's best"
is the first budget step at which the scheduler's seed-mean score curve reaches the
maximum of random's seed-mean curve (null when it never does); the curve has a point per
budget step (simulator) or per held-out evaluation (policy). Margins over random are
paired by seed (same run seed): mean and CI of score(scheduler) - score(random).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from envsched_gnn.eval.ablate import (
    LEARNER_LABELS,
    SHUFFLED,
    STEP_METRICS,
    AblationConfig,
    curve_steps,
    run_names,
    save_json,
    scores_at,
)

SHORT = {
    "batch/mean_reward_variance": "mean var",
    "batch/median_reward_variance": "median var",
    "batch/median_reward": "median reward",
    "batch/envs_covered": "envs/batch",
    "batch/tools_used": "tools/batch",
    "batch/zero_variance_share": "zero-var share",
}


def mean_ci(values: Sequence[float]) -> dict:
    """Mean and 95 % CI half-width (Student t over seeds); half-width null for one seed."""
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return {"mean": mean, "ci95": None, "per_seed": x.tolist()}
    half = float(student_t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return {"mean": mean, "ci95": half, "per_seed": x.tolist()}


def summarise(runs: Sequence[dict], config: AblationConfig) -> dict:
    """``{scheduler name: {...}}``: scores, metrics, curve, per-seed records (module doc)."""
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        by_name.setdefault(run["name"], []).append(run)
    grid = curve_steps(config)
    results: dict[str, dict] = {}
    for name in run_names(config):
        group = sorted(by_name[name], key=lambda r: r["seed"])
        curves = np.stack([scores_at(r["records"], grid) for r in group])
        metrics = {
            m: mean_ci([np.mean([rec[m] for rec in r["records"][1:]]) for r in group])
            for m in STEP_METRICS
        }
        results[name] = {
            "learner": LEARNER_LABELS[config.learner],
            "seeds": [r["seed"] for r in group],
            "score": {
                str(s): mean_ci([scores_at(r["records"], [s])[0] for r in group])
                for s in config.score_steps
            },
            "metrics": metrics,
            "updates": mean_ci([len(r["records"]) - 1 for r in group]),
            "rollouts": group[0]["rollouts"],
            "wall_s": mean_ci([r["wall_s"] for r in group]),
            "schedule_s_per_step": mean_ci(
                [r["schedule_s"] / max(len(r["records"]) - 1, 1) for r in group]
            ),
            "curve": {
                "budget_step": grid.tolist(),
                "score_mean": curves.mean(axis=0).tolist(),
                "score_ci95": [mean_ci(c)["ci95"] for c in curves.T],
            },
            "runs": [
                {"seed": r["seed"], "records": r["records"], **r.get("extra", {})} for r in group
            ],
        }
    if "random" in results:
        best = max(results["random"]["curve"]["score_mean"])
        for entry in results.values():
            reached = np.flatnonzero(np.asarray(entry["curve"]["score_mean"]) >= best - 1e-12)
            entry["steps_to_random_best"] = int(grid[reached[0]]) if reached.size else None
            entry["random_best_score"] = best
            entry["margin_over_random"] = _margin(entry, results["random"], config)
    return results


def _margin(entry: dict, random: dict, config: AblationConfig) -> dict:
    runs = {r["seed"]: r for r in entry["runs"]}
    other = {r["seed"]: r for r in random["runs"]}
    seeds = sorted(set(runs) & set(other))
    out = {}
    for s in config.score_steps:
        diffs = [
            scores_at(runs[k]["records"], [s])[0] - scores_at(other[k]["records"], [s])[0]
            for k in seeds
        ]
        out[str(s)] = mean_ci(diffs) if diffs else None
    return out


def _fmt(stat: dict | None, digits: int = 4) -> str:
    if stat is None:
        return "n/a"
    if stat["ci95"] is None:
        return f"{stat['mean']:.{digits}f}"
    return f"{stat['mean']:.{digits}f} ± {stat['ci95']:.{digits}f}"


def render_table(results: dict, config: AblationConfig) -> str:
    """The paper's table, one row per scheduler."""
    head = [f"score@{s}" for s in config.score_steps] + [SHORT[m] for m in SHORT]
    head.append("steps to random's best")
    lines = ["| scheduler | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for name, entry in results.items():
        cells = [_fmt(entry["score"][str(s)]) for s in config.score_steps]
        for metric in SHORT:
            digits = 2 if metric in ("batch/envs_covered", "batch/tools_used") else 4
            cells.append(_fmt(entry["metrics"][metric], digits))
        reached = entry.get("steps_to_random_best")
        cells.append("never" if reached is None else str(reached))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_margins(results: dict, config: AblationConfig) -> str:
    lines = []
    for name in ("envsched", SHUFFLED):
        entry = results.get(name, {})
        margin = entry.get("margin_over_random")
        if not margin:
            continue
        label = "EnvSched" if name == "envsched" else "EnvSched on the SHUFFLED graph"
        parts = ", ".join(f"@{s}: {_fmt(margin[str(s)])}" for s in config.score_steps)
        lines.append(f"- {label} minus random (paired by seed): {parts}")
    return "\n".join(lines)


def write_ablation_report(results: dict, run_info: dict, config: AblationConfig, out: Path) -> None:
    """``results.json`` (keyed by scheduler name), ``run.json``, ``report.md`` and PNG plots."""
    save_json(out / "results.json", results)
    save_json(out / "run.json", run_info)
    plots = plot_ablation(results, out, config)
    timings = run_info["timings"]
    text = [
        f"# Ablation (learner: {LEARNER_LABELS[config.learner]})",
        "",
        *_learner_lines(run_info, config),
        "",
        f"Pool: {run_info['pool']['train_tasks']} schedulable train tasks, "
        f"{run_info['pool']['held_out_tasks']} held-out tasks, {run_info['pool']['envs']} "
        f"environments. Budget: {config.steps} steps x B = {config.batch_size} x "
        f"K = {config.simulator.rollouts} rollouts per scheduler; {config.seeds} seeds; "
        "mean ± 95 % CI over seeds.",
        "",
        render_table(results, config),
        "",
        render_margins(results, config),
        "",
        f"Timings: graph build {timings.get('graph_build_s', 0.0):.1f} s, runs "
        f"{timings['runs_s']:.1f} s, total {timings['total_s']:.1f} s "
        + (f"({config.workers} worker(s))." if config.learner == "sim" else "(one at a time)."),
        "",
        *(f"![{p.stem}]({p.name})" for p in plots),
        "",
    ]
    (out / "report.md").write_text("\n".join(text), encoding="utf-8")


def _learner_lines(run_info: dict, config: AblationConfig) -> list[str]:
    if config.learner == "sim":
        return [
            "Every number below comes from the learner *simulator* "
            "(`envsched_gnn.eval.simulate`), not from a trained language model: the downstream "
            "score is the simulated expected reward on the held-out split."
        ]
    heldout = run_info["heldout"]
    warm_start = (
        f"{run_info['policy']} after an SFT warm start of {run_info['sft_steps']} steps"
        if run_info["sft_steps"] > 0
        else "used as given, no SFT"
    )
    return [
        "Every number below comes from real GRPO runs of the policy "
        "(`envsched_gnn.training.grpo_train.train_grpo`), one per scheduler and seed, all "
        f"from the same starting policy `{run_info['starting_policy']}` ({warm_start}). "
        "The downstream "
        f"score is the held-out mean reward of the policy on {heldout['tasks']} test tasks x "
        f"{heldout['samples']} samples (evaluation seed {heldout['seed']}, the same set for "
        f"every run), measured at step 0 and every {heldout['every_steps']} steps; "
        f"score@T is the last evaluation within T x B x K rollouts.",
    ]


def plot_ablation(results: dict, out: Path, config: AblationConfig) -> list[Path]:
    """Score curves (mean and CI band) and per-step batch metrics, one PNG each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, entry in results.items():
        x = np.asarray(entry["curve"]["budget_step"])
        y = np.asarray(entry["curve"]["score_mean"])
        ci = np.asarray([c if c is not None else 0.0 for c in entry["curve"]["score_ci95"]])
        style = "-" if name in ("envsched", "random") else "--"
        marker = "o" if config.learner == "policy" else None
        ax.plot(x, y, style, marker=marker, label=name, linewidth=2.0 if style == "-" else 1.0)
        ax.fill_between(x, y - ci, y + ci, alpha=0.12)
    ax.set_xlabel("budget step (rollouts / (B K))")
    label = LEARNER_LABELS[config.learner]
    ax.set_ylabel(
        "held-out expected reward (SIMULATED)"
        if config.learner == "sim"
        else "held-out mean reward of the policy"
    )
    ax.set_title(f"Downstream score over the rollout budget (learner: {label})")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    paths.append(out / "score.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, metric in zip(
        axes.flat,
        (
            "batch/mean_reward_variance",
            "batch/zero_variance_share",
            "batch/envs_covered",
            "batch/median_reward",
        ),
        strict=True,
    ):
        for name, entry in results.items():
            first = entry["runs"][0]["records"][1:]
            steps = np.array([r["budget_step"] for r in first])
            values = np.mean(
                [[r[metric] for r in run["records"][1 : len(first) + 1]] for run in entry["runs"]],
                axis=0,
            )
            ax.plot(steps, values, linewidth=1.0, label=name)
        ax.set_title(f"{metric} (learner: {label})")
        ax.set_xlabel("budget step")
    axes.flat[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    paths.append(out / "batch_metrics.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths
