"""The ablation's files: ``results.json``, ``run.json``, ``report.md`` and PNG plots.

One code path for both learners (simulator and real GRPO of the policy); only the labels
differ. The numbers are :mod:`~envsched_gnn.eval.ablation.summary`'s: each reported as
mean ± 95 % CI over seeds, a paired margin whose CI contains 0 as inside the noise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envsched_gnn.eval.ablation.config import (
    LEARNER_LABELS,
    PREDICTION_METRICS,
    AblationConfig,
    control_graph_name,
    control_name,
    target_variants,
)
from envsched_gnn.eval.ablation.curves_report import plot_reward_curves, render_reward_curves
from envsched_gnn.eval.ablation.picks import render_picks
from envsched_gnn.eval.ablation.targets_report import render_targets
from envsched_gnn.eval.stats import format_ci
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.plots import pyplot, save_figure
from envsched_gnn.scheduler.dynamic_sampling import SUFFIX

CONTROL_LABELS = {
    "relabelled": "the relabelled graph (primary control)",
    "relabelled_predictor": "the relabelled graph for the predictor only (the similarity "
    "penalty on the real graph)",
    "permuted": "the label-permuted graph (secondary control: also changes the structure)",
    "permuted_within": "the within-permuted graph (secondary)",
    "permuted_cross": "the cross-permuted graph (secondary)",
    "permuted_all": "the fully permuted graph (secondary)",
    "permuted_predictor": "the label-permuted graph for the predictor only (secondary; the "
    "similarity penalty on the real graph)",
    "shuffled": "the SHUFFLED graph (secondary control: also moves quotas onto fake environments)",
}

TARGET_LABELS = {
    "envsched": "EnvSched",
    "envsched_spread": "EnvSched with the spread target P(v > 0)",
    "envsched_ops": "EnvSched with coverage over operation patterns",
}
BEHIND_DS = " behind dynamic sampling"


def target_label(name: str) -> str:
    """The words for a target variant, ``+ds`` included."""
    return TARGET_LABELS[name.removesuffix(SUFFIX)] + (BEHIND_DS if name.endswith(SUFFIX) else "")


def control_label(control: str) -> str:
    """The words for a control (its graph), ``+ds`` included."""
    label = CONTROL_LABELS[control_graph_name(control)]
    return label + (BEHIND_DS if control.endswith(SUFFIX) else "")


SHORT = {
    "batch/mean_reward_variance": "mean var",
    "batch/median_reward_variance": "median var",
    "batch/median_reward": "median reward",
    "batch/envs_covered": "envs/batch",
    "batch/tools_used": "tools/batch",
    "batch/zero_variance_share": "zero-var share",
}


def render_table(results: dict, config: AblationConfig) -> str:
    """The paper's table, one row per scheduler."""
    head = [f"score@{s}" for s in config.score_steps] + [SHORT[m] for m in SHORT]
    head += ["rollouts to random's final (median)"]
    lines = ["| scheduler | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for name, entry in results.items():
        cells = [format_ci(entry["score"][str(s)], 4, "n/a") for s in config.score_steps]
        for metric in SHORT:
            digits = 2 if metric in ("batch/envs_covered", "batch/tools_used") else 4
            cells.append(format_ci(entry["metrics"][metric], digits, "n/a"))
        cells.append(_rollouts_to_final(entry))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _rollouts_to_final(entry: dict) -> str:
    """Median rollouts to random's final held-out reward (averaged over seeds) and how many
    seeds reached it (:mod:`~envsched_gnn.eval.ablation.targets`)."""
    reach = entry.get("compute_to_target", {}).get("rollouts_to", {}).get("1.0")
    if reach is None:
        return "n/a"
    seeds = f"{reach['reached']}/{reach['seeds']} seeds"
    return f"never ({seeds})" if reach["median"] is None else f"{reach['median']:.0f} ({seeds})"


def render_prediction(results: dict) -> str:
    """Spearman of the predictor's q with realised (batch) and true variance, per scheduler."""
    rows = [(name, entry["prediction"]) for name, entry in results.items() if "prediction" in entry]
    if not rows:
        return ""
    lines = [
        "Predictor quality: Spearman of q(i, t) with the realised variance of the batch's "
        "groups (all of them; those of tasks observed at an earlier step; the unseen ones, "
        "whose q is the graph's prior alone), the share of seen tasks in the batch, and "
        "(simulator) the Spearman with every task's true expected group variance at step t; "
        "mean over steps, then mean ± 95 % CI over seeds.",
        "",
        "| scheduler | Spearman q vs realised v (batch) | (seen tasks) | (unseen tasks) "
        "| seen share | Spearman q vs true E[v] (all tasks) |",
        "|---|---|---|---|---|---|",
    ]
    for name, prediction in rows:
        cells = [format_ci(prediction.get(m), 3, "n/a") for m in PREDICTION_METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _margin_parts(margin: dict, config: AblationConfig) -> str:
    return ", ".join(
        f"@{s}: {format_ci(margin[str(s)], 4, 'n/a', noise=True)}" for s in config.score_steps
    )


def render_margins(results: dict, config: AblationConfig) -> str:
    """EnvSched and each control minus random, and EnvSched minus each control, paired."""
    lines = []
    labelled = [(name, target_label(name)) for name in target_variants(config)]
    labelled += [(control_name(c), f"EnvSched on {control_label(c)}") for c in config.controls]
    for name, label in labelled:
        margin = results.get(name, {}).get("margin_over_random")
        if margin:
            lines.append(
                f"- {label} minus random (paired by seed): {_margin_parts(margin, config)}"
            )
    for target in target_variants(config):
        for name, margin in results.get(target, {}).get("margin_over_controls", {}).items():
            label = control_label(name.removeprefix("envsched_"))
            lines.append(
                f"- {target_label(target)} minus EnvSched on {label} (paired by seed): "
                f"{_margin_parts(margin, config)}"
            )
    return "\n".join(lines)


def render_pool(results: dict, config: AblationConfig) -> str:
    """The pool reward (every train task, at each evaluation of the policy learner): per
    scheduler at each score step, and the paired margins over random and over the controls."""
    rows = [(name, entry) for name, entry in results.items() if "pool_score" in entry]
    if not rows:
        return ""
    head = [f"pool@{s}" for s in config.score_steps]
    head += [f"- random @{s}" for s in config.score_steps]
    lines = [
        "Pool reward: the mean reward of the train tasks (the pool the schedulers spend "
        f"rollouts on; {_pool_tasks(config)}) at each evaluation, unbiased by which tasks a "
        "scheduler picked; mean ± 95 % CI over seeds, margins paired by seed.",
        "",
        "| scheduler | " + " | ".join(head) + " |",
        "|---|" + "---|" * len(head),
    ]
    for name, entry in rows:
        margin = entry.get("pool_margin_over_random", {})
        cells = [format_ci(entry["pool_score"][str(s)], 4, "n/a") for s in config.score_steps]
        cells += [
            format_ci(margin.get(str(s)), 4, "n/a", noise=True) if name != "random" else "-"
            for s in config.score_steps
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for target in target_variants(config):
        margins = results.get(target, {}).get("pool_margin_over_controls", {})
        for name, margin in margins.items():
            label = control_label(name.removeprefix("envsched_"))
            lines += ["", f"- Pool: {target_label(target)} minus EnvSched on {label} (paired "
                      f"by seed): {_margin_parts(margin, config)}"]  # fmt: skip
    return "\n".join(lines)


def write_ablation_report(results: dict, run_info: dict, config: AblationConfig, out: Path) -> None:
    """``results.json`` (keyed by scheduler name), ``run.json``, ``report.md`` and PNG plots."""
    write_json_atomically(out / "results.json", results, non_finite_as_null=True)
    write_json_atomically(out / "run.json", run_info, non_finite_as_null=True)
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
        render_pool(results, config),
        "",
        render_reward_curves(results, config),
        "",
        render_targets(results, config.budget_rollouts),
        "",
        render_prediction(results),
        "",
        render_picks({name: e["picks"] for name, e in results.items() if "picks" in e}),
        "",
        f"Timings: graph build {timings.get('graph_build_s', 0.0):.1f} s, runs "
        f"{timings['runs_s']:.1f} s, total {timings['total_s']:.1f} s "
        + (f"({config.workers} worker(s))." if config.learner == "sim" else "(one at a time)."),
        "",
        *(f"![{p.stem}]({p.name})" for p in plots),
        "",
    ]
    (out / "report.md").write_text("\n".join(text), encoding="utf-8")


def _world_line(world: dict, config: AblationConfig) -> str:
    null = (
        " NULL WORLD: every task is simulated as a random other task (a permutation per run "
        "seed), so nothing the graph or the quotas see tells how it behaves."
        if world.get("tasks_shuffled")
        else ""
    )
    if world.get("kind") != "structure":
        return (
            "Simulator world: independent (task difficulty drawn independently of anything "
            "the graph sees)." + null
        )
    line = (
        f"Simulator world: structure, kappa = {config.simulator.kappa:g} (the share of the "
        "difficulty's variance explained by the tasks' hidden structure), world seed "
        f"{config.simulator.world_seed}; {world['tasks_with_hidden_structure']} tasks with a "
        "generator structure"
    )
    fallback = world.get("tasks_structured_by_abstract", 0)
    if fallback:
        line += f", {fallback} structured by their abstracts (visible to the cross graph)"
    return line + "." + null


def _learner_lines(run_info: dict, config: AblationConfig) -> list[str]:
    if config.learner == "sim":
        return [
            "Every number below comes from the learner *simulator* "
            "(`envsched_gnn.eval.simulator.simulate`), not from a trained language model: the "
            "downstream score is the simulated expected reward on the held-out split.",
            "",
            _world_line(run_info.get("world", {}), config),
        ]
    heldout = run_info["heldout"]
    warm_start = (
        f"{run_info['policy']} after an SFT warm start of {run_info['sft_steps']} steps"
        if run_info["sft_steps"] > 0
        else "used as given, no SFT"
    )
    return [
        "Every number below comes from real GRPO runs of the policy "
        "(`envsched_gnn.training.grpo.train.train_grpo`), one per scheduler and seed, all "
        f"from the same starting policy `{run_info['starting_policy']}` ({warm_start}). "
        "The downstream "
        f"score is the held-out mean reward of the policy on {heldout['tasks']} test tasks x "
        f"{heldout['samples']} samples (evaluation seed {heldout['seed']}, the same set for "
        f"every run), measured at step 0 and {_when(heldout)}; score@T is the curve through "
        "the evaluations (piecewise linear) at T x B x K rollouts."
    ]


def _when(heldout: dict) -> str:
    """When a run was evaluated, in words."""
    if heldout.get("rollouts"):
        return (
            "after the first step to reach each of "
            + ", ".join(f"{r:,}" for r in heldout["rollouts"])
            + " rollouts, and after the last"
        )
    return f"every {heldout['every_steps']} steps"


def plot_ablation(results: dict, out: Path, config: AblationConfig) -> list[Path]:
    """Reward against rollouts (``curves_report.plot_reward_curves``), per-step batch
    metrics and prediction quality, one PNG each."""
    plt = pyplot()
    paths = plot_reward_curves(results, out, config)
    label = LEARNER_LABELS[config.learner]
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
        grid = np.arange(1, config.steps + 1, dtype=np.float64)
        for name, entry in results.items():
            # runs behind dynamic sampling step at other budget steps: read each at the grid
            values = np.mean(
                [
                    np.interp(
                        grid,
                        [r["budget_step"] for r in run["records"][1:]],
                        [r[metric] for r in run["records"][1:]],
                    )
                    for run in entry["runs"]
                ],
                axis=0,
            )
            ax.plot(grid, values, linewidth=1.0, label=name)
        ax.set_title(f"{metric} (learner: {label})")
        ax.set_xlabel("budget step (B x K rollouts)")
    axes.flat[0].legend(fontsize=6, ncol=2)
    paths.append(save_figure(fig, out / "batch_metrics.png"))
    if any("prediction" in entry for entry in results.values()):
        paths.append(_plot_prediction(results, out, label))
    return paths


def _plot_prediction(results: dict, out: Path, label: str) -> Path:
    """Per-step prediction metrics: Spearman of q with realised (all, seen, unseen) and true
    variance, the seen share (mean and CI band over seeds)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(PREDICTION_METRICS), figsize=(5 * len(PREDICTION_METRICS), 4.5))
    for ax, metric in zip(axes, PREDICTION_METRICS, strict=True):
        for name, entry in results.items():
            stat = entry.get("prediction", {}).get(metric)
            if stat is None:
                continue
            steps = np.asarray(
                [r["budget_step"] for r in entry["runs"][0]["records"][1:]], dtype=np.float64
            )
            mean = np.array([np.nan if v is None else v for v in stat["per_step_mean"]])
            ci = np.array([0.0 if v is None else v for v in stat["per_step_ci95"]])
            n = min(len(steps), len(mean))
            ax.plot(steps[:n], mean[:n], linewidth=1.0, label=name)
            ax.fill_between(steps[:n], mean[:n] - ci[:n], mean[:n] + ci[:n], alpha=0.12)
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.set_title(f"{metric} (learner: {label})")
        ax.set_xlabel("budget step")
        ax.set_ylabel("share" if metric == "predict/seen_share" else "Spearman")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    return save_figure(fig, out / "prediction.png")


def _pool_tasks(config: AblationConfig) -> str:
    """Which train tasks the pool evaluation rolls out, in words."""
    policy = config.policy
    tasks = f"a fixed subset of {policy.pool_eval_tasks}" if policy.pool_eval_tasks else "all"
    return f"{tasks} x {policy.pool_eval_samples} samples"
