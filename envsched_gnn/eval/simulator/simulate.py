"""The learner SIMULATOR: a cheap, seeded stand-in for a GRPO policy, grounded in the pool.

Not a language model: a stand-in so the harness can compare schedulers over many seeds;
the harness labels every number it produces "simulated". Two worlds run on the same engine
(``SimulatorConfig.world``), each with its equations in its module: ``structure`` (default,
:mod:`~envsched_gnn.eval.simulator.structure_world`, difficulty from each task's hidden
structure) and ``independent`` (:mod:`~envsched_gnn.eval.simulator.independent_world`,
difficulty independent of anything a graph sees). ``shuffle_tasks`` makes either a null world:
task i of run seed s is simulated as task pi_s(i), pi_s drawn from (world seed, s), per run
seed so no arm keeps one draw's luck (docs/design.md §7, docs/results/controls.md).

In both, a slot l of task i carries task-level skills (its environment) and slot-level
skills (factors F(i,l)), and its logit is z(i,l) = s_env(e(i)) + sum_{f in F(i,l)} s_op(f)
+ s_task(i) - delta(i,l). Rollouts, the update and the score below hold for both, with
w(i,l) split into w_need (checks passing only when operation l is completed) and w_rest
(checks passing unless operation l goes wrong); the independent world has w_rest = 0.
Both fill a :class:`~envsched_gnn.eval.simulator.world.SimulatorWorld`.

Rollouts (seeded by the run seed): rollout k of task i draws a shared "luck"
xi_k ~ N(0, sigma_roll^2); it attempts the operations in order, each succeeding with
p(i,k,l) = sigmoid(z(i,l) + xi_k), Y(i,k,l) ~ Bernoulli(p(i,k,l)), and stops at the first
failure (later operations depend on earlier ones, as gates do). Operation l is completed
when Y(i,k,1..l) are all 1; the failed operation goes wrong, W(i,k,l) = 1, with
probability ``wrong_action`` (a(i,k,l) = 1, Y(i,k,l) = 0). The reward is

    r(i,k) = sum_l w_need(i,l) * prod_{l' <= l} Y(i,k,l') + sum_l w_rest(i,l) * (1 - W(i,k,l))

Update (GRPO-like, once per training step over the G groups trained on): advantages
A(i,k) = r(i,k) - mean_k r(i,k) (group-relative, Dr. GRPO scaling: no std division);
the score-function signal of each operation, over the rollouts that attempted it
(a(i,k,l) = prod_{l' < l} Y(i,k,l')), is

    g(i,l) = (1/K) sum_k A(i,k) * a(i,k,l) * (Y(i,k,l) - p(i,k,l))

(the REINFORCE estimate of d E[r_i] / d z(i,l) with the group-mean baseline), and

    s_env(e)  += alpha_env  / B * sum_{i in batch, e(i)=e} sum_l g(i,l)
    s_op(f)   += alpha_op   / B * sum_{i in batch} sum_{l: f in F(i,l)} g(i,l)
    s_task(i) += alpha_task / B * sum_l g(i,l)

with B the nominal batch size. A group with zero reward variance has A = 0 and moves
nothing. Skills that received no signal this step decay towards their initial value:
s <- s0 + (1 - nu) * (s - s0), nu = ``decay``.

Downstream score: the expected reward on the held-out split (``split == "test"``),
S = mean_i E[r_i], with E[r_i] = sum_l w_need(i,l) E_xi[prod_{l' <= l} p(l')]
+ sum_l w_rest(i,l) (1 - wrong_action * E_xi[prod_{l' < l} p(l') (1 - p(l))]), computed
exactly up to a Gauss-Hermite quadrature of ``quadrature_nodes`` nodes over xi. The true
expected group variance of a task (:meth:`LearnerSimulator.expected_group_variance`),
((K - 1) / K) Var(r_i), comes from the same quadrature over the first failed operation.
Parameters: :class:`~envsched_gnn.eval.simulator.config.SimulatorConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.eval.simulator.independent_world import build_independent_world
from envsched_gnn.eval.simulator.structure_world import build_structure_world
from envsched_gnn.eval.simulator.world import SimulatorWorld


def build_world(
    pool: Pool,
    config: SimulatorConfig,
    categories_of: Callable[[Task], Sequence[str]] | None = None,
) -> SimulatorWorld:
    """Draw the world ``config.world`` for ``pool`` from ``config.world_seed``.

    ``categories_of`` (independent world) maps a task to its operation categories
    (default: from its abstract). The null world's permutation is not applied here: each
    :class:`LearnerSimulator` applies its run seed's (``config.shuffle_tasks``).
    """
    if config.world == "structure":
        return build_structure_world(pool, config)
    return build_independent_world(pool, config, categories_of)


@dataclass
class Rollouts:
    """One step's simulated rollouts: G groups of K rollouts over padded operation slots."""

    tasks: np.ndarray
    """(G,) int64 task index."""
    success: np.ndarray
    """(G, K, Lmax) bool, Y(i,k,l) (False on padding)."""
    attempted: np.ndarray
    """(G, K, Lmax) bool, a(i,k,l): every earlier operation succeeded (False on padding)."""
    prob: np.ndarray
    """(G, K, Lmax) float64, p(i,k,l)."""
    rewards: np.ndarray
    """(G, K) float64, r(i,k)."""
    wrong: np.ndarray | None = None
    """(G, K, Lmax) bool, W(i,k,l): the failed operation went wrong (None: never)."""

    def subset(self, rows: np.ndarray) -> Rollouts:
        return Rollouts(
            self.tasks[rows],
            self.success[rows],
            self.attempted[rows],
            self.prob[rows],
            self.rewards[rows],
            None if self.wrong is None else self.wrong[rows],
        )

    @classmethod
    def concat(cls, parts: Sequence[Rollouts]) -> Rollouts:
        """The groups of ``parts`` in order (groups of several steps' rollouts trained in one
        update); the slot axis of every part is the world's Lmax."""
        wrong = [p.wrong for p in parts]
        return cls(
            np.concatenate([p.tasks for p in parts]),
            np.concatenate([p.success for p in parts]),
            np.concatenate([p.attempted for p in parts]),
            np.concatenate([p.prob for p in parts]),
            np.concatenate([p.rewards for p in parts]),
            None if any(w is None for w in wrong) else np.concatenate(wrong),
        )

    def as_mapping(self, task_ids: Sequence[str]) -> dict[str, list[float]]:
        """``{task_id: [r_1..r_K]}``, the form schedulers observe."""
        return {task_ids[t]: row.tolist() for t, row in zip(self.tasks, self.rewards, strict=True)}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _reached(p: np.ndarray) -> np.ndarray:
    """prod_{l' < l} p(l') along axis 1 (1 for the first slot)."""
    return np.concatenate([np.ones_like(p[:, :1]), np.cumprod(p, axis=1)[:, :-1]], axis=1)


class LearnerSimulator:
    """The simulated learner (see the module docstring): ``rollout``, ``update``, ``score``.

    Args:
        pool: the pool whose structure grounds the world.
        config: simulator parameters (default :class:`SimulatorConfig`).
        seed: the run seed (rollout sampling, and the null world's permutation).
        world: a prebuilt world for ``pool`` (shared across runs to save the build); with
            ``config.shuffle_tasks`` the simulator runs its null world of run seed ``seed``.
    """

    def __init__(
        self,
        pool: Pool,
        config: SimulatorConfig | None = None,
        seed: int = 0,
        world: SimulatorWorld | None = None,
    ) -> None:
        self.config = config or SimulatorConfig()
        world = world if world is not None else build_world(pool, self.config)
        if self.config.shuffle_tasks:
            world = world.with_tasks_shuffled(self.config.world_seed, seed)
        self.world = world
        self.rng = np.random.default_rng(seed)
        self.s_env = self.world.s_env0.copy()
        self.s_op = self.world.s_op0.copy()
        self.s_task = np.zeros(len(self.world.task_ids))
        nodes, weights = np.polynomial.hermite.hermgauss(self.config.quadrature_nodes)
        self._xi_nodes = np.sqrt(2.0) * self.config.sigma_roll * nodes
        self._xi_weights = weights / np.sqrt(np.pi)

    def __repr__(self) -> str:
        w = self.world
        return (
            f"LearnerSimulator(tasks={len(w.task_ids)}, envs={len(w.env_names)}, "
            f"ops={len(w.op_names)}, held_out={int(w.test.sum())}, K={self.config.rollouts})"
        )

    def indices(self, task_ids: Sequence[str]) -> np.ndarray:
        try:
            return np.array([self.world.index[t] for t in task_ids], np.int64)
        except KeyError as error:
            raise KeyError(f"simulator: unknown task {error.args[0]!r}") from None

    def logits(self, tasks: np.ndarray) -> np.ndarray:
        """z(i,l) for the given task indices: (G,) -> (G, Lmax)."""
        w = self.world
        slot_skills = np.where(w.slot_op_mask[tasks], self.s_op[w.slot_op[tasks]], 0.0).sum(-1)
        return (
            self.s_env[w.env[tasks]][:, None]
            + slot_skills
            + self.s_task[tasks][:, None]
            - w.delta[tasks]
        )

    def rollout(self, task_ids: Sequence[str]) -> Rollouts:
        """Sample K rollouts of each task: rewards (G, K) and the operation outcomes behind them."""
        tasks = self.indices(task_ids)
        mask = self.world.slot_mask[tasks][:, None, :]
        xi = self.rng.normal(0.0, self.config.sigma_roll, (len(tasks), self.config.rollouts, 1))
        prob = np.where(mask, _sigmoid(self.logits(tasks)[:, None, :] + xi), 0.0)
        success = (self.rng.random(prob.shape) < prob) & mask
        completed = np.cumprod(success | ~mask, axis=2, dtype=bool) & mask
        attempted = np.concatenate([np.ones_like(completed[:, :, :1]), completed[:, :, :-1]], 2)
        attempted &= mask
        rewards = np.einsum("gkl,gl->gk", completed, self.world.need_weight[tasks])
        wrong = None
        if self.world.has_rest:
            draws = self.rng.random(prob.shape)
            wrong = attempted & ~success & (draws < self.config.wrong_action)
            rewards += np.einsum("gkl,gl->gk", ~wrong, self.world.rest_weight[tasks])
        return Rollouts(tasks, success, attempted, prob, rewards, wrong)

    def operation_signal(self, rollouts: Rollouts) -> np.ndarray:
        """g(i,l) = (1/K) sum_k A(i,k) a(i,k,l) (Y - p), shape (G, Lmax); 0 if zero variance."""
        advantage = rollouts.rewards - rollouts.rewards.mean(axis=1, keepdims=True)
        residual = np.where(rollouts.attempted, rollouts.success - rollouts.prob, 0.0)
        return np.einsum("gk,gkl->gl", advantage, residual) / rollouts.rewards.shape[1]

    def update(self, rollouts: Rollouts) -> dict[str, np.ndarray]:
        """Apply one GRPO-like skill update from the groups trained on (``rollouts``, of one
        step or, DAPO's refill, of several: :meth:`Rollouts.concat`).

        Returns the skill increments before decay (``env``, ``op``, ``task``).
        """
        cfg, w = self.config, self.world
        g = self.operation_signal(rollouts)
        mask = w.slot_op_mask[rollouts.tasks] & w.slot_mask[rollouts.tasks][:, :, None]
        g_of_skill = np.broadcast_to(g[:, :, None], mask.shape)[mask]
        per_task = g.sum(axis=1)
        scale = 1.0 / cfg.batch_size
        step = {
            "env": cfg.alpha_env
            * scale
            * np.bincount(w.env[rollouts.tasks], per_task, len(self.s_env)),
            "op": cfg.alpha_op
            * scale
            * np.bincount(w.slot_op[rollouts.tasks][mask], g_of_skill, len(self.s_op)),
            "task": cfg.alpha_task
            * scale
            * np.bincount(rollouts.tasks, per_task, len(self.s_task)),
        }
        for name, skill, initial in (
            ("env", self.s_env, w.s_env0),
            ("op", self.s_op, w.s_op0),
            ("task", self.s_task, np.zeros_like(self.s_task)),
        ):
            unused = step[name] == 0.0
            skill += step[name]
            skill[unused] = initial[unused] + (1.0 - cfg.decay) * (skill[unused] - initial[unused])
        return step

    def _slot_probabilities(self, tasks: np.ndarray) -> np.ndarray:
        """p(i,l) at each quadrature node of xi, 1 on padding: (G,) -> (G, Lmax, nodes)."""
        mask = self.world.slot_mask[tasks][:, :, None]
        return np.where(mask, _sigmoid(self.logits(tasks)[:, :, None] + self._xi_nodes), 1.0)

    def expected_reward(self, tasks: np.ndarray | None = None) -> np.ndarray:
        """E[r_i] (module docstring), by quadrature over xi: (G,)."""
        if tasks is None:
            tasks = np.arange(len(self.world.task_ids))
        p = self._slot_probabilities(tasks)
        completed = np.cumprod(p, axis=1) @ self._xi_weights
        expected = np.einsum("gl,gl->g", completed, self.world.need_weight[tasks])
        if self.world.has_rest:
            fail_at = _reached(p) * (1.0 - p)
            went_wrong = self.config.wrong_action * (fail_at @ self._xi_weights)
            expected += np.einsum("gl,gl->g", 1.0 - went_wrong, self.world.rest_weight[tasks])
        return expected

    def expected_group_variance(self, tasks: np.ndarray | None = None) -> np.ndarray:
        """The true expected within-group variance E[v_i] = ((K - 1) / K) Var(r_i): (G,).

        Given xi, a rollout either completes every operation or first fails at f, with
        probability prod_{l < f} p(l) (1 - p(f)); then r = sum_{l < f} w_need(l) + sum_l w_rest(l)
        - W w_rest(f), W ~ Bernoulli(wrong_action). Both moments follow by quadrature.
        """
        if tasks is None:
            tasks = np.arange(len(self.world.task_ids))
        w, pi = self.world, self.config.wrong_action
        p = self._slot_probabilities(tasks)
        need = w.need_weight[tasks][:, :, None]
        rest = w.rest_weight[tasks][:, :, None]
        fail_at = _reached(p) * (1.0 - p)  # (G, L, nodes), first failure at l
        done = np.prod(p, axis=1)  # (G, nodes), no failure
        reached = np.cumsum(need, axis=1) - need + rest.sum(axis=1, keepdims=True)
        total = need.sum(axis=1) + rest.sum(axis=1)  # (G, 1)
        first = (fail_at * (reached - pi * rest)).sum(axis=1) + done * total
        second = (fail_at * ((1 - pi) * reached**2 + pi * (reached - rest) ** 2)).sum(axis=1)
        second += done * total**2
        mean, square = first @ self._xi_weights, second @ self._xi_weights
        k = self.config.rollouts
        return (k - 1) / k * np.maximum(square - mean**2, 0.0)

    def score(self) -> float:
        """Downstream score: the mean expected reward over the held-out split."""
        held_out = np.flatnonzero(self.world.test)
        if held_out.size == 0:
            raise ValueError("simulator: the pool has no held-out (split == 'test') tasks to score")
        return float(self.expected_reward(held_out).mean())

    def skills(self) -> Mapping[str, np.ndarray]:
        """A copy of the current skills (``env``, ``op``, ``task``)."""
        return {"env": self.s_env.copy(), "op": self.s_op.copy(), "task": self.s_task.copy()}
