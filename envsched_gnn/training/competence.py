"""A start that is sometimes right: SFT data mixing references with imperfect solutions
(:mod:`~envsched_gnn.envs.generator.mistakes`) at the rates of a competence profile
(:mod:`.competence_profile`), executed for real; rates saved as ``competence.json``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from envsched_gnn.envs.generator.mistakes import applicable_kinds, imperfect_solution
from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.training.agent_format import (
    AgentConfig,
    ChatFormat,
    RenderedEpisode,
)
from envsched_gnn.training.competence_profile import CompetenceProfile, draw_rates
from envsched_gnn.training.sft_data import ReferenceRun, render_run, run_references

COMPETENCE_FILE = "competence.json"


@dataclass(frozen=True)
class PlannedExample:
    """One SFT example of the mixture: the task, and the mistake it demonstrates (or none)."""

    task: Task
    kind: str | None
    """The mistake kind of its solution; None: the correct reference."""


def plan_mixture(
    pool: Pool, tasks: Sequence[Task], profile: CompetenceProfile, rates: dict[str, float]
) -> list[PlannedExample]:
    """Per task, the kind c of its decision (uniform among its applicable kinds in the
    profile) and, with probability r, the imperfect solution of that kind."""
    rng = random.Random(f"{profile.seed}:mixture")
    planned = []
    for task in tasks:
        kinds = [k for k in applicable_kinds(task, pool.envs[task.env_id]) if k in profile.kinds]
        if not kinds:
            planned.append(PlannedExample(task, None))
            continue
        kind = rng.choice(kinds)
        rate = rates[f"{task.env_id}/{kind}" if profile.by == "environment" else task.task_id]
        if rng.random() >= rate:
            planned.append(PlannedExample(task, None))
            continue
        calls = imperfect_solution(task, pool.envs[task.env_id], kind, rng)
        planned.append(PlannedExample(replace(task, reference_solution=calls), kind))
    return planned


@dataclass(frozen=True)
class MixtureRun:
    """An executed example of the mixture: the run, and the mistake kind it shows (None for
    the correct reference)."""

    run: ReferenceRun
    kind: str | None


def mixture_runs(
    runtime: Any, pool: Pool, tasks: Sequence[Task], profile: CompetenceProfile
) -> tuple[list[MixtureRun], dict[str, Any]]:
    """Execute the mixture in ``runtime``: the runs (variants scoring 1 replaced by references)."""
    rates = draw_rates(profile, tasks)
    planned = plan_mixture(pool, tasks, profile, rates)
    imperfect = [p for p in planned if p.kind is not None]
    variant_runs = iter(run_references(runtime, [p.task for p in imperfect], keep_empty=True))
    references = run_references(runtime, [t for t in tasks if t.reference_solution])
    correct = {run.task.task_id: run for run in references if run.reward >= 1.0}
    counts = {kind: {"planned": 0, "kept": 0, "reward_sum": 0.0} for kind in profile.kinds}
    runs: list[MixtureRun] = []
    for plan in planned:
        if plan.kind is not None:
            run = next(variant_runs)
            counts[plan.kind]["planned"] += 1
            if run.reward < 1.0:
                counts[plan.kind]["kept"] += 1
                counts[plan.kind]["reward_sum"] += run.reward
                runs.append(MixtureRun(run, plan.kind))
                continue
        if plan.task.task_id in correct:
            runs.append(MixtureRun(correct[plan.task.task_id], None))
    kept = sum(c["kept"] for c in counts.values())
    summary = {
        "profile": asdict(profile),
        "examples": len(runs),
        "imperfect": kept,
        "imperfect_share": kept / max(len(runs), 1),
        "references_below_1": sum(run.reward < 1.0 for run in references),
        "kinds": {
            kind: {
                "planned": c["planned"],
                "kept": c["kept"],
                "mean_reward": c["reward_sum"] / c["kept"] if c["kept"] else None,
            }
            for kind, c in counts.items()
        },
        "rates": rates,
    }
    return runs, summary


def mixture_examples(
    runtime: Any,
    fmt: ChatFormat,
    pool: Pool,
    tasks: Sequence[Task],
    profile: CompetenceProfile,
    agent: AgentConfig,
) -> tuple[list[tuple[str, RenderedEpisode]], dict[str, Any]]:
    """The mixture's runs (:func:`mixture_runs`) rendered as SFT examples, each with its
    environment id, and the mixture's summary."""
    runs, summary = mixture_runs(runtime, pool, tasks, profile)
    examples = [render_run(fmt, pool, m.run, agent) for m in runs]
    return examples, summary
