"""The simulator's STRUCTURE world: difficulty follows each task's hidden structure, with a knob.

Reward variance here is predictable from tasks that share hidden structure, through a
mechanism the graph never reads. The hidden structure of a generated task is its list of
generator operations (:mod:`envsched_gnn.envs.generator.structure`); each operation l of
task i is a slot of the simulator with the hidden factors

    F(i,l) = { op:<kind>, variant:<kind>/<gate outcome or action> (gated operations),
               look_alike (a similar name was planted), list:<siblings> (list selection) },

the task's environment e(i), and the task's number of distractor checks D_i (how much
there is to get wrong: it shapes difficulty but is no skill one learns). Tasks outside the
generator's grammar fall back to their abstract's categories and gates (then the cross
graph does see their structure; the world reports how many tasks that concerns).

World (fixed by the pool and ``world_seed``; the same for every run seed and every kappa):

- hidden effects h(f) ~ N(0, 1) per factor f and h(e) ~ N(0, 1) per environment, each
  drawn from a generator seeded by (world_seed, the factor's name);
- structural score R(i,l) = h(e(i)) + h(distractors:D_i) + sum_{f in F(i,l)} h(f), and its
  standardised normal score S(i,l) = z(Phi^-1((rank(R(i,l)) - 1/2) / n)) over the pool's n
  slots (average ranks for ties; z: mean 0, sd 1), so S is standard normal whatever the
  factors;
- noise eps(i,l) = sqrt(c) u_i + sqrt(1 - c) v(i,l), u_i, v(i,l) ~ N(0, 1) i.i.d., with c the
  mean correlation of S between two slots of one task, so eps has S's within-task
  correlation;
- difficulty

      delta(i,l) = mu + sigma * ( sqrt(kappa) * S(i,l) + sqrt(1 - kappa) * eps(i,l) ),

  normal with mean mu and sd sigma for every kappa: only its dependence on structure
  changes (kappa = 0: none; kappa = 1: a function of structure alone);
- skills start at 0: s_env(e), s_op(f) per factor, s_task(i); the simulator's update moves
  them, so what a rollout teaches transfers to every task sharing e or a factor;
- checks: each belongs to one operation (as the generator writes them); one that passes on the
  empty trajectory (sandboxed runtime) counts in w_rest(i,l), the others in w_need(i,l), each
  the share of the task's checks, so failing the first operation scores what doing nothing does.

kappa sets how much of the *difficulty* follows structure, not of the reward *variance*: a
task's operation count and check layout shape Var(r_i) whatever delta is, and the graph sees
them, so EnvSched may beat the controls at kappa 0 legitimately (measured in
docs/results/controls.md). The world where no graph can know anything is the null world
(``shuffle_tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from hashlib import blake2b

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.eval.simulator.world import SimulatorWorld


def operation_factors(
    pool: Pool,
) -> tuple[list[list[list[str]]], list[list[str]], list[list[int]], int]:
    """Per task: the hidden factors of each operation slot, its task-level difficulty factors,
    and the slot of each check.

    Returns ``(factors, task_factors, check_slots, parsed)`` with ``parsed`` the number of
    tasks whose structure came from the generator's grammar (the others from their abstracts).
    """
    from envsched_gnn.envs.generator.structure import (
        StructureError,
        check_operations,
        task_structure,
    )

    factors: list[list[list[str]]] = []
    task_factors: list[list[str]] = []
    check_slots: list[list[int]] = []
    parsed = 0
    for task in pool.tasks:
        env = pool.envs.get(task.env_id)
        try:
            if env is None:
                raise StructureError(f"task {task.task_id!r}: no environment")
            operations = task_structure(task, env)
        except StructureError:
            slots, owners = _abstract_factors(pool, task)
            task_factors.append([])
        else:
            parsed += 1
            slots = [_factors(op) for op in operations]
            owners = check_operations(operations)
            task_factors.append([f"distractors:{sum(op.distractors for op in operations)}"])
        factors.append(slots)
        check_slots.append(owners)
    return factors, task_factors, check_slots, parsed


def _factors(op) -> list[str]:
    names = [f"op:{op.kind}"]
    if op.variant:
        names.append(f"variant:{op.kind}/{op.variant}")
    if op.look_alike:
        names.append("look_alike")
    if op.kind == "select_from_list":
        names.append(f"list:{op.list_siblings}")
    return names


def _abstract_factors(pool: Pool, task: Task) -> tuple[list[list[str]], list[int]]:
    """Fallback: one slot per abstract step (category, gates); check c on slot c mod L."""
    import re

    from envsched_gnn.envs.abstract import abstract_of

    abstract = abstract_of(task, pool.envs.get(task.env_id))
    slots = []
    for clause in (part.strip() for part in abstract.split(";") if part.strip()):
        category = re.sub(r"^step \d+: ", "", clause).split(" using ")[0].split(" (")[0]
        gates = re.search(r"\((?:gate|gates): ([^)]*)\)", clause)
        slots.append([f"op:{category}"] + ([f"gates:{gates.group(1)}"] if gates else []))
    slots = slots or [["op:none"]]
    return slots, [c % len(slots) for c in range(len(task.checklist_with_func))]


def named_normal(seed: int, name: str) -> float:
    """A standard normal draw that depends on (seed, name) only."""
    key = int.from_bytes(blake2b(name.encode(), digest_size=8).digest(), "little")
    return float(np.random.default_rng([seed, key]).standard_normal())


def normal_scores(values: np.ndarray) -> np.ndarray:
    """Standardised rank-based normal scores: z(Phi^-1((rank - 1/2) / n)), average ranks."""
    scores = ndtri((rankdata(values) - 0.5) / len(values))
    sd = scores.std()
    return (scores - scores.mean()) / sd if sd > 0 else np.zeros_like(scores)


def within_task_correlation(score: np.ndarray, task_of_slot: np.ndarray) -> float:
    """Mean product of the (standardised) scores of two distinct slots of one task, in [0, 1]."""
    sums = np.bincount(task_of_slot, score)
    squares = np.bincount(task_of_slot, score**2)
    counts = np.bincount(task_of_slot)
    pairs = float(np.sum(counts * (counts - 1)))
    if pairs == 0:
        return 0.0
    return float(np.clip(np.sum(sums**2 - squares) / pairs, 0.0, 1.0))


def build_structure_world(
    pool: Pool, config: SimulatorConfig, rest_checks: Mapping[str, Sequence[bool]] | None = None
) -> SimulatorWorld:
    """The structure world (module docstring) for ``pool``.

    ``rest_checks`` maps each task id to which of its checks pass on the empty trajectory;
    by default they are run in the sandboxed runtime.
    """
    if not pool.tasks:
        raise ValueError("simulator: the pool has no tasks")
    empty = [t.task_id for t in pool.tasks if not t.checklist_with_func]
    if empty:
        raise ValueError(f"simulator: task {empty[0]!r} has an empty checklist_with_func")
    if rest_checks is None:
        from envsched_gnn.envs.check import empty_trajectory_checks

        rest_checks = empty_trajectory_checks(pool)
    factors, task_factors, check_slots, parsed = operation_factors(pool)
    n, l_max = len(pool.tasks), max(len(slots) for slots in factors)
    f_max = max(len(f) for slots in factors for f in slots)
    env_names = list(dict.fromkeys(task.env_id for task in pool.tasks))
    env_of = {e: k for k, e in enumerate(env_names)}
    op_names = sorted({f for slots in factors for names in slots for f in names})
    op_of = {f: k for k, f in enumerate(op_names)}

    slot_op = np.zeros((n, l_max, f_max), np.int64)
    slot_op_mask = np.zeros((n, l_max, f_max), bool)
    slot_mask = np.zeros((n, l_max), bool)
    need = np.zeros((n, l_max))
    rest = np.zeros((n, l_max))
    for i, (task, slots, owners) in enumerate(zip(pool.tasks, factors, check_slots, strict=True)):
        passes = list(rest_checks[task.task_id])
        if len(passes) != len(owners):
            raise ValueError(
                f"simulator: task {task.task_id!r} has {len(owners)} checks, its empty-trajectory "
                f"result {len(passes)}"
            )
        slot_mask[i, : len(slots)] = True
        for slot, names in enumerate(slots):
            slot_op[i, slot, : len(names)] = [op_of[f] for f in names]
            slot_op_mask[i, slot, : len(names)] = True
        for owner, passed in zip(owners, passes, strict=True):
            (rest if passed else need)[i, owner] += 1.0 / len(owners)

    effect = np.array([named_normal(config.world_seed, f) for f in op_names])
    env_effect = np.array([named_normal(config.world_seed, f"env:{e}") for e in env_names])
    env = np.array([env_of[task.env_id] for task in pool.tasks], np.int64)
    task_effect = np.array(
        [sum(named_normal(config.world_seed, f) for f in names) for names in task_factors]
    )
    raw = (
        env_effect[env][:, None]
        + task_effect[:, None]
        + np.where(slot_op_mask, effect[slot_op], 0.0).sum(-1)
    )
    task_of_slot = np.nonzero(slot_mask)[0]
    score = np.zeros((n, l_max))
    score[slot_mask] = normal_scores(raw[slot_mask])
    c = within_task_correlation(score[slot_mask], task_of_slot)
    noise_rng = np.random.default_rng([config.world_seed, 0x5EED])
    u = noise_rng.standard_normal(n)
    v = noise_rng.standard_normal((n, l_max))
    eps = np.sqrt(c) * u[:, None] + np.sqrt(1.0 - c) * v
    kappa = config.kappa
    delta = config.difficulty_mean + config.sigma_difficulty * (
        np.sqrt(kappa) * score + np.sqrt(1.0 - kappa) * eps
    )
    return SimulatorWorld(
        task_ids=[task.task_id for task in pool.tasks],
        env_names=env_names,
        op_names=op_names,
        env=env,
        slot_op=slot_op,
        slot_op_mask=slot_op_mask,
        slot_mask=slot_mask,
        need_weight=need,
        rest_weight=rest,
        delta=np.where(slot_mask, delta, 0.0),
        test=np.array([task.split == "test" for task in pool.tasks], bool),
        s_env0=np.zeros(len(env_names)),
        s_op0=np.zeros(len(op_names)),
        kind="structure",
        structure_score=score,
        info={
            "kappa": kappa,
            "tasks_with_hidden_structure": parsed,
            "tasks_structured_by_abstract": n - parsed,
            "within_task_correlation": c,
            "hidden_factors": len(op_names),
        },
    )
