"""The learner SIMULATOR: a cheap, seeded stand-in for a GRPO policy, grounded in the pool.

This is a simulator, not a language model. It exists so that the evaluation harness can
compare schedulers over many seeds on machines where real GRPO runs are too slow. Every
number it produces is labelled "simulated" by the harness.

Two worlds run on the same engine (``SimulatorConfig.world``):

- ``structure`` (default, :mod:`envsched_gnn.eval.structure_world`): difficulty follows each
  task's *hidden* structure (its generator operations, gates, look-alike names, list
  selection, distractors; environment effects) with an informativeness knob kappa, skills
  transfer along those hidden factors, and checks that pass when the agent does nothing
  pass unless the rollout does something wrong. Its equations are in that module.
- ``independent`` (the first world, below): per-task difficulty drawn independently of
  anything a graph could see; skills per environment and abstract operation category.

Either can be made a null world (``shuffle_tasks``): task i is then simulated as a seeded
random other task pi(i), so neither the graph nor the environment quotas know anything
about how it behaves.

In both, a slot l of task i carries task-level skills (its environment) and slot-level
skills (factors F(i,l)), and its logit is z(i,l) = s_env(e(i)) + sum_{f in F(i,l)} s_op(f)
+ s_task(i) - delta(i,l). Rollouts, the update and the score below hold for both, with
w(i,l) split into w_need (checks passing only when operation l is completed) and w_rest
(checks passing unless operation l goes wrong); the independent world has w_rest = 0.

Independent world (fixed by the pool and ``world_seed``; the same for every run seed):

- Task i lives in environment e(i) and needs the abstract operations of its abstract
  description, in order, l = 1..L_i, with categories o(i,l) (``operation_categories``;
  a task with none gets one operation of category ``"none"``). Its checks c = 0..C_i-1
  each test one operation, l(c) = (c mod L_i) + 1; w(i,l) = |{c : l(c) = l}| / C_i.
- Skills: one per environment s_env(e), one per operation category s_op(o) (so
  F(i,l) = {o(i,l)}), one per task s_task(i) (memorisation, which never transfers).
  Initial values s_env(e) ~ N(0, sigma_env^2), s_op(o) ~ N(0, sigma_op^2), s_task(i) = 0.
- Operation difficulty: delta(i,l) = mu + b_i + eps(i,l), b_i ~ N(0, sigma_task^2),
  eps(i,l) ~ N(0, sigma_op_noise^2).
- Operation logit: z(i,l) = s_env(e(i)) + s_op(o(i,l)) + s_task(i) - delta(i,l).

Rollouts (seeded by the run seed): rollout k of task i draws a shared "luck"
xi_k ~ N(0, sigma_roll^2); it attempts the operations in order, each succeeding with
p(i,k,l) = sigmoid(z(i,l) + xi_k), Y(i,k,l) ~ Bernoulli(p(i,k,l)), and stops at the first
failure (later operations depend on earlier ones, as gates do). Operation l is completed
when Y(i,k,1..l) are all 1; the failed operation goes wrong, W(i,k,l) = 1, with
probability ``wrong_action`` (a(i,k,l) = 1, Y(i,k,l) = 0). The reward is

    r(i,k) = sum_l w_need(i,l) * prod_{l' <= l} Y(i,k,l') + sum_l w_rest(i,l) * (1 - W(i,k,l))

Hard first operations give K zeros (K times the do-nothing score sum_l w_rest), easy
tasks K ones, tasks with one impossible late operation K equal partial rewards.

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

Parameters and their defaults are the fields of :class:`SimulatorConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from envsched_gnn.envs.pool import Pool, Task

NO_CATEGORY = "none"
WORLDS = ("structure", "independent")


@dataclass
class SimulatorConfig:
    """Parameters of the learner simulator (equations in the module docstring)."""

    rollouts: int = 8
    """K, rollouts per selected task."""
    world: str = "structure"
    """``structure`` (difficulty from hidden structure, with ``kappa``) or ``independent``."""
    world_seed: int = 0
    """Seed of the world (effects, difficulties); the run seed only drives sampling."""
    kappa: float = 0.5
    """kappa (structure world), the share of the difficulty's variance that the hidden
    structure explains: 0 independent of structure, 1 a function of it."""
    difficulty_mean: float = -1.0
    """mu, the mean operation difficulty (logit units)."""
    sigma_difficulty: float = 3.5
    """sigma (structure world), the spread of the operation difficulty delta(i,l)."""
    wrong_action: float = 0.5
    """Probability that a failed operation does something wrong, breaking its checks that
    pass when nothing is done (the structure world's distractor checks)."""
    sigma_task: float = 3.0
    """sigma_task (independent world), spread of the per-task difficulty offset b_i."""
    sigma_op_noise: float = 1.5
    """sigma_op_noise (independent world), spread of the per-operation difficulty eps(i,l)."""
    sigma_env: float = 1.0
    """sigma_env (independent world), spread of the initial environment skills."""
    sigma_op: float = 1.0
    """sigma_op (independent world), spread of the initial operation-category skills."""
    sigma_roll: float = 1.0
    """sigma_roll, spread of the per-rollout luck xi_k shared by a rollout's operations."""
    alpha_env: float = 1.0
    """alpha_env, learning rate of environment skills."""
    alpha_op: float = 0.5
    """alpha_op, learning rate of slot-level skills (operation categories; hidden factors)."""
    alpha_task: float = 4.0
    """alpha_task, learning rate of the per-task (non-transferring) skill."""
    decay: float = 0.005
    """nu, per-step relaxation of unused skills towards their initial value."""
    batch_size: int = 64
    """B, the nominal batch size that normalises the update."""
    quadrature_nodes: int = 16
    """Gauss-Hermite nodes for the exact expected reward."""
    shuffle_tasks: bool = False
    """The null world: simulate each task as a seeded random other task of the world
    (:meth:`SimulatorWorld.with_tasks_shuffled`), so nothing the graph or the quotas see
    about a task tells how it behaves: a check of the harness."""

    def __post_init__(self) -> None:
        if self.world not in WORLDS:
            raise ValueError(f"simulator world {self.world!r}, expected one of {WORLDS}")
        if not 0.0 <= self.kappa <= 1.0:
            raise ValueError(f"--kappa = {self.kappa}, expected a value in [0, 1]")
        if not 0.0 <= self.wrong_action <= 1.0:
            raise ValueError(f"wrong_action = {self.wrong_action}, expected a value in [0, 1]")


@dataclass
class SimulatorWorld:
    """The fixed structure the simulator runs on; arrays are indexed by task (N), slot (L)
    and slot-level skill (F per slot)."""

    task_ids: list[str]
    env_names: list[str]
    op_names: list[str]
    """Names of the slot-level skills (operation categories, or hidden factors)."""
    env: np.ndarray
    """(N,) int64 environment index (the task-level skill)."""
    slot_op: np.ndarray
    """(N, Lmax, F) int64 slot-level skills of each operation slot."""
    slot_op_mask: np.ndarray
    """(N, Lmax, F) bool, True where ``slot_op`` names a skill of the slot."""
    slot_mask: np.ndarray
    """(N, Lmax) bool, True where the slot is a real operation."""
    need_weight: np.ndarray
    """(N, Lmax) float64 w_need(i,l): share of the checks that pass when l is completed."""
    rest_weight: np.ndarray
    """(N, Lmax) float64 w_rest(i,l): share of the checks (of l) that pass unless l goes wrong."""
    delta: np.ndarray
    """(N, Lmax) float64 operation difficulty (0 on padding)."""
    test: np.ndarray
    """(N,) bool, True for held-out tasks."""
    s_env0: np.ndarray
    s_op0: np.ndarray
    kind: str = "independent"
    """Which world this is (``SimulatorConfig.world``)."""
    structure_score: np.ndarray | None = None
    """(N, Lmax) float64 S(i,l), the standardised structural score (structure world only)."""
    info: dict = field(default_factory=dict)
    """What the world builder reports (e.g. how many tasks had a hidden structure)."""
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {task_id: i for i, task_id in enumerate(self.task_ids)}

    @property
    def has_rest(self) -> bool:
        return bool(self.rest_weight.any())

    def with_tasks_shuffled(self, seed: int) -> SimulatorWorld:
        """The null world: task i is simulated as task pi(i) of this world (environment,
        operations, checks, difficulty), pi a seeded permutation; ids and splits stay."""
        pi = np.random.default_rng([seed, 0x0DD]).permutation(len(self.task_ids))
        rows = {
            name: getattr(self, name)[pi]
            for name in (
                "env",
                "slot_op",
                "slot_op_mask",
                "slot_mask",
                "need_weight",
                "rest_weight",
                "delta",
            )
        }
        score = None if self.structure_score is None else self.structure_score[pi]
        info = {**self.info, "tasks_shuffled": True}
        return replace(self, **rows, structure_score=score, info=info)


def pool_categories(pool: Pool) -> Callable[[Task], list[str]]:
    """Each task's operation categories, from its abstract (given, or extracted)."""
    from envsched_gnn.envs.abstract import abstract_of, operation_categories

    def categories_of(task: Task) -> list[str]:
        env = pool.envs.get(task.env_id)
        try:
            return operation_categories(abstract_of(task, env))
        except ValueError:
            # an abstract in a free-form format: extract one from the solution or checks
            return operation_categories(abstract_of(replace(task, abstract=None), env))

    return categories_of


def build_world(
    pool: Pool,
    config: SimulatorConfig,
    categories_of: Callable[[Task], Sequence[str]] | None = None,
) -> SimulatorWorld:
    """Draw the world ``config.world`` for ``pool`` from ``config.world_seed``.

    ``categories_of`` (independent world) maps a task to its operation categories
    (default: from its abstract).
    """
    if config.world == "structure":
        from envsched_gnn.eval.structure_world import build_structure_world

        world = build_structure_world(pool, config)
    else:
        world = build_independent_world(pool, config, categories_of)
    return world.with_tasks_shuffled(config.world_seed) if config.shuffle_tasks else world


def build_independent_world(
    pool: Pool,
    config: SimulatorConfig,
    categories_of: Callable[[Task], Sequence[str]] | None = None,
) -> SimulatorWorld:
    """The independent world (module docstring) for ``pool``, from ``config.world_seed``."""
    if not pool.tasks:
        raise ValueError("simulator: the pool has no tasks")
    categories_of = categories_of or pool_categories(pool)
    rng = np.random.default_rng(config.world_seed)
    env_names = list(dict.fromkeys(task.env_id for task in pool.tasks))
    env_of = {e: k for k, e in enumerate(env_names)}
    categories = [list(categories_of(task)) or [NO_CATEGORY] for task in pool.tasks]
    op_names = sorted({c for cats in categories for c in cats})
    op_of = {o: k for k, o in enumerate(op_names)}
    n = len(pool.tasks)
    l_max = max(len(cats) for cats in categories)
    slot_op = np.zeros((n, l_max), np.int64)
    slot_mask = np.zeros((n, l_max), bool)
    slot_weight = np.zeros((n, l_max), np.float64)
    for i, (task, cats) in enumerate(zip(pool.tasks, categories, strict=True)):
        n_checks = len(task.checklist_with_func)
        if n_checks == 0:
            raise ValueError(f"simulator: task {task.task_id!r} has an empty checklist_with_func")
        slot_op[i, : len(cats)] = [op_of[c] for c in cats]
        slot_mask[i, : len(cats)] = True
        slot_weight[i, : len(cats)] = np.bincount(
            np.arange(n_checks) % len(cats), minlength=len(cats)
        )
        slot_weight[i] /= n_checks
    offset = rng.normal(0.0, config.sigma_task, n)
    noise = rng.normal(0.0, config.sigma_op_noise, (n, l_max))
    delta = config.difficulty_mean + offset[:, None] + noise
    return SimulatorWorld(
        task_ids=[task.task_id for task in pool.tasks],
        env_names=env_names,
        op_names=op_names,
        env=np.array([env_of[task.env_id] for task in pool.tasks], np.int64),
        slot_op=slot_op[:, :, None],
        slot_op_mask=slot_mask[:, :, None],
        slot_mask=slot_mask,
        need_weight=slot_weight,
        rest_weight=np.zeros_like(slot_weight),
        delta=np.where(slot_mask, delta, 0.0),
        test=np.array([task.split == "test" for task in pool.tasks], bool),
        s_env0=rng.normal(0.0, config.sigma_env, len(env_names)),
        s_op0=rng.normal(0.0, config.sigma_op, len(op_names)),
        kind="independent",
    )


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
        seed: the run seed (rollout sampling only).
        world: a prebuilt world for ``pool`` (shared across runs to save the build).
    """

    def __init__(
        self,
        pool: Pool,
        config: SimulatorConfig | None = None,
        seed: int = 0,
        world: SimulatorWorld | None = None,
    ) -> None:
        self.config = config or SimulatorConfig()
        self.world = world if world is not None else build_world(pool, self.config)
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

    def update(
        self, rollouts: Rollouts, keep: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """Apply one GRPO-like skill update from the groups trained on (all, or those in ``keep``).

        Returns the skill increments before decay (``env``, ``op``, ``task``).
        """
        if keep is not None:
            wanted = set(self.indices(keep).tolist())
            rollouts = rollouts.subset(
                np.array([t in wanted for t in rollouts.tasks.tolist()], bool)
            )
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
