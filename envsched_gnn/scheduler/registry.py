"""Schedulers by name: EnvSched, its ablations and the baselines; extensible.

``envsched``, ``within_only``, ``cross_only``, ``rho0``, ``rho1``, ``envsched_spread``
(docs/design.md §9.3), ``envsched_ops`` (§9.4), ``learned`` (:mod:`~envsched_gnn.models.learned`),
``random``, ``mopps``, ``greso``, ``dps``, ``dump``; add more with :func:`register_scheduler`.
``NAME+ds`` is any of them behind dynamic sampling
(:mod:`~envsched_gnn.scheduler.dynamic_sampling`), and ``dapo`` is ``random+ds`` pinned to
verl's DAPO recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, replace

from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.scheduler.base import BaseScheduler, Scheduler
from envsched_gnn.scheduler.baselines.dps import DpsConfig, DpsScheduler
from envsched_gnn.scheduler.baselines.dump import DumpConfig, DumpScheduler
from envsched_gnn.scheduler.baselines.greso import GresoConfig, GresoScheduler
from envsched_gnn.scheduler.baselines.mopps import MoppsConfig, MoppsScheduler
from envsched_gnn.scheduler.baselines.uniform import UniformScheduler
from envsched_gnn.scheduler.config import SelectorConfig
from envsched_gnn.scheduler.dynamic_sampling import (
    DAPO_RECIPE,
    SUFFIX,
    DynamicSampling,
    DynamicSamplingConfig,
)
from envsched_gnn.validation import ConfigError

SchedulerFactory = Callable[..., Scheduler]
"""``factory(graph, *, batch_size, seed, config, **overrides) -> Scheduler``; the EnvSched
family also takes ``predictor``, ``penalty_graph`` and ``operations`` (see
``EnvSchedScheduler``). A factory whose attribute ``reads_operations`` is true is given the
caller's ``operations``; the others never see them. One whose ``needs_operations`` is true
cannot start without them (``envsched_ops``). One whose ``over_samples`` is true builds
a scheduler that over-samples already (it has no ``+ds`` form)."""

SCHEDULERS: dict[str, SchedulerFactory] = {}


def register_scheduler(name: str, factory: SchedulerFactory) -> None:
    """Make ``make_scheduler(name, ...)`` call ``factory``; a name is registered once."""
    if name in SCHEDULERS and SCHEDULERS[name] is not factory:
        raise ValueError(f"scheduler {name!r} is already registered")
    SCHEDULERS[name] = factory


def is_scheduler_name(name: str) -> bool:
    """Whether ``name`` names a scheduler: a registered one, or ``NAME+ds`` for a registered
    ``NAME`` that does not over-sample already."""
    base = name.removesuffix(SUFFIX)
    factory = SCHEDULERS.get(base)
    return factory is not None and (base == name or not getattr(factory, "over_samples", False))


def scheduler_names_expected() -> str:
    """What a scheduler name may be, in words (for errors)."""
    over = sorted(n for n, f in SCHEDULERS.items() if getattr(f, "over_samples", False))
    return (
        f"one of {sorted(SCHEDULERS)}, or NAME{SUFFIX} for one of them behind dynamic "
        f"sampling (but not {over}, which over-sample already)"
    )


def over_samples(name: str) -> bool:
    """Whether the scheduler ``name`` over-samples (``NAME+ds``, ``dapo``)."""
    factory = SCHEDULERS[check_scheduler_name(name).removesuffix(SUFFIX)]
    return name.endswith(SUFFIX) or bool(getattr(factory, "over_samples", False))


def check_scheduler_name(name: str) -> str:
    """``name`` when :func:`is_scheduler_name`; a :class:`ConfigError` (a ``ValueError``) saying
    what exists otherwise."""
    if not is_scheduler_name(name):
        raise ConfigError(f"unknown scheduler {name!r}, expected {scheduler_names_expected()}")
    return name


def reads_operations(name: str) -> bool:
    """Whether the scheduler ``name`` is given the tasks' operation patterns (``operations``)
    when the caller has them (the EnvSched family)."""
    factory = SCHEDULERS[check_scheduler_name(name).removesuffix(SUFFIX)]
    return bool(getattr(factory, "reads_operations", False))


def needs_operations(name: str) -> bool:
    """Whether the scheduler ``name`` cannot start without the tasks' operation patterns
    (``envsched_ops``, whose coverage stage spreads over them)."""
    factory = SCHEDULERS[check_scheduler_name(name).removesuffix(SUFFIX)]
    return bool(getattr(factory, "needs_operations", False))


def make_scheduler(
    name: str,
    graph: TaskGraph,
    *,
    batch_size: int = 64,
    seed: int = 0,
    config=None,
    operations: Mapping[str, str] | None = None,
    sampling: DynamicSamplingConfig | None = None,
    **overrides,
) -> Scheduler:
    """Build the scheduler ``name``; ``overrides`` replace fields of its config dataclass,
    ``operations`` reaches the schedulers that read it, and ``sampling`` sets the dynamic
    sampling of a ``NAME+ds`` (default: ``DynamicSamplingConfig()``).
    """
    base = check_scheduler_name(name).removesuffix(SUFFIX)
    factory = SCHEDULERS[base]
    if operations is not None and getattr(factory, "reads_operations", False):
        overrides["operations"] = operations
    scheduler = factory(graph, batch_size=batch_size, seed=seed, config=config, **overrides)
    return DynamicSampling(scheduler, sampling) if base != name else scheduler


def _with_overrides(config, default, overrides: dict, name: str):
    config = config if config is not None else default
    known = {f.name for f in fields(config)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"scheduler {name!r}: unknown option(s) {unknown}, expected fields of "
            f"{type(config).__name__}: {sorted(known)}"
        )
    return replace(config, **overrides)


def _envsched(
    name: str,
    relations: tuple[str, ...],
    weights: dict | None,
    target: str = "variance",
    **defaults,
):
    def factory(
        graph,
        *,
        batch_size=64,
        seed=0,
        config=None,
        predictor=None,
        penalty_graph=None,
        operations=None,
        **overrides,
    ):
        from envsched_gnn.scheduler.envsched import EnvSchedScheduler

        base = SelectorConfig(penalty_relations=relations, **defaults)
        selector = _with_overrides(config, base, overrides, name)
        if predictor is None and (weights is not None or target != "variance"):
            from envsched_gnn.models.analytic import AnalyticPredictor
            from envsched_gnn.models.config import PredictorConfig

            options = {"relation_weights": dict(weights)} if weights is not None else {}
            predictor = AnalyticPredictor(PredictorConfig(target=target, **options))
        return EnvSchedScheduler(
            graph,
            batch_size=batch_size,
            seed=seed,
            config=selector,
            predictor=predictor,
            name=name,
            penalty_graph=penalty_graph,
            operations=operations,
        )

    factory.reads_operations = True
    factory.needs_operations = bool(defaults.get("operation_coverage", False))
    return factory


def _learned(graph, *, batch_size=64, seed=0, config=None, **overrides):
    from envsched_gnn.models.learned import LearnedConfig, LearnedPropagation

    predictor = LearnedPropagation(LearnedConfig(seed=seed))
    factory = _envsched("learned", BOTH, None)
    return factory(
        graph, batch_size=batch_size, seed=seed, config=config, predictor=predictor, **overrides
    )


def _baseline(cls: type[BaseScheduler], default_config):
    def factory(graph, *, batch_size=64, seed=0, config=None, **overrides):
        if default_config is None:
            if config is not None or overrides:
                raise ValueError(f"scheduler {cls.name!r} takes no options")
            return cls(graph, batch_size=batch_size, seed=seed)
        chosen = _with_overrides(config, default_config, overrides, cls.name)
        return cls(graph, batch_size=batch_size, seed=seed, config=chosen)

    return factory


def _dapo(graph, *, batch_size=64, seed=0, config=None, **overrides):
    """``random+ds`` with verl's DAPO recipe; ``overrides`` replace its sampling fields."""
    sampling = _with_overrides(config, DAPO_RECIPE, overrides, "dapo")
    uniform = UniformScheduler(graph, batch_size=batch_size, seed=seed)
    return DynamicSampling(uniform, sampling, name="dapo")


_dapo.over_samples = True

BOTH = ("within", "cross")
register_scheduler("envsched", _envsched("envsched", BOTH, None))
register_scheduler(
    "within_only", _envsched("within_only", ("within",), {"within": 1.0, "cross": 0.0})
)
register_scheduler("cross_only", _envsched("cross_only", ("cross",), {"within": 0.0, "cross": 1.0}))
register_scheduler("rho0", _envsched("rho0", BOTH, None, rho=0.0))
register_scheduler("rho1", _envsched("rho1", BOTH, None, rho=1.0))
register_scheduler("envsched_spread", _envsched("envsched_spread", BOTH, None, target="spread"))
register_scheduler("envsched_ops", _envsched("envsched_ops", BOTH, None, operation_coverage=True))
register_scheduler("learned", _learned)
register_scheduler("random", _baseline(UniformScheduler, None))
register_scheduler("dapo", _dapo)
register_scheduler("mopps", _baseline(MoppsScheduler, MoppsConfig()))
register_scheduler("greso", _baseline(GresoScheduler, GresoConfig()))
register_scheduler("dps", _baseline(DpsScheduler, DpsConfig()))
register_scheduler("dump", _baseline(DumpScheduler, DumpConfig()))
