"""Compute to a target: the rollouts (and rollout seconds) each run needs to reach a share of
random's lift, the area under its curve, its reward at equal updates, paired by seed.

With y_0(s) the start of seed s (the step-0 evaluation, which the policy learner's runs
share) and L plain ``random``'s lift, its final reward minus its start averaged over seeds, the
target of share f in seed s is y_f(s) = y_0(s) + f L (f in :data:`FRACTIONS`; 1 is random's
final, averaged over seeds, so that a seed's own noisy final does not move the target). Per
run (evaluations (b_j, y_j), b in budget steps, rollouts = b B K):

- rollouts to y_f: the first point where the piecewise-linear curve through the evaluations
  reaches y_f (:func:`~envsched_gnn.eval.ablation.curves.first_reach`), None when none does;
  its rollout seconds, the run's cumulative rollout time interpolated there;
- area: (1 / R) * integral of the curve over rollouts 0..R (trapezoids, the last evaluation held
  to the budget R): the mean reward over the budget;
- groups rolled out per group trained, and the updates made.

Against each reference of :data:`REFERENCES` that ran, paired by seed: rollouts to each target
(seeds where both reached; also as the geometric-mean ratio reference / run, its 95 % interval
from the t-interval of the mean log ratio: above 1, the run needs fewer rollouts), the area,
the groups per group trained, and the reward at equal updates: both curves read against their
updates, at the smaller of the two runs' update counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from envsched_gnn.eval.ablation.curves import evaluations, first_reach
from envsched_gnn.eval.stats import mean_ci, paired_difference

FRACTIONS = (0.5, 0.75, 0.9, 1.0)
"""Shares of random's final lift whose rollouts are reported (1: random's final)."""
LIFT_REFERENCE = "random"
"""Whose lift sets the targets: plain uniform sampling, every group trained."""
REFERENCES = ("random", "random+ds", "envsched_relabelled", "envsched_relabelled+ds")
"""What every run is paired against, where it ran: random and the relabelled control, plain
and behind dynamic sampling."""


def lift_targets(reference_runs: Sequence[Mapping], fractions=FRACTIONS) -> dict | None:
    """``{"start": {seed: y_0}, "lift": L, "targets": {f: {seed: y_f}}}`` from the reference's
    runs (module docstring); None when it did not lift (no target to reach)."""
    start = {r["seed"]: float(r["records"][0]["score"]) for r in reference_runs}
    finals = {r["seed"]: float(evaluations(r["records"])[1][-1]) for r in reference_runs}
    lift = float(np.mean([finals[s] - start[s] for s in start]))
    if lift <= 0:
        return None
    targets = {str(f): {s: y + f * lift for s, y in start.items()} for f in fractions}
    return {"start": start, "lift": lift, "targets": targets}


def run_measures(run: Mapping, targets: Mapping[str, float], per_budget_step: int, budget: float):
    """One run's rollouts and rollout seconds to each target, area, groups per group trained,
    updates and final reward (module docstring); ``budget`` in budget steps."""
    records = run["records"]
    steps, scores = evaluations(records)
    spent = np.array([0.0] + [r["budget_step"] for r in records[1:]])
    seconds = np.cumsum([0.0] + [r.get("rollout_s", math.nan) for r in records[1:]])
    reached = {f: first_reach(steps, scores, y) for f, y in targets.items()}
    groups = sum(r.get("groups", 0) for r in records[1:])
    trained = sum(r["trained_groups"] for r in records[1:])
    x = np.append(steps, budget) if steps[-1] < budget else steps
    y = np.append(scores, scores[-1]) if steps[-1] < budget else scores
    return {
        "rollouts": {f: None if b is None else b * per_budget_step for f, b in reached.items()},
        "rollout_s": {
            f: None if b is None else float(np.interp(b, spent, seconds))
            for f, b in reached.items()
        },
        "area": float(np.trapezoid(y, x) / budget),
        "groups_per_trained": groups / trained if trained and groups else None,
        "updates": int(updates_curve(records)[0][-1]) if len(records) > 1 else 0,
        "final": float(scores[-1]),
    }


def updates_curve(records: Sequence[Mapping]) -> tuple[np.ndarray, np.ndarray]:
    """(updates made, reward) at each evaluation of a run (a step updates when it trained a
    group)."""
    made = np.cumsum([0] + [int(r["trained_groups"] > 0) for r in records[1:]])
    scored = [i for i, r in enumerate(records) if r.get("score") is not None]
    return made[scored].astype(np.float64), np.array([records[i]["score"] for i in scored], float)


def at_equal_updates(run: Mapping, reference: Mapping) -> tuple[float, float, int]:
    """Both runs' rewards after U updates, U the smaller of their update counts."""
    mine, theirs = updates_curve(run["records"]), updates_curve(reference["records"])
    made = int(min(mine[0][-1], theirs[0][-1]))
    return float(np.interp(made, *mine)), float(np.interp(made, *theirs)), made


def summarise_targets(results: Mapping[str, dict], per_budget_step: int, budget: float) -> dict:
    """``{"targets": lift_targets, "runs": {name: {...}}}`` (module docstring); {} without
    plain random's runs, or when random did not lift."""
    reference = results.get(LIFT_REFERENCE)
    lifted = lift_targets(reference["runs"]) if reference is not None else None
    if lifted is None:
        return {}
    out: dict = {"targets": lifted, "runs": {}}
    measured = {
        name: {
            r["seed"]: run_measures(r, _of_seed(lifted, r["seed"]), per_budget_step, budget)
            for r in entry["runs"]
            if r["seed"] in lifted["start"]
        }
        for name, entry in results.items()
    }
    for name, per_seed in measured.items():
        out["runs"][name] = {
            "per_seed": per_seed,
            **_over_seeds(per_seed, lifted["targets"]),
            "versus": {
                ref: _versus(name, ref, results, measured)
                for ref in REFERENCES
                if ref in results and ref != name
            },
        }
    return out


def _of_seed(lifted: Mapping, seed: int) -> dict[str, float]:
    """The targets of seed ``seed``, by share."""
    return {f: by_seed[seed] for f, by_seed in lifted["targets"].items()}


def _over_seeds(per_seed: Mapping[int, dict], targets: Mapping[str, Mapping]) -> dict:
    rows = list(per_seed.values())
    rollouts = {}
    for f in targets:
        values = [row["rollouts"][f] for row in rows]
        reached = [v for v in values if v is not None]
        median = float(np.median([math.inf if v is None else v for v in values]))
        rollouts[f] = {
            "reached": len(reached),
            "seeds": len(values),
            "median": median if math.isfinite(median) else None,
            "mean_reached": mean_ci(reached) if reached else None,
            "rollout_s_reached": mean_ci(
                [row["rollout_s"][f] for row in rows if row["rollout_s"][f] is not None]
            )
            if reached
            else None,
        }
    per_trained = [row["groups_per_trained"] for row in rows if row["groups_per_trained"]]
    return {
        "rollouts_to": rollouts,
        "area": mean_ci([row["area"] for row in rows]),
        "groups_per_trained": mean_ci(per_trained) if per_trained else None,
        "updates": mean_ci([row["updates"] for row in rows]),
    }


def _versus(name: str, ref: str, results: Mapping, measured: Mapping) -> dict:
    """``name`` against ``ref``, paired by seed."""
    mine, theirs = measured[name], measured[ref]
    seeds = sorted(set(mine) & set(theirs))
    out: dict = {"seeds": seeds, "rollouts_to": {}}
    for f in next(iter(mine.values()))["rollouts"]:
        both = [
            s
            for s in seeds
            if mine[s]["rollouts"][f] is not None and theirs[s]["rollouts"][f] is not None
        ]
        entry: dict = {"pairs": len(both), "difference": None, "ratio": None}
        if both:
            a = {s: mine[s]["rollouts"][f] for s in both}
            b = {s: theirs[s]["rollouts"][f] for s in both}
            entry["difference"] = paired_difference(a, b)
            entry["ratio"] = _ratio({s: math.log(b[s] / a[s]) for s in both})
        out["rollouts_to"][f] = entry
    if seeds:
        out["area"] = paired_difference(
            {s: mine[s]["area"] for s in seeds}, {s: theirs[s]["area"] for s in seeds}
        )
        runs = {r["seed"]: r for r in results[name]["runs"]}
        refs = {r["seed"]: r for r in results[ref]["runs"]}
        equal = {s: at_equal_updates(runs[s], refs[s]) for s in seeds}
        out["at_equal_updates"] = {
            **paired_difference(
                {s: e[0] for s, e in equal.items()}, {s: e[1] for s, e in equal.items()}
            ),
            "updates": [e[2] for e in equal.values()],
        }
        per_trained = [
            s for s in seeds if mine[s]["groups_per_trained"] and theirs[s]["groups_per_trained"]
        ]
        if per_trained:
            out["groups_per_trained"] = paired_difference(
                {s: mine[s]["groups_per_trained"] for s in per_trained},
                {s: theirs[s]["groups_per_trained"] for s in per_trained},
            )
    return out


def _ratio(log_ratios: Mapping[int, float]) -> dict:
    """The geometric-mean ratio and its 95 % interval [lo, hi] from the mean log ratio."""
    stat = mean_ci(list(log_ratios.values()))
    half = stat["ci95"]
    return {
        "mean": math.exp(stat["mean"]),
        "interval": None
        if half is None
        else [math.exp(stat["mean"] - half), math.exp(stat["mean"] + half)],
        "n": stat["n"],
    }
