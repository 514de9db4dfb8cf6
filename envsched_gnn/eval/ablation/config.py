"""The ablation's vocabulary: its configs, result names, jobs and budget-step arithmetic.

Kept apart from the orchestrator, learners and report so each imports it and none the others.
Every scheduler gets S x B x K rollouts; a record's budget step is rollouts spent / (B K). The
policy learner evaluates every e = ceil(S / evaluations) steps; score columns are budget steps
e, 3e and S (the paper's 40 / 120 / 200 when S = 200).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.controls import CONTROLS, DRAWN_CONTROLS, PREDICTOR_CONTROLS, control_graph
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.scheduler.dynamic_sampling import SUFFIX, DynamicSamplingConfig
from envsched_gnn.scheduler.metrics import BATCH_METRICS
from envsched_gnn.scheduler.registry import is_scheduler_name, scheduler_names_expected
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.grpo.config import GRPOConfig, small_policy_recipe
from envsched_gnn.training.sft_config import SFTConfig
from envsched_gnn.validation import check_bounds, config_error

ENVSCHED_VARIANTS = ("envsched", "within_only", "cross_only", "rho0", "rho1")
TARGET_VARIANTS = ("envsched", "envsched_spread", "envsched_ops")
"""EnvSched with the paper's target, with the spread target, and with operation coverage:
each is compared with the controls (which run EnvSched with the paper's target on a control
graph)."""
BASELINES = ("random", "dapo", "mopps", "greso", "dps", "dump", "learned")
K_GRID = ((3, 12), (12, 12), (6, 6), (6, 24))
DEFAULT_K = (6, 12)
ORACLE = "envsched_oracle"
PREDICTION_METRICS = (
    "predict/spearman_batch",
    "predict/spearman_batch_seen",
    "predict/spearman_batch_unseen",
    "predict/seen_share",
    "predict/spearman_true",
)
STEP_METRICS = BATCH_METRICS


LEARNER_LABELS = {"sim": "simulator", "policy": "policy (real GRPO)"}


def grid_name(k_in: int, k_cross: int) -> str:
    return f"k{k_in}_{k_cross}"


def control_name(control: str) -> str:
    """The result name of EnvSched on a control graph: ``envsched_<control>`` (and
    ``envsched_<control>+ds`` behind dynamic sampling)."""
    return f"envsched_{control}"


def target_variants(config: AblationConfig) -> list[str]:
    """The target variants the run holds, plain and behind dynamic sampling, each compared
    with the controls of its own kind (plain with plain, ``+ds`` with ``+ds``)."""
    return [
        name
        for base in TARGET_VARIANTS
        for name in (base, base + SUFFIX)
        if name in config.schedulers
    ]


def same_kind_controls(target: str, config: AblationConfig) -> list[str]:
    """The result names of the controls sampled as ``target`` is (both plain or both ``+ds``)."""
    ds = target.endswith(SUFFIX)
    return [control_name(c) for c in config.controls if c.endswith(SUFFIX) == ds]


def control_graph_name(control: str) -> str:
    """The control graph of ``control`` (``relabelled+ds`` runs on ``relabelled``)."""
    return control.removesuffix(SUFFIX)


def control_scheduler(control: str) -> str:
    """The scheduler a control runs: EnvSched, behind dynamic sampling for ``NAME+ds``."""
    return "envsched" + (SUFFIX if control.endswith(SUFFIX) else "")


def eval_every_for(steps: int, evaluations: int = 5) -> int:
    """e = ceil(S / evaluations): the policy learner evaluates every e steps (and after the
    last)."""
    return max(1, math.ceil(steps / evaluations))


def score_steps_for(steps: int, evaluations: int = 5) -> tuple[int, ...]:
    """The report's score columns: budget steps e, 3e and S (40 / 120 / 200 for S = 200)."""
    e = eval_every_for(steps, evaluations)
    return tuple(sorted({min(e, steps), min(3 * e, steps), steps}))


@dataclass
class PolicyLearnerConfig:
    """The policy, its warm start and its GRPO settings (B, K, S and seeds are the harness's)."""

    model: str | None = None
    """Local HF causal LM folder to start from; None: the built-in policy."""
    sft_steps: int = SFTConfig.max_steps
    """SFT warm-start budget in optimiser steps (default: the SFT default); 0: no SFT,
    ``model`` is the starting policy as is."""
    sft_extra_tasks_per_env: int = SFTConfig.extra_tasks_per_env
    """Fresh generated tasks per environment added to SFT's train split."""
    recipe: GRPOConfig = field(default_factory=small_policy_recipe)
    """GRPO's optimisation settings (learning rate, passes, advantages, KL); its scheduler,
    B, K, steps, seed and evaluation fields are replaced by the harness's. Default: the main
    job's recipe for the built-in policy."""
    workers: int = 1
    """Runs trained at once, each in its own process with one torch thread (2 on 2 cores:
    the rollouts wait on tool calls and tokens, so two runs share the machine well)."""
    eval_tasks: int = 0
    """Held-out tasks scored (a fixed seeded subset of the test split; 0: all)."""
    eval_samples: int = 4
    """Samples per held-out task."""
    pool_eval_samples: int = 0
    """At every evaluation also roll out every train task this many times (the pool reward,
    unbiased by which tasks each scheduler picked); 0: off."""
    pool_eval_tasks: int = 0
    """Train tasks of that pool evaluation (a fixed seeded subset; 0: all)."""
    eval_seed: int = 0
    """Seed of the held-out subset and its sampling, the same for every run."""
    accelerator: str = "auto"
    """``auto``, ``cpu`` or ``gpu``."""
    agent: AgentConfig | None = None
    """Agent format, turn and token limits, temperature, constrained decoding (SFT and GRPO
    alike); None: the starting policy's own (its ``agent_config.json``; the defaults for an
    SFT from scratch)."""
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    """Worker processes of the environment runtime, and the reward it scores."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            non_negative=(
                "sft_steps",
                "sft_extra_tasks_per_env",
                "eval_tasks",
                "pool_eval_samples",
                "pool_eval_tasks",
                "eval_seed",
            ),  # fmt: skip
            at_least={"workers": 1, "eval_samples": 1},
        )
        if self.sft_steps == 0 and self.model is None:
            raise config_error(
                self,
                "sft_steps",
                self.sft_steps,
                "> 0 without model (the policy to start from as is)",
            )


@dataclass
class AblationConfig:
    """What the harness runs; every scheduler shares the budget steps x B x K."""

    seeds: int = 5
    """Number of run seeds (0 .. seeds-1)."""
    steps: int = 200
    """Budget in steps of B groups of K rollouts."""
    batch_size: int = 64
    """B, groups per step."""
    learner: str = "sim"
    """``sim`` (the learner simulator) or ``policy`` (real GRPO runs of the policy)."""
    controls: tuple[str, ...] = ()
    """Control graphs to run EnvSched on (spec section 7): names of ``controls.CONTROLS``;
    ``NAME+ds`` runs EnvSched behind dynamic sampling on that control graph."""
    schedulers: tuple[str, ...] = ENVSCHED_VARIANTS + BASELINES
    """Registered scheduler names to run on the default graph."""
    k_grid: tuple[tuple[int, int], ...] = K_GRID
    """(k_in, k_cross) pairs of the neighbour-size grid (EnvSched on each graph)."""
    score_steps: tuple[int, ...] | None = None
    """Budget steps at which the downstream score is reported (None: ``score_steps_for``)."""
    evaluations: int = 5
    """Policy learner: held-out evaluations per run after step 0, every e = ceil(S /
    evaluations) steps (each costs about as much as 10 GRPO steps of 8 x 8 on the demo
    pool)."""
    eval_rollouts: tuple[int, ...] = ()
    """Policy learner: evaluate after the first step to reach each of these rollout counts
    (and after the last) instead of every e steps: a grid in rollouts, where a scheduler
    behind dynamic sampling, whose steps spend more, is evaluated at the same points."""
    sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    """Dynamic sampling of every ``NAME+ds`` scheduler of the run (``dapo`` keeps its own)."""
    workers: int = 2
    """Worker processes of the simulator's runs (the policy learner's: --policy-workers)."""
    control_seed: int = 0
    """Seed of the control graphs' permutations (run seed s draws its own from (this, s)) and
    of the shuffled pool (one draw)."""
    oracle_graph: bool = False
    """Also run EnvSched on the oracle graph of hidden structure (an upper bound)."""
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    """The learner simulator's parameters; K = ``simulator.rollouts`` for both learners."""
    policy: PolicyLearnerConfig = field(default_factory=PolicyLearnerConfig)
    """The policy learner's settings (``learner = "policy"``)."""

    @property
    def rollouts_per_step(self) -> int:
        """B x K: the rollouts of one budget step."""
        return self.batch_size * self.simulator.rollouts

    @property
    def budget_rollouts(self) -> int:
        """R = steps x B x K: every run's budget in rollouts."""
        return self.steps * self.rollouts_per_step

    def __post_init__(self) -> None:
        if self.learner not in ("sim", "policy"):
            raise config_error(self, "learner", self.learner, "'sim' or 'policy'")
        if self.learner == "sim" and self.policy.runtime.reward != "fraction":
            raise config_error(
                self,
                "learner",
                self.learner,
                "'policy' under --reward success (the simulator has its own partial-credit reward)",
            )
        names = ("seeds", "steps", "batch_size", "workers", "evaluations")
        check_bounds(self, at_least=dict.fromkeys(names, 1), non_negative=("control_seed",))
        budget = self.budget_rollouts
        if any(not 1 <= r <= budget for r in self.eval_rollouts):
            raise config_error(
                self, "eval_rollouts", self.eval_rollouts, f"counts in [1, {budget}] (the budget)"
            )
        if self.score_steps is None:
            self.score_steps = score_steps_for(self.steps, self.evaluations)
        unknown_controls = [c for c in self.controls if control_graph_name(c) not in CONTROLS]
        if unknown_controls:
            raise config_error(
                self,
                "controls",
                self.controls,
                f"names of {CONTROLS} (or NAME{SUFFIX}), not {unknown_controls}",
            )
        self.controls = tuple(
            c for base in CONTROLS for c in (base, base + SUFFIX) if c in self.controls
        )
        predictor_only = [c for c in self.controls if control_graph_name(c) in PREDICTOR_CONTROLS]
        if self.learner == "policy" and predictor_only:
            raise config_error(
                self,
                "controls",
                self.controls,
                f"none of {predictor_only} with learner 'policy' (GRPO training reads one "
                "graph for the predictor and the penalty): they need learner 'sim'",
            )
        unknown = [name for name in self.schedulers if not is_scheduler_name(name)]
        if unknown or not self.schedulers:
            raise config_error(
                self,
                "schedulers",
                self.schedulers,
                f"names of schedulers, {scheduler_names_expected()}; not {unknown}",
            )


@dataclass(frozen=True)
class Job:
    """One (run name, registered scheduler, graph key, seed), and the key of the graph of the
    similarity penalty when it is not ``graph``."""

    name: str
    scheduler: str
    graph: str
    seed: int
    penalty_graph: str | None = None


def job_graph(
    key: str, seed: int, graphs: dict[str, TaskGraph], config: AblationConfig
) -> TaskGraph:
    """The graph ``key`` of the run with seed ``seed``: ``graphs[key]``, or for a control of
    ``controls.DRAWN_CONTROLS`` its draw from (control seed, run seed) on the default graph, so
    that the CI over seeds holds the control's own luck of the draw."""
    if key in DRAWN_CONTROLS:
        return control_graph(graphs[grid_name(*DEFAULT_K)], key, (config.control_seed, seed))
    return graphs[key]


def run_names(config: AblationConfig) -> list[str]:
    """Result names in table order: the schedulers, the neighbour-size grid, the controls."""
    names = list(config.schedulers)
    names += [grid_name(*k) for k in config.k_grid if k != DEFAULT_K]
    names += [control_name(c) for c in config.controls]
    return names + ([ORACLE] if config.oracle_graph else [])


def curve_steps(config: AblationConfig) -> np.ndarray:
    """Budget steps of the score curve: every step (simulator), the evaluations (policy: the
    rollout grid when given, else every e steps)."""
    if config.learner == "sim":
        return np.arange(config.steps + 1, dtype=np.float64)
    if config.eval_rollouts:
        per_step = config.rollouts_per_step
        points = {0.0, float(config.steps), *(r / per_step for r in config.eval_rollouts)}
        return np.array(sorted(points), dtype=np.float64)
    e = eval_every_for(config.steps, config.evaluations)
    return np.array(sorted({*range(0, config.steps, e), config.steps}), dtype=np.float64)
