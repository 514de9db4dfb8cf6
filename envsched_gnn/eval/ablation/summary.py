"""The ablation's numbers: per-scheduler summaries over seeds, 95 % CIs, paired margins.

One code path for both learners. Per scheduler and seed: the score at each reported budget
step (:func:`scores_at`) and the mean of every batch metric (spec section 6); across n seeds,
mean +- t_{0.975, n-1} * sd / sqrt(n). Margins over random and over each control, score(a) -
score(b), are paired by seed; a CI containing 0 is inside the noise. Reward against rollouts
(:mod:`~envsched_gnn.eval.ablation.curves`): every scheduler minus each of :data:`REFERENCES`
at every curve point; the rollouts to each share of random's lift, random's final included
(the paper's "3x fewer rollouts"), are :mod:`~envsched_gnn.eval.ablation.targets`'s
(``compute_to_target``). Where the records hold ``pool_score`` (the reward over every train
task) or ``check_fraction``, the same is given under their keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from envsched_gnn.eval import stats
from envsched_gnn.eval.ablation.config import (
    LEARNER_LABELS,
    PREDICTION_METRICS,
    STEP_METRICS,
    AblationConfig,
    control_name,
    curve_steps,
    run_names,
    same_kind_controls,
    target_variants,
)
from envsched_gnn.eval.ablation.curves import REWARD_KEYS, paired_curve, scores_at
from envsched_gnn.eval.ablation.curves_report import REWARDS
from envsched_gnn.eval.ablation.targets import summarise_targets

MARGINS = {"score": "", "pool_score": "pool_", "check_fraction": "fraction_"}
"""The rewards paired against random and the controls, and the prefix of their margins' keys."""
REFERENCES = ("random", control_name("relabelled"))
"""What every scheduler's reward curve is paired against, when it ran: random and EnvSched on
the relabelled graph (the primary control)."""


def over_seeds(values: Sequence[float]) -> dict:
    """:func:`~envsched_gnn.eval.stats.mean_ci` over seeds, with the ``per_seed`` values."""
    x = np.asarray(values, dtype=np.float64)
    return {**stats.mean_ci(x), "per_seed": x.tolist()}


def summarise(runs: Sequence[dict], config: AblationConfig) -> dict:
    """``{scheduler name: {...}}``: scores, metrics, curve, per-seed records (module doc)."""
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        by_name.setdefault(run["name"], []).append(run)
    grid = curve_steps(config)
    results: dict[str, dict] = {}
    for name in run_names(config):
        group = sorted(by_name[name], key=lambda r: r["seed"])
        score, curve = _scores(group, "score", grid, config)
        metrics = {
            m: over_seeds([np.mean([rec[m] for rec in r["records"][1:]]) for r in group])
            for m in STEP_METRICS
        }
        results[name] = {
            "learner": LEARNER_LABELS[config.learner],
            "seeds": [r["seed"] for r in group],
            "score": score,
            "metrics": metrics,
            # a record is a step's batch; DAPO's steps that only refill train no group
            "updates": over_seeds(
                [sum(rec["trained_groups"] > 0 for rec in r["records"][1:]) for r in group]
            ),
            "rollouts": group[0]["rollouts"],
            "wall_s": over_seeds([r["wall_s"] for r in group]),
            "schedule_s_per_step": over_seeds(
                [r["schedule_s"] / max(len(r["records"]) - 1, 1) for r in group]
            ),
            "curve": curve,
            "runs": [
                {"seed": r["seed"], "records": r["records"], **r.get("extra", {})} for r in group
            ],
        }
        for key in ("pool_score", "check_fraction"):
            if all(r["records"][0].get(key) is not None for r in group):
                curve = REWARDS[key][0]
                results[name][key], results[name][curve] = _scores(group, key, grid, config)
        prediction = prediction_summary(group)
        if prediction:
            results[name]["prediction"] = prediction
    if "random" in results:
        for entry in results.values():
            for key, prefix in MARGINS.items():
                if key in entry and key in results["random"]:
                    margin = paired_margin(entry, results["random"], config, key)
                    entry[f"{prefix}margin_over_random"] = margin
    for entry in results.values():
        entry.update(against_references(entry, results, grid, config))
    per_budget_step = config.rollouts_per_step
    compute = summarise_targets(results, per_budget_step, float(config.steps))
    for name, entry in compute.get("runs", {}).items():
        results[name]["compute_to_target"] = {"targets": compute["targets"], **entry}
    for target in target_variants(config):
        envsched = results[target]
        for key, prefix in MARGINS.items():
            if key in envsched:
                envsched[f"{prefix}margin_over_controls"] = {
                    name: paired_margin(envsched, results[name], config, key)
                    for name in same_kind_controls(target, config)
                    if key in results[name]
                }
    return results


def _scores(group: Sequence[dict], key: str, grid: np.ndarray, config: AblationConfig) -> tuple:
    """Over the seeds of ``group``: ``key`` at each score step (mean, CI, per seed) and its
    curve over ``grid`` (the seed mean and the CI at each budget step)."""
    curves = np.stack([scores_at(r["records"], grid, key) for r in group])
    at_steps = {
        str(s): over_seeds([scores_at(r["records"], [s], key)[0] for r in group])
        for s in config.score_steps
    }
    curve = {
        "budget_step": grid.tolist(),
        "score_mean": curves.mean(axis=0).tolist(),
        "score_ci95": [over_seeds(c)["ci95"] for c in curves.T],
    }
    return at_steps, curve


def against_references(
    entry: dict, results: dict, grid: np.ndarray, config: AblationConfig
) -> dict:
    """``curve_margins``: entry minus each of :data:`REFERENCES` that ran, at every budget step
    of ``grid``, paired by seed, for each reward the runs recorded
    (:mod:`~envsched_gnn.eval.ablation.curves`)."""
    keys = _reward_keys(entry)
    out: dict = {"curve_margins": {}}
    for reference in REFERENCES:
        other = results.get(reference)
        if other is None or other is entry:
            continue
        out["curve_margins"][reference] = {
            key: paired_curve(entry["runs"], other["runs"], grid, key)
            for key in keys
            if key in _reward_keys(other)
        }
    return out


def _reward_keys(entry: dict) -> list[str]:
    """The rewards every run of ``entry`` records (from the start on)."""
    return [
        k for k in REWARD_KEYS if all(r["records"][0].get(k) is not None for r in entry["runs"])
    ]


def prediction_summary(group: Sequence[dict]) -> dict:
    """Per prediction metric: mean over steps per seed (steps where it is defined), mean and CI
    over seeds, and the per-step mean over seeds; {} when the scheduler predicts nothing."""
    summary = {}
    for metric in PREDICTION_METRICS:
        per_step = [[rec.get(metric, math.nan) for rec in r["records"][1:]] for r in group]
        steps = max(len(row) for row in per_step)  # seeds differ behind dynamic sampling
        values = np.array([row + [math.nan] * (steps - len(row)) for row in per_step])
        if not np.isfinite(values).any():
            continue
        defined = np.isfinite(values)
        filled = np.where(defined, values, 0.0)
        seed_means = [float(f[d].mean()) for f, d in zip(filled, defined, strict=True) if d.any()]
        per_step = [
            over_seeds(col[ok]) if ok.any() else None
            for col, ok in zip(values.T, defined.T, strict=True)
        ]
        summary[metric] = {
            **over_seeds(seed_means),
            "per_step_mean": [None if c is None else c["mean"] for c in per_step],
            "per_step_ci95": [None if c is None else c["ci95"] for c in per_step],
        }
    return summary


def paired_margin(
    entry: dict, other_entry: dict, config: AblationConfig, key: str = "score"
) -> dict:
    """Per score step, mean and CI over seeds of score(entry) - score(other_entry) (``key``:
    ``score`` or ``pool_score``), paired by seed (None without a seed in common)."""
    out = {}
    for s in config.score_steps:
        mine, theirs = (
            {r["seed"]: scores_at(r["records"], [s], key)[0] for r in e["runs"]}
            for e in (entry, other_entry)
        )
        shared = mine.keys() & theirs.keys()
        out[str(s)] = stats.paired_difference(mine, theirs, "per_seed") if shared else None
    return out
