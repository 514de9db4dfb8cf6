"""Control graphs of spec section 7: the relabelled graph (primary), label-permuted graphs and
the shuffled pool (secondary).

Every control keeps each task's real environment and cuts what a neighbour's history says
about a task (docs/design.md §7). ``relabelled`` maps every edge j -> i to sigma(j) -> sigma(i),
sigma a seeded permutation inside each environment, so the graph's shape is kept. The
label-permuted graphs keep each edge's target, sim and relation and replace its source j by
pi(j): ``permuted_within`` (pi inside j's environment), ``permuted_cross`` (pi over all tasks),
``permuted`` (both), ``permuted_all`` (both relations through one pi); they also change the
shape, so they are secondary (measurements in docs/results/controls.md). ``*_predictor``
gives the control graph to the predictor only and keeps the real one for the penalty.

Where pi(j) = i the source becomes pi(i); a cross source landing in i's own environment is
redrawn from other environments' tasks not yet sources of i. ``eval ablate`` draws each run
seed's control graph from (control seed, run seed) (:data:`DRAWN_CONTROLS`). The shuffled pool
reassigns environment membership and abstracts at random and rebuilds the graph.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph

RELABELLED_CONTROL = "relabelled"
PERMUTED_CONTROLS = ("permuted", "permuted_within", "permuted_cross", "permuted_all")
DRAWN_CONTROLS = (RELABELLED_CONTROL, *PERMUTED_CONTROLS)
"""Controls whose graph is drawn per run seed from the default graph (:func:`control_graph`)."""
PREDICTOR_CONTROLS = {"relabelled_predictor": RELABELLED_CONTROL, "permuted_predictor": "permuted"}
"""Predictor-only controls: the predictor on the named control graph, the penalty on the real."""
SHUFFLED_CONTROL = "shuffled"
CONTROLS = (
    RELABELLED_CONTROL,
    "relabelled_predictor",
    *PERMUTED_CONTROLS,
    "permuted_predictor",
    SHUFFLED_CONTROL,
)
_STREAM = {"within": 1, "cross": 2, "all": 3, "relabel": 4}

Seed = int | tuple[int, ...]
"""A control's seed: an int, or a tuple such as (control seed, run seed)."""


def _rng(seed: Seed, stream: str, *salt: int) -> np.random.Generator:
    entropy = [seed] if isinstance(seed, int) else list(seed)
    return np.random.default_rng([*entropy, _STREAM[stream], *salt])


def _permutation(seed: Seed, stream: str, n: int) -> np.ndarray:
    return _rng(seed, stream).permutation(n)


def within_environment_permutation(
    env: np.ndarray, seed: Seed, stream: str = "within"
) -> np.ndarray:
    """pi with pi(j) in j's environment: one seeded permutation per environment, ``(N,)``."""
    rng = _rng(seed, stream)
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
    src: np.ndarray, dst: np.ndarray, pi: np.ndarray, env: np.ndarray, seed: Seed
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
    rng = _rng(seed, "cross", 1)
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


def control_graph(graph: TaskGraph, control: str, seed: Seed = 0) -> TaskGraph:
    """The control ``control`` (one of :data:`DRAWN_CONTROLS`) of ``graph``, drawn from ``seed``."""
    if control == RELABELLED_CONTROL:
        return relabelled_graph(graph, seed)
    return permuted_graph(graph, control, seed)


def relabelled_graph(graph: TaskGraph, seed: Seed = 0) -> TaskGraph:
    """The relabelled control: every edge j -> i becomes sigma(j) -> sigma(i) (sim, relation and
    the edge's place in the list kept), sigma one seeded permutation inside each environment.

    Node sigma(j) of the result has node j's in- and out-degree, reciprocal edges and
    environment; keeping the edge order keeps each target's float64 sums in one order.
    """
    sigma = within_environment_permutation(graph.env_index()[1], seed, stream="relabel")
    edges = {
        relation: RelationEdges(sigma[e.src], sigma[e.dst], e.sim.copy())
        for relation, e in graph.edges.items()
    }
    return TaskGraph(list(graph.task_ids), list(graph.env_ids), edges)


def permuted_graph(graph: TaskGraph, control: str, seed: Seed = 0) -> TaskGraph:
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
