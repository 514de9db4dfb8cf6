"""Configuration of the analytic predictor (spec section 4; every default is the paper's) and
of the learned propagation (``models.learned``), importable without torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.validation import check_bounds, config_error

Y_NAMES = ("v", "m", "d")
"""The three per-observation statistics, in the channel order used throughout ``models``."""

SPREAD = "z"
"""The spread indicator z(i,s) = 1[v(i,s) > 0], the fourth statistic of the ``spread`` target."""

TARGETS = ("variance", "spread")
"""What q ranks (``PredictorConfig.target``): the paper's predicted variance, or P(v > 0)."""


def _default_relation_weights() -> dict[str, float]:
    return {"within": 0.5, "cross": 0.5}


@dataclass
class PredictorConfig:
    """Hyper-parameters of the fixed propagation, fusion, shrinkage and calibration."""

    half_life_long: float = 8.0
    """h_long of the half-life weight w_h(t,s) = 2^(-(t-s)/h) (steps 4.1-4.6 run per half-life)."""
    half_life_short: float = 2.0
    """h_short, the recent view used by the decline penalty (4.7)."""
    lambda_g: float = 2.0
    """Pseudo-weight of the global reference g_y(t) in each relation estimate G_r (4.4); > 0."""
    lambda_s: float = 2.0
    """Pseudo-weight of the graph prior P_y in the self-history shrinkage E_y (4.5); > 0."""
    weight_variance_rank: float = 0.65
    """Weight of pr(E_v) in the calibrated percentile 0.65 pr(E_v) + 0.35 pr(f) (4.6)."""
    weight_reconstructed_rank: float = 0.35
    """Weight of pr(f), f = E_d E_m (1 - E_m), in the calibrated percentile (4.6)."""
    eta: float = 0.5
    """Recent-decline penalty: u = u_long - eta max(u_long - u_short, 0) (4.7)."""
    relation_weights: dict[str, float] = field(default_factory=_default_relation_weights)
    """Fusion weights of G_within and G_cross in the graph prior P_y (4.5); they sum to 1."""
    default_v: float = 0.125
    """g_v with no history at all (spec decision, 4.1)."""
    default_m: float = 0.5
    """g_m with no history at all (spec decision, 4.1)."""
    default_d: float = 0.5
    """g_d with no history at all (spec decision, 4.1)."""
    target: str = "variance"
    """What q ranks. ``variance``: the paper's predicted reward variance, E_v and f calibrated
    (4.6). ``spread`` (beyond the paper, docs/design.md "Targets and learners"): the
    probability that a group has any reward spread, P(v > 0); the indicator z = 1[v > 0] runs
    through 4.1-4.5 as a fourth statistic (clipped to [0, 1]) and u_h = E_z replaces 4.6."""
    default_z: float = 0.5
    """g_z with no history at all (``spread`` target): an uninformed P(v > 0)."""

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise config_error(self, "target", self.target, f"one of {TARGETS}")
        positive = ("half_life_long", "half_life_short", "lambda_g", "lambda_s")
        non_negative = ("weight_variance_rank", "weight_reconstructed_rank", "eta")
        check_bounds(
            self,
            finite=(*positive, *non_negative),
            positive=positive,
            non_negative=non_negative,
            within={
                "default_v": (0.0, 0.25),
                "default_m": (0.0, 1.0),
                "default_d": (0.0, 1.0),
                "default_z": (0.0, 1.0),
            },
        )
        total = self.weight_variance_rank + self.weight_reconstructed_rank
        if not math.isclose(total, 1.0, abs_tol=1e-12):
            raise config_error(
                self,
                "weight_variance_rank",
                self.weight_variance_rank,
                f"1 - weight_reconstructed_rank (= {self.weight_reconstructed_rank!r}): the "
                "two weights sum to 1",
            )
        if set(self.relation_weights) != set(RELATIONS):
            raise config_error(
                self, "relation_weights", self.relation_weights, f"exactly the keys {RELATIONS}"
            )
        for relation, value in self.relation_weights.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise config_error(
                    self, f"relation_weights[{relation!r}]", value, "a finite number >= 0"
                )
        if not math.isclose(sum(self.relation_weights.values()), 1.0, abs_tol=1e-12):
            raise config_error(
                self, "relation_weights", self.relation_weights, "weights that sum to 1"
            )

    @property
    def half_lives(self) -> tuple[float, float]:
        """(h_long, h_short)."""
        return (float(self.half_life_long), float(self.half_life_short))

    @property
    def statistics(self) -> tuple[str, ...]:
        """The statistics propagated, in channel order: (v, m, d), and z for ``spread``."""
        return Y_NAMES + ((SPREAD,) if self.target == "spread" else ())

    @property
    def defaults(self) -> tuple[float, ...]:
        """The no-history references (g_v, g_m, g_d), and g_z for ``spread``."""
        values = (self.default_v, self.default_m, self.default_d)
        values += (self.default_z,) if self.target == "spread" else ()
        return tuple(float(v) for v in values)

    @classmethod
    def within_only(cls, **overrides) -> PredictorConfig:
        """The within-only ablation: P_y = G_within."""
        return cls(relation_weights={"within": 1.0, "cross": 0.0}, **overrides)

    @classmethod
    def cross_only(cls, **overrides) -> PredictorConfig:
        """The cross-only ablation: P_y = G_cross."""
        return cls(relation_weights={"within": 0.0, "cross": 1.0}, **overrides)


@dataclass
class LearnedConfig:
    """Architecture and online-training settings of the learned propagation."""

    hidden_channels: int = 32
    """Width of every hidden layer."""
    num_layers: int = 2
    """Number of heterogeneous message-passing layers."""
    learning_rate: float = 0.01
    """Adam learning rate."""
    weight_decay: float = 1e-4
    """Adam weight decay."""
    gradient_steps: int = 2
    """Adam steps per ``update`` that saw at least one new step."""
    steps_per_batch: int = 2
    """Training examples (past steps) per mini-batch; the newest is always included."""
    replay_steps: int = 32
    """How many of the most recent steps are kept as training examples."""
    aux_weight: float = 0.5
    """Weight of the mean and dispersion targets next to the variance target."""
    use_text: bool = False
    """Append ``data['task'].x`` (e.g. a sentence embedding of the task) to the features."""
    residual: bool = True
    """Correct the analytic estimate in logit space (False: the head's output alone)."""
    seed: int = 0
    """Seed of the initial weights and of the mini-batch sampling."""
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    """Half-lives, lambda_g, calibration weights and eta shared with the analytic path."""

    def __post_init__(self) -> None:
        sizes = ("hidden_channels", "num_layers", "steps_per_batch", "replay_steps")
        check_bounds(
            self,
            integers=(*sizes, "gradient_steps", "seed"),
            at_least=dict.fromkeys(sizes, 1),
            positive=("learning_rate",),
            non_negative=("weight_decay", "gradient_steps", "aux_weight", "seed"),
        )
