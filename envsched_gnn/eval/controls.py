"""Control graphs of spec section 7: label-permuted graphs (primary) and the shuffled pool.

A label-permuted graph keeps every edge's target i, similarity and relation, and every
task's real environment (so the selector's quotas and coverage act on the real pool), and
replaces the edge's source j by pi(j) for a seeded permutation pi:

- ``permuted_within``: within sources only, pi_e a permutation of the tasks of j's
  environment e (does TF-IDF similarity add anything beyond "same environment"?);
- ``permuted_cross``: cross sources only, pi a permutation of all tasks (does abstract
  similarity add anything beyond a random task of another environment?);
- ``permuted``: both of the above at once (the same pi_e and pi for the same seed); the
  primary control;
- ``permuted_all``: both relations through one permutation of all tasks (does the graph add
  anything beyond EnvSched's quotas and coverage?).

The graph has two readers in EnvSched, the predictor (neighbour evidence) and the
selector's similarity penalty (batch diversity). ``permuted_predictor`` gives the predictor
the ``permuted`` graph and leaves the penalty on the real one, so that EnvSched minus it is
what the neighbour evidence is worth, and it minus ``permuted`` what the penalty's
similarities are worth.

Self-loops are avoided without breaking distinctness: when pi(j) = i the source becomes
pi(i) (pi(i) != i then, and no other source of i maps to it). A cross edge must leave its
target's environment; the few whose pi(j) lands in i's own environment (about 1 / E of
them) take instead a seeded random task of another environment that is not yet a source of
i. ``permuted_all`` has no such rule: both relations draw from all tasks.

The shuffled pool (the paper's wording, a secondary control) reassigns environment
membership and abstracts at random and rebuilds the graph; it also moves the quotas onto
fake environments and leaves each task's text and checks with it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph

PERMUTED_CONTROLS = ("permuted", "permuted_within", "permuted_cross", "permuted_all")
PREDICTOR_CONTROL = "permuted_predictor"
SHUFFLED_CONTROL = "shuffled"
CONTROLS = (*PERMUTED_CONTROLS, PREDICTOR_CONTROL, SHUFFLED_CONTROL)
_STREAM = {"within": 1, "cross": 2, "all": 3}


def _permutation(seed: int, stream: str, n: int) -> np.ndarray:
    return np.random.default_rng([seed, _STREAM[stream]]).permutation(n)


def within_environment_permutation(env: np.ndarray, seed: int) -> np.ndarray:
    """pi with pi(j) in j's environment: one seeded permutation per environment, ``(N,)``."""
    rng = np.random.default_rng([seed, _STREAM["within"]])
    pi = np.arange(len(env))
    for code in np.unique(env):
        members = np.flatnonzero(env == code)
        pi[members] = members[rng.permutation(len(members))]
    return pi


def remap_sources(src: np.ndarray, dst: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """pi(j) for every edge j -> i, or pi(i) where pi(j) = i (no self-loop, no duplicate)."""
    new = pi[src]
    loops = new == dst
    new[loops] = pi[dst[loops]]
    return new


def remap_cross_sources(
    src: np.ndarray, dst: np.ndarray, pi: np.ndarray, env: np.ndarray, seed: int
) -> np.ndarray:
    """pi(j), except where it falls in i's own environment: a seeded random other-environment
    task that is not yet a source of i."""
    new = pi[src]
    bad = np.flatnonzero(env[new] == env[dst])
    if bad.size == 0:
        return new
    sizes = np.bincount(env)
    if np.count_nonzero(sizes) < 2:
        raise ValueError("a cross-permuted graph needs at least two environments")
    rng = np.random.default_rng([seed, _STREAM["cross"], 1])
    order = np.argsort(dst, kind="stable")
    sorted_dst = dst[order]
    taken_of: dict[int, set[int]] = {}
    for edge in bad.tolist():
        target = int(dst[edge])
        if target not in taken_of:
            lo, hi = np.searchsorted(sorted_dst, [target, target + 1])
            mine = new[order[lo:hi]]
            taken_of[target] = set(mine[env[mine] != env[target]].tolist())
        taken = taken_of[target]
        if len(taken) >= len(env) - sizes[env[target]]:
            raise ValueError(f"task {target} has more cross sources than other-environment tasks")
        while True:
            candidate = int(rng.integers(len(env)))
            if env[candidate] != env[target] and candidate not in taken:
                break
        new[edge] = candidate
        taken.add(candidate)
    return new


def permuted_graph(graph: TaskGraph, control: str, seed: int = 0) -> TaskGraph:
    """The label-permuted control ``control`` (one of :data:`PERMUTED_CONTROLS`) of ``graph``."""
    if control not in PERMUTED_CONTROLS:
        raise ValueError(f"control {control!r}, expected one of {PERMUTED_CONTROLS}")
    env = graph.env_index()[1]
    n = graph.num_tasks
    edges = dict(graph.edges)
    within, cross = graph.edges["within"], graph.edges["cross"]
    if control == "permuted_all":
        pi = _permutation(seed, "all", n)
        for relation, e in (("within", within), ("cross", cross)):
            edges[relation] = RelationEdges(remap_sources(e.src, e.dst, pi), e.dst, e.sim)
    if control in ("permuted", "permuted_within"):
        pi_e = within_environment_permutation(env, seed)
        edges["within"] = RelationEdges(
            remap_sources(within.src, within.dst, pi_e), within.dst, within.sim
        )
    if control in ("permuted", "permuted_cross"):
        pi = _permutation(seed, "cross", n)
        edges["cross"] = RelationEdges(
            remap_cross_sources(cross.src, cross.dst, pi, env, seed), cross.dst, cross.sim
        )
    return TaskGraph(list(graph.task_ids), list(graph.env_ids), edges)


def shuffled_pool(pool: Pool, seed: int) -> Pool:
    """Reassign environment membership (sizes kept) and abstract descriptions at random."""
    from envsched_gnn.envs.abstract import abstract_of

    rng = np.random.default_rng(seed)
    class_of = {t.env_id: t.env_class_name for t in pool.tasks}
    envs = [t.env_id for t in pool.tasks]
    abstracts = [abstract_of(t, pool.envs.get(t.env_id)) for t in pool.tasks]
    env_order = rng.permutation(len(envs))
    abstract_order = rng.permutation(len(abstracts))
    tasks = [
        replace(
            task,
            env_id=envs[env_order[i]],
            env_class_name=class_of[envs[env_order[i]]],
            abstract=abstracts[abstract_order[i]],
        )
        for i, task in enumerate(pool.tasks)
    ]
    return Pool(pool.envs, tasks)
