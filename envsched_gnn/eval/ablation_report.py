"""The ablation table: per-scheduler summaries with 95 % CIs, results.json, report.md, plots.

One code path for both learners (simulator and real GRPO of the policy); only the labels
differ. For each scheduler and seed: the downstream score at each reported budget step, and
the mean over its steps of every batch metric (spec section 6). Across the n seeds, each
number is reported as mean +- t_{0.975, n-1} * sd / sqrt(n). "steps to reach random's best"
is the first budget step at which the scheduler's seed-mean score curve reaches the
maximum of random's seed-mean curve (null when it never does); the curve has a point per
budget step (simulator) or per held-out evaluation (policy); "rollouts to random's final" is
the budget, in rollouts, at which that curve first reaches random's final seed-mean score
(the paper's "EnvSched reaches random's result with 3x fewer rollouts"). Margins over random are
paired by seed (same run seed): mean and CI of score(scheduler) - score(random); so is
EnvSched's margin over each control graph, score(envsched) - score(envsched_<control>). A
margin whose CI contains 0 is reported as inside the noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from envsched_gnn.eval.ablate import (
    LEARNER_LABELS,
    PREDICTION_METRICS,
    STEP_METRICS,
    AblationConfig,
    control_name,
    curve_steps,
    run_names,
    save_json,
    scores_at,
)

CONTROL_LABELS = {
    "permuted": "the label-permuted graph (primary control)",
    "permuted_within": "the within-permuted graph",
    "permuted_cross": "the cross-permuted graph",
    "permuted_all": "the fully permuted graph",
    "permuted_predictor": "the label-permuted graph for the predictor only (the similarity "
    "penalty on the real graph)",
    "shuffled": "the SHUFFLED graph (secondary control: also moves quotas onto fake environments)",
}

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
        prediction = prediction_summary(group)
        if prediction:
            results[name]["prediction"] = prediction
    if "random" in results:
        best = max(results["random"]["curve"]["score_mean"])
        for entry in results.values():
            entry["steps_to_random_best"] = _first_step_reaching(entry, best, grid)
            entry["random_best_score"] = best
            entry["rollouts_to_random_final"] = _rollouts_to(
                entry, results["random"]["curve"]["score_mean"][-1], grid, config
            )
            entry["margin_over_random"] = paired_margin(entry, results["random"], config)
    if "envsched" in results:
        results["envsched"]["margin_over_controls"] = {
            control_name(c): paired_margin(results["envsched"], results[control_name(c)], config)
            for c in config.controls
        }
    return results


def _first_step_reaching(entry: dict, target: float, grid: np.ndarray) -> int | None:
    """The first budget step at which the seed-mean curve reaches ``target``; None when it
    never does."""
    reached = np.flatnonzero(np.asarray(entry["curve"]["score_mean"]) >= target - 1e-12)
    return int(grid[reached[0]]) if reached.size else None


def _rollouts_to(
    entry: dict, target: float, grid: np.ndarray, config: AblationConfig
) -> int | None:
    """Rollouts (budget step x B x K) at which the seed-mean curve first reaches ``target``;
    None when it never does."""
    step = _first_step_reaching(entry, target, grid)
    return None if step is None else step * config.batch_size * config.simulator.rollouts


def prediction_summary(group: Sequence[dict]) -> dict:
    """Per prediction metric: mean over steps per seed (steps where it is defined), mean and CI
    over seeds, and the per-step mean over seeds; {} when the scheduler predicts nothing."""
    summary = {}
    for metric in PREDICTION_METRICS:
        per_step = [[rec.get(metric, math.nan) for rec in r["records"][1:]] for r in group]
        values = np.array(per_step, dtype=np.float64)
        if not np.isfinite(values).any():
            continue
        defined = np.isfinite(values)
        filled = np.where(defined, values, 0.0)
        seed_means = [float(f[d].mean()) for f, d in zip(filled, defined, strict=True) if d.any()]
        per_step = [
            mean_ci(col[ok]) if ok.any() else None
            for col, ok in zip(values.T, defined.T, strict=True)
        ]
        summary[metric] = {
            **mean_ci(seed_means),
            "per_step_mean": [None if c is None else c["mean"] for c in per_step],
            "per_step_ci95": [None if c is None else c["ci95"] for c in per_step],
        }
    return summary


def paired_margin(entry: dict, other_entry: dict, config: AblationConfig) -> dict:
    """Per score step, mean and CI over seeds of score(entry) - score(other_entry), paired."""
    runs = {r["seed"]: r for r in entry["runs"]}
    other = {r["seed"]: r for r in other_entry["runs"]}
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
    head += ["steps to random's best", "rollouts to random's final"]
    lines = ["| scheduler | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for name, entry in results.items():
        cells = [_fmt(entry["score"][str(s)]) for s in config.score_steps]
        for metric in SHORT:
            digits = 2 if metric in ("batch/envs_covered", "batch/tools_used") else 4
            cells.append(_fmt(entry["metrics"][metric], digits))
        reached = entry.get("steps_to_random_best")
        cells.append("never" if reached is None else str(reached))
        rollouts = entry.get("rollouts_to_random_final")
        cells.append("never" if rollouts is None else str(rollouts))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_prediction(results: dict) -> str:
    """Spearman of the predictor's q with realised (batch) and true variance, per scheduler."""
    rows = [(name, entry["prediction"]) for name, entry in results.items() if "prediction" in entry]
    if not rows:
        return ""
    lines = [
        "Predictor quality: Spearman of q(i, t) with the realised variance of the batch's "
        "groups, and (simulator) with every task's true expected group variance at step t; "
        "mean over steps, then mean ± 95 % CI over seeds.",
        "",
        "| scheduler | Spearman q vs realised v (batch) | Spearman q vs true E[v] (all tasks) |",
        "|---|---|---|",
    ]
    for name, prediction in rows:
        cells = [_fmt(prediction.get(m), 3) for m in PREDICTION_METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _verdict(stat: dict | None) -> str:
    if stat is None or stat["ci95"] is None:
        return ""
    low, high = stat["mean"] - stat["ci95"], stat["mean"] + stat["ci95"]
    return " (inside the noise)" if low <= 0.0 <= high else ""


def _margin_parts(margin: dict, config: AblationConfig) -> str:
    return ", ".join(
        f"@{s}: {_fmt(margin[str(s)])}{_verdict(margin[str(s)])}" for s in config.score_steps
    )


def render_margins(results: dict, config: AblationConfig) -> str:
    """EnvSched and each control minus random, and EnvSched minus each control, paired."""
    lines = []
    labelled = [("envsched", "EnvSched")]
    labelled += [(control_name(c), f"EnvSched on {CONTROL_LABELS[c]}") for c in config.controls]
    for name, label in labelled:
        margin = results.get(name, {}).get("margin_over_random")
        if margin:
            lines.append(
                f"- {label} minus random (paired by seed): {_margin_parts(margin, config)}"
            )
    for name, margin in results.get("envsched", {}).get("margin_over_controls", {}).items():
        label = CONTROL_LABELS[name.removeprefix("envsched_")]
        lines.append(
            f"- EnvSched minus EnvSched on {label} (paired by seed): "
            f"{_margin_parts(margin, config)}"
        )
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
        render_prediction(results),
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
        " NULL WORLD: every task is simulated as a seeded random other task, so nothing the "
        "graph or the quotas see tells how it behaves."
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
            "(`envsched_gnn.eval.simulate`), not from a trained language model: the downstream "
            "score is the simulated expected reward on the held-out split.",
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
    if any("prediction" in entry for entry in results.values()):
        paths.append(_plot_prediction(results, out, label))
    return paths


def _plot_prediction(results: dict, out: Path, label: str) -> Path:
    """Per-step Spearman of q with realised and true variance (mean and CI band over seeds)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
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
        ax.set_ylabel("Spearman")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = out / "prediction.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
