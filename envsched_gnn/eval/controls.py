"""Control graphs of spec section 7: the relabelled graph (primary), label-permuted graphs and
the shuffled pool (secondary).

A control keeps what the selector uses besides the graph's information (every task's real
environment, so quotas and coverage act on the real pool) and cuts what a neighbour's
history says about a task.

The **relabelled graph** (``relabelled``, the primary control) is the real graph with its
nodes relabelled: every edge j -> i becomes sigma(j) -> sigma(i), with sim and relation
kept, sigma one seeded permutation of the tasks inside each environment. The graph is
the same graph up to which task sits at which node: every node keeps its in- and
out-degree, its reciprocal edges, its clustering, its duplicate-text cliques and its
environment, so the selector's similarity penalty excludes as many tasks as on the real
graph. What it cuts is the mapping from node to task below the environment: a task's
within neighbours become tasks of its environment at random and its cross neighbours
tasks at random of the environments its node's neighbours came from (the environment-to-
environment pattern of cross edges stays, so EnvSched minus this control is what the graph
knows about a task beyond its environment and the environments it resembles).

A **label-permuted graph** (secondary) keeps every edge's target i, similarity and
relation, and replaces its source j by pi(j) for a seeded permutation pi:

- ``permuted_within``: within sources only, pi_e a permutation of the tasks of j's
  environment e (does TF-IDF similarity add anything beyond "same environment"?);
- ``permuted_cross``: cross sources only, pi a permutation of all tasks (does abstract
  similarity add anything beyond a random task of another environment?);
- ``permuted``: both of the above at once (the same pi_e and pi for the same seed);
- ``permuted_all``: both relations through one permutation of all tasks (does the graph add
  anything beyond EnvSched's quotas and coverage?).

Permuting sources changes the graph's structure as well as its information: out-degrees
move to other nodes, reciprocal pairs (i in N(j) and j in N(i)) and cliques dissolve, so
each task of a batch penalises more distinct tasks. Measured on the generated 51 x 50 pools
(seeds 0 and 2, train split): the share of reciprocal edges falls from 0.62 to 0.006
(cross) and from 0.58 to 0.16 (within), the mean local clustering from 0.57 to 0.01 (cross),
and the tasks joined to a task in either direction (what the penalty reaches) rise from 25.1
to 35.0. In the null world, where no graph can know anything, that alone made EnvSched beat
the label-permuted control, by +0.0006 to +0.0008 at step 200 (32 seeds, four pool / world
combinations, 6.5-8.6 SE), most of it through the penalty (docs/results/controls.md); the
relabelled control ties there. So the label-permuted graphs are secondary controls.

The graph has two readers in EnvSched, the predictor (neighbour evidence) and the
selector's similarity penalty (batch diversity). ``relabelled_predictor`` and
``permuted_predictor`` give the predictor the control graph and leave the penalty on the
real one, so that EnvSched minus it is what the neighbour evidence is worth, and it minus
the control what the penalty's similarities are worth.

Self-loops are avoided without breaking distinctness: when pi(j) = i the source becomes
pi(i) (pi(i) != i then, and no other source of i maps to it). A cross edge must leave its
target's environment; the few whose pi(j) lands in i's own environment (about 1 / E of
them) take instead a seeded random task of another environment that is not yet a source of
i. ``permuted_all`` has no such rule: both relations draw from all tasks. A relabelling
needs no such rule (sigma is a bijection that keeps environments).

Seeds: a control is one random draw, and a draw has its own luck (which task sits at a hub
or in a clique) that no number of run seeds averages out; ``eval ablate`` therefore draws
each run seed's control graph from (control seed, run seed) (:data:`DRAWN_CONTROLS`).

The shuffled pool (the paper's wording, a secondary control) reassigns environment
membership and abstracts at random and rebuilds the graph; it also moves the quotas onto
fake environments and leaves each task's text and checks with it.
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
