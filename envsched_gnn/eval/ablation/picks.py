"""The picks diagnosed: what each scheduler's batches held, from the runs' own groups.

From the policy learner's ``extra.groups`` (per step: tasks, K rewards, stage, score and
predicted spread at the pick), per scheduler and seed: picks by reference-call count and by
abstract operation, with the zero-variance share of each call count (a group is
*informative* when v > 0); the zero-variance share of first and repeat visits; the wasted
share of rollouts, wasted = 1 - min(U, T) / G with U informative groups rolled out, T trained
(``trained_groups``) and G in all, paired by seed against random's, and G / T; at first
visits and at repeats the AUC of the pick score for informative vs zero-variance (ties one
half, NaN with one class), and at first visits the informative share minus random's; and the
predictor as a call before rollout: precision and recall of "zero-variance" called from the
task's previous group (GRESO's signal) and from the spread target's P(v > 0) < 1/2, and the
revival rate, the share of repeats after a zero-variance group that are informative. Per-seed
values are reported as mean ± 95 % CI.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from envsched_gnn.envs.pool import Pool
from envsched_gnn.eval.ablation.curves_report import markdown_table
from envsched_gnn.eval.stats import format_ci, mean_ci, paired_difference

TOP_ABSTRACTS = 3
"""How many of a scheduler's most-picked abstract operations the concentration share counts."""

MARGINS_OVER_RANDOM = {
    "informative_share_first": "informative_first_minus_random",
    "wasted_share": "wasted_minus_random",
}
"""The per-seed shares also given minus random's (paired by seed), and the names they go by."""


WINDOWS = 5
"""Equal windows of a run's rollouts over which the waste over training is given."""


@dataclass(frozen=True)
class Pick:
    """One group of a run: the task picked at ``step``, how, and what its K rewards showed."""

    step: int
    task_id: str
    calls: int
    abstract: str
    informative: bool
    first_visit: bool
    score: float | None
    stage: str | None
    level: float | None = None
    """The reward every rollout of a zero-variance group got (None: the group spread)."""
    rollouts: int = 0
    """K, the group's rollouts."""
    zero_before: bool | None = None
    """Whether the task's previous group was zero-variance (None at a first visit)."""
    spread: float | None = None
    """The predicted P(v > 0) at the pick (the spread target's E_z; None without one)."""


def run_picks(groups: Sequence[Mapping], pool: Pool) -> list[Pick]:
    """The picks of one run, from its ``extra.groups`` (steps in order)."""
    tasks = {t.task_id: t for t in pool.tasks}
    last_zero: dict[str, bool] = {}
    picks = []
    for group in sorted(groups, key=lambda g: g["step"]):
        n = len(group["task_ids"])
        scores = group.get("score") or [None] * n
        stages = group.get("stage") or [None] * n
        spreads = group.get("spread") or [None] * n
        for task_id, rewards, score, stage, spread in zip(
            group["task_ids"], group["rewards"], scores, stages, spreads, strict=True
        ):
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(f"pick diagnosis: task {task_id!r} of a run is not in the pool")
            informative = min(rewards) != max(rewards)
            picks.append(
                Pick(
                    int(group["step"]),
                    task_id,
                    len(task.reference_solution or []),
                    task.abstract or "(no abstract)",
                    informative,
                    task_id not in last_zero,
                    None if score is None else float(score),
                    stage,
                    None if informative else float(rewards[0]),
                    len(rewards),
                    last_zero.get(task_id),
                    None if spread is None else float(spread),
                )
            )
            last_zero[task_id] = not informative
    return picks


def waste_over_training(picks: Sequence[Pick], windows: int = WINDOWS) -> list[dict | None]:
    """The zero-variance share of the groups rolled out in each of ``windows`` equal spans of a
    run's rollouts (a step counts where its rollouts start), split into all-0 (every rollout
    0), all-1 (every rollout 1) and the rest (equal partial credit); None for a span without a
    step."""
    per_step: dict[int, list[Pick]] = {}
    for p in picks:
        per_step.setdefault(p.step, []).append(p)
    total = sum(p.rollouts for p in picks)
    spans: list[list[Pick]] = [[] for _ in range(windows)]
    spent = 0
    for step in sorted(per_step):
        spans[min(windows - 1, windows * spent // total)] += per_step[step]
        spent += sum(p.rollouts for p in per_step[step])
    return [
        {
            "groups": len(span),
            "zero": sum(p.level is not None for p in span) / len(span),
            "all0": sum(p.level == 0.0 for p in span) / len(span),
            "all1": sum(p.level == 1.0 for p in span) / len(span),
        }
        if span
        else None
        for span in spans
    ]


def zero_calls(called: Sequence[bool], zero: Sequence[bool]) -> dict | None:
    """Precision and recall of calls "this group will be zero-variance" against what the
    groups were; None without a zero-variance group. Without a call, recall is 0 and precision
    NaN (a predictor that never calls a pick zero-variance, as a spread target that picks
    the tasks it predicts to spread may)."""
    called, zero = np.asarray(called, bool), np.asarray(zero, bool)
    hits = int((called & zero).sum())
    if not zero.any():
        return None
    return {
        "precision": hits / int(called.sum()) if called.any() else math.nan,
        "recall": hits / int(zero.sum()),
        "called": int(called.sum()),
        "zero": int(zero.sum()),
        "groups": int(called.size),
    }


def auc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """P(score of a positive > score of a negative), ties one half (Mann-Whitney); NaN when
    either class is empty."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def seed_summary(picks: Sequence[Pick], trained: int | None = None) -> dict:
    """One run's diagnosis: shares by call count, zero-variance shares, the wasted share (with
    ``trained`` groups; every group trained when None), AUC at first visits."""
    calls = Counter(p.calls for p in picks)
    first = [p for p in picks if p.first_visit]
    repeat = [p for p in picks if not p.first_visit]
    scored = [p for p in first if p.score is not None]
    by_step: dict[int, set[str]] = {}
    for p in picks:
        by_step.setdefault(p.step, set()).add(p.abstract)
    abstracts = Counter(p.abstract for p in picks)
    top = sum(n for _, n in abstracts.most_common(TOP_ABSTRACTS))
    informative = sum(p.informative for p in picks)
    used = informative if trained is None else min(informative, trained)
    scored_repeats = [p for p in repeat if p.score is not None]
    with_spread = {
        visit: [p for p in chosen if p.spread is not None]
        for visit, chosen in (("first", first), ("repeat", repeat))
    }
    was_zero = [p for p in repeat if p.zero_before]
    return {
        "groups": len(picks),
        "groups_per_trained": len(picks) / trained if trained else None,
        "zero_share": _zero_share(picks),
        "waste_over_training": waste_over_training(picks),
        "wasted_share": 1.0 - used / len(picks),
        "calls_share": {str(c): n / len(picks) for c, n in sorted(calls.items())},
        "zero_share_by_calls": {
            str(c): _zero_share([p for p in picks if p.calls == c]) for c in sorted(calls)
        },
        "first_visits": len(first),
        "zero_share_first": _zero_share(first),
        "repeat_visits": len(repeat),
        "zero_share_repeat": _zero_share(repeat),
        "informative_share_first": 1.0 - _zero_share(first) if first else math.nan,
        "auc_first": auc([p.score for p in scored], [p.informative for p in scored])
        if scored
        else None,
        "auc_repeat": auc(
            [p.score for p in scored_repeats], [p.informative for p in scored_repeats]
        )
        if scored_repeats
        else None,
        # GRESO's call: zero-variance again where it was at the last visit
        "history_call": zero_calls(
            [bool(p.zero_before) for p in repeat], [not p.informative for p in repeat]
        ),
        "revival": sum(p.informative for p in was_zero) / len(was_zero) if was_zero else None,
        # the spread target's call: zero-variance where the predicted P(v > 0) < 1/2
        "spread_call": {
            visit: zero_calls([p.spread < 0.5 for p in chosen], [not p.informative for p in chosen])
            for visit, chosen in with_spread.items()
            if chosen
        },
        "abstracts_per_batch": float(np.mean([len(a) for a in by_step.values()])),
        "top_abstracts_share": top / len(picks),
        "abstract_counts": dict(abstracts.most_common()),
    }


def _zero_share(picks: Sequence[Pick]) -> float:
    return sum(not p.informative for p in picks) / len(picks) if picks else math.nan


def diagnose_picks(runs_by_name: Mapping[str, Sequence[Mapping]], pool: Pool) -> dict:
    """``{name: {"per_seed": {seed: seed_summary}, ...over seeds}}`` for every name whose runs
    all kept their groups; the informative share at first visits is also given minus random's,
    paired by seed, when random ran."""
    out: dict[str, dict] = {}
    for name, runs in runs_by_name.items():
        if not runs or not all(run.get("groups") for run in runs):
            continue
        per_seed = {
            int(r["seed"]): seed_summary(run_picks(r["groups"], pool), _trained(r)) for r in runs
        }
        out[name] = {"per_seed": per_seed, **_over_seeds(per_seed)}
    base = out.get("random")
    for name, entry in out.items():
        if base is not None and name != "random":
            for key, name_of_margin in MARGINS_OVER_RANDOM.items():
                entry[name_of_margin] = _paired(entry["per_seed"], base["per_seed"], key)
    return out


def _trained(run: Mapping) -> int | None:
    """The groups a run trained, from its records' ``trained_groups`` (None without them)."""
    steps = [r["trained_groups"] for r in run.get("records", ())[1:] if "trained_groups" in r]
    return int(sum(steps)) if steps else None


def _over_seeds(per_seed: Mapping[int, dict]) -> dict:
    """mean ± CI over seeds of each scalar, and of each call count's share."""
    rows = list(per_seed.values())
    summary = {}
    for key in (
        "zero_share",
        "wasted_share",
        "zero_share_first",
        "zero_share_repeat",
        "informative_share_first",
        "auc_first",
        "auc_repeat",
        "revival",
        "groups_per_trained",
        "abstracts_per_batch",
        "top_abstracts_share",
    ):
        summary[key] = _mean_ci_of([r[key] for r in rows])
    calls = {"history_call": [r["history_call"] for r in rows]}
    for visit in ("first", "repeat"):
        calls[f"spread_call_{visit}"] = [r["spread_call"].get(visit) for r in rows]
    for name, per_seed in calls.items():
        made = [c for c in per_seed if c is not None]
        summary[name] = (
            {m: _mean_ci_of([c[m] for c in made]) for m in ("precision", "recall")}
            if made
            else None
        )
    for key in ("calls_share", "zero_share_by_calls"):
        counts = sorted({c for r in rows for c in r[key]}, key=int)
        summary[key] = {}
        for c in counts:
            missing = 0.0 if key == "calls_share" else math.nan
            summary[key][c] = _mean_ci_of([r[key].get(c, missing) for r in rows])
    summary["waste_over_training"] = [
        {
            part: mean_ci([w[part] for w in column if w is not None])
            for part in ("zero", "all0", "all1")
        }
        if any(w is not None for w in column)
        else None
        for column in zip(*(r["waste_over_training"] for r in rows), strict=True)
    ]
    summary["first_visits"] = int(sum(r["first_visits"] for r in rows))
    summary["repeat_visits"] = int(sum(r["repeat_visits"] for r in rows))
    return summary


def _mean_ci_of(values: Sequence[float | None]) -> dict | None:
    """mean_ci of the values that are neither None nor NaN; None when none is."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return mean_ci(kept) if kept else None


def _paired(a: Mapping[int, dict], b: Mapping[int, dict], key: str) -> dict | None:
    pairs_a = {s: r[key] for s, r in a.items() if not math.isnan(r[key])}
    pairs_b = {s: r[key] for s, r in b.items() if not math.isnan(r[key])}
    if not set(pairs_a) & set(pairs_b):
        return None
    return paired_difference(pairs_a, pairs_b)


def render_picks(diagnosis: Mapping[str, dict]) -> str:
    """Two tables: what the batches held, and the first visits."""
    if not diagnosis:
        return ""
    counts = sorted({c for e in diagnosis.values() for c in e["calls_share"]}, key=int)
    head = [f"{c}-call share" for c in counts] + [f"zero-var {c}-call" for c in counts]
    head += ["abstracts / batch", f"top-{TOP_ABSTRACTS} abstracts' share"]
    head += ["wasted share", "wasted - random's"]
    held = [
        (
            name,
            [format_ci(e["calls_share"].get(c), 3) for c in counts]
            + [format_ci(e["zero_share_by_calls"].get(c), 3) for c in counts]
            + [format_ci(e["abstracts_per_batch"], 2), format_ci(e["top_abstracts_share"], 3)]
            + [
                format_ci(e["wasted_share"], 3),
                format_ci(e.get("wasted_minus_random"), 3, sign=True, noise=True),
            ],
        )
        for name, e in diagnosis.items()
    ]
    first = [
        (
            name,
            [
                f"{e['first_visits']} (repeats {e['repeat_visits']})",
                format_ci(e["zero_share_first"], 3),
                format_ci(e["zero_share_repeat"], 3),
                format_ci(e.get("informative_first_minus_random"), 3, sign=True, noise=True),
                format_ci(e["auc_first"], 3),
            ],
        )
        for name, e in diagnosis.items()
    ]
    lines = [
        "The picks, from the runs' own groups (a group is informative when its K rewards are "
        "not all equal; mean ± 95 % CI over seeds). Wasted: the share of the groups rolled "
        "out that gave GRPO no signal (zero-variance, or never trained: DAPO's dropped and "
        "trimmed groups), paired by seed against random's:",
        "",
        *markdown_table(["scheduler", *head], held),
        "",
        "First visits (the task never picked before in the run: the graph's prior decides). "
        "The AUC asks whether the score at the pick ranks informative groups above "
        "zero-variance ones (0.5: no better than chance); the informative share of first "
        "visits minus random's is paired by seed (random's share is the base rate).",
        "",
        *markdown_table(
            [
                "scheduler",
                "first visits",
                "zero-var share, first",
                "zero-var share, repeat",
                "informative first - random's",
                "AUC of the score at first visits",
            ],
            first,
        ),
        "",
        *_render_calls(diagnosis),
        "",
        *_render_waste_over_training(diagnosis),
    ]
    return "\n".join(lines)


def _render_waste_over_training(diagnosis: Mapping[str, dict]) -> list[str]:
    """Per scheduler and fifth of its rollouts: the zero-variance share (all-0 / all-1)."""

    def cell(window: Mapping | None) -> str:
        if window is None:
            return "-"
        return (
            f"{format_ci(window['zero'], 2)} ({window['all0']['mean']:.2f} / "
            f"{window['all1']['mean']:.2f})"
        )

    rows = [(name, [cell(w) for w in e["waste_over_training"]]) for name, e in diagnosis.items()]
    head = ["scheduler", *(f"rollouts {k + 1}/{WINDOWS}" for k in range(WINDOWS))]
    return [
        f"Waste over training: the zero-variance share of each {WINDOWS}th of a run's rollouts "
        "(mean ± 95 % CI over seeds), and in brackets the share all 0 / all 1 (the rest is "
        "equal partial credit). Does the waste grow as tasks are solved?",
        "",
        *markdown_table(head, rows),
    ]


def _render_calls(diagnosis: Mapping[str, dict]) -> list[str]:
    """The predictor as a call before rollout: the scores' AUC at repeats, the history's and
    the spread target's calls "zero-variance", and the revival rate."""

    def call(stat: Mapping | None) -> list[str]:
        if stat is None:
            return ["-", "-"]
        return [format_ci(stat["precision"], 3, "no call"), format_ci(stat["recall"], 3)]

    rows = [
        (
            name,
            [
                format_ci(e.get("groups_per_trained"), 2),
                format_ci(e.get("auc_repeat"), 3),
                *call(e.get("history_call")),
                format_ci(e.get("revival"), 3),
                *call(e.get("spread_call_first")),
                *call(e.get("spread_call_repeat")),
            ],
        )
        for name, e in diagnosis.items()
    ]
    head = ["scheduler", "groups rolled / trained", "AUC of the score at repeats"]
    head += ["history call: precision", "recall", "revival rate"]
    head += ["spread call, first: precision", "recall", "spread call, repeat: precision"]
    head += ["recall"]
    return [
        "The predictor as a call before rollout (mean ± 95 % CI over seeds). The history "
        "call, GRESO's signal, says a repeat visit will be zero-variance when the task's "
        "previous group was; the revival rate is the share of those that were informative "
        "after all (GRESO reports about 20 %). The spread call says zero-variance when the "
        "spread target's predicted P(v > 0) at the pick is below 1/2. Precision: the share "
        "of the calls that were zero-variance; recall: the share of the zero-variance groups "
        "called.",
        "",
        *markdown_table(head, rows),
    ]
