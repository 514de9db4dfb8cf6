"""Compose tasks from operations, and generate the built-in pool.

Each task draws a call budget from one of three bands (1-2, 3-4, 5-6 calls, a third of an
environment's tasks each; ``max_calls`` clips them) and fills it with operations on fresh
records of one initial state. Checks are the operations' change checks, then their distractor
checks, at most 16; the abstract is :func:`abstract_from_calls` of the reference. Every draw
comes from ``random.Random(f"{seed}:{env}:{kind}:{index}")``: a task depends only on those.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from envsched_gnn.envs.abstract import abstract_from_calls
from envsched_gnn.envs.generator.codegen import class_source
from envsched_gnn.envs.generator.descriptions import introduction, tool_schemas
from envsched_gnn.envs.generator.domains import DOMAIN_BY_KEY, DOMAINS, Domain
from envsched_gnn.envs.generator.operations import Operations, Step
from envsched_gnn.envs.generator.world import World
from envsched_gnn.envs.pool import Environment, Pool, Task
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.validation import UsageError

CALL_BANDS = ((1, 2), (3, 4), (5, 6))
MAX_CHECKS = 16
MAX_OPERATIONS = 6


class GeneratorError(UsageError, ValueError):
    """Arguments the generator cannot satisfy."""


def build_environment(domain: Domain) -> Environment:
    """The executable environment of a domain."""
    intro = introduction(domain)
    return Environment(
        env_id=domain.key,
        env_class_code=class_source(domain),
        tools=tool_schemas(domain),
        environment_introduction=intro,
        environment_summary=domain.summary,
        constraints_rules=intro.split(" Rules: ", 1)[1],
    )


ALWAYS_AVAILABLE = ("create", "delete", "forward", "update")
"""One-call operations every domain has: an allowed set must hold one, so any budget fills."""


def check_operations_allowed(operations: tuple[str, ...] | None) -> None:
    """:class:`GeneratorError` unless ``operations`` is None or names known operations,
    one of them in :data:`ALWAYS_AVAILABLE`."""
    if operations is None:
        return
    known = {name for domain in DOMAINS for name in _operation_names(domain)}
    unknown = sorted(set(operations) - known)
    if unknown:
        raise GeneratorError(f"unknown operation(s) {unknown}, expected some of {sorted(known)}")
    if not set(operations) & set(ALWAYS_AVAILABLE):
        raise GeneratorError(
            f"operations {sorted(operations)}: include one of {list(ALWAYS_AVAILABLE)}, which "
            "every domain has, so that every call budget can be filled"
        )


def _operation_names(domain: Domain) -> list[str]:
    world = World(domain, random.Random(0))
    return list(Operations(domain, world).available())


def compose_steps(
    domain: Domain,
    rng: random.Random,
    band: tuple[int, int],
    operations_allowed: tuple[str, ...] | None = None,
) -> tuple[World, list[tuple[str, Step]]]:
    """A task's world and its operations (name, step) whose calls fill a budget from ``band``,
    drawn from ``operations_allowed`` (None: every operation of the domain)."""
    world = World(domain, rng)
    world.populate()
    operations = Operations(domain, world).available()
    if operations_allowed is not None:
        operations = {k: v for k, v in operations.items() if k in operations_allowed}
    budget = rng.randint(*band)
    steps: list[tuple[str, Step]] = []
    while budget > 0 and len(steps) < MAX_OPERATIONS:
        fitting = sorted(name for name, (calls, _) in operations.items() if calls <= budget)
        name = rng.choice(fitting)
        calls, build = operations[name]
        steps.append((name, build()))
        budget -= calls
    return world, steps


def compose_task(
    domain: Domain,
    env: Environment,
    rng: random.Random,
    band: tuple[int, int],
    task_id: str,
    operations: tuple[str, ...] | None = None,
) -> Task:
    """One task whose reference needs a number of calls drawn from ``band``, made of
    ``operations`` (None: any)."""
    world, named = compose_steps(domain, rng, band, operations)
    steps = [step for _, step in named]
    checks = [check for step in steps for check in step.checks]
    distractors = [check for step in steps for check in step.distractors]
    checks += distractors[: max(0, MAX_CHECKS - len(checks))]
    reference = [call for step in steps for call in step.calls]
    instruction = " ".join(step.text for step in steps)
    return Task(
        task_id=task_id,
        env_id=domain.key,
        env_class_name=domain.class_name,
        init_config=world.init_config(),
        task=instruction,
        checklist_with_func=checks,
        reference_solution=reference,
        abstract=abstract_from_calls(reference, env, instruction),
    )


def call_bands(max_calls: int | None = None) -> tuple[tuple[int, int], ...]:
    """The call bands, clipped to ``max_calls`` (None: all of ``CALL_BANDS``)."""
    if max_calls is None:
        return CALL_BANDS
    if max_calls < 1:
        raise GeneratorError(f"max_calls={max_calls}: must be at least 1 (or None for 1-6)")
    return tuple((low, min(high, max_calls)) for low, high in CALL_BANDS if low <= max_calls)


def _bands(count: int, rng: random.Random, max_calls: int | None = None) -> list[tuple[int, int]]:
    allowed = call_bands(max_calls)
    bands = [allowed[i % len(allowed)] for i in range(count)]
    rng.shuffle(bands)
    return bands


def _env_tasks(
    domain: Domain,
    env: Environment,
    count: int,
    seed: int,
    kind: str,
    id_stem: str,
    max_calls: int | None = None,
    operations: tuple[str, ...] | None = None,
) -> list[Task]:
    bands = _bands(count, random.Random(f"{seed}:{domain.key}:{kind}:bands"), max_calls)
    return [
        compose_task(
            domain,
            env,
            random.Random(f"{seed}:{domain.key}:{kind}:{index}"),
            band,
            f"{id_stem}-{index:03d}",
            operations,
        )
        for index, band in enumerate(bands)
    ]


def generate_pool(
    n_envs: int = 51,
    tasks_per_env: int = 50,
    seed: int = 0,
    test_per_env: int = 10,
    holdout_envs: int = 0,
    max_calls: int | None = None,
    operations: tuple[str, ...] | None = None,
) -> Pool:
    """The built-in pool: the first ``n_envs`` domains, ``tasks_per_env`` tasks each.

    ``test_per_env`` tasks of each environment (drawn with the seed) get split ``test``;
    ``holdout_envs`` whole environments (drawn with the seed) are ``test`` entirely;
    ``max_calls`` caps the reference solutions' length (None: 1-6 calls; see the module
    docstring); ``operations`` names the generator operations tasks are made of (None: all
    of each domain's; :mod:`~envsched_gnn.envs.generator.operations`).
    """
    call_bands(max_calls)
    check_operations_allowed(operations)
    if seed < 0:
        raise GeneratorError(f"seed={seed}: must be at least 0")
    if not 1 <= n_envs <= len(DOMAINS):
        raise GeneratorError(
            f"envs={n_envs}: the generator has {len(DOMAINS)} distinct domains; "
            f"ask for 1 to {len(DOMAINS)}"
        )
    if tasks_per_env < 1:
        raise GeneratorError(f"tasks_per_env={tasks_per_env}: must be at least 1")
    if not 0 <= test_per_env <= tasks_per_env:
        raise GeneratorError(
            f"test_per_env={test_per_env}: must be between 0 and tasks_per_env={tasks_per_env}"
        )
    if not 0 <= holdout_envs < n_envs:
        raise GeneratorError(
            f"holdout_envs={holdout_envs}: must be between 0 and envs-1={n_envs - 1}"
        )
    domains = DOMAINS[:n_envs]
    held_out = set(random.Random(f"{seed}:holdout").sample([d.key for d in domains], holdout_envs))
    envs: dict[str, Environment] = {}
    tasks: list[Task] = []
    for domain in domains:
        env = build_environment(domain)
        envs[domain.key] = env
        env_tasks = _env_tasks(
            domain, env, tasks_per_env, seed, "pool", domain.key, max_calls, operations
        )
        test = set(
            random.Random(f"{seed}:{domain.key}:test").sample(range(tasks_per_env), test_per_env)
        )
        for index, task in enumerate(env_tasks):
            split = "test" if domain.key in held_out or index in test else "train"
            tasks.append(_with_split(task, split))
    return Pool(envs=envs, tasks=tasks)


def generate_replicated_pool(n_envs: int, tasks_per_env: int = 100, seed: int = 0) -> Pool:
    """A large ``train`` pool for benchmarks: environment ``n`` is replica ``n // 51`` of domain
    ``n % 51`` (id ``<domain>-r<replica>``) with ``tasks_per_env`` fresh tasks (ids
    ``<env>-<index>``, draws from ``random.Random(f"{seed}:{domain}:r<replica>:...")``)."""
    envs: dict[str, Environment] = {}
    tasks: list[Task] = []
    for env, env_tasks in replicated_environments(n_envs, tasks_per_env, seed):
        envs[env.env_id] = env
        tasks += env_tasks
    return Pool(envs=envs, tasks=tasks)


def replicated_environments(
    n_envs: int, tasks_per_env: int = 100, seed: int = 0
) -> Iterator[tuple[Environment, list[Task]]]:
    """The environments of :func:`generate_replicated_pool` and their tasks, one at a time."""
    if n_envs < 1 or tasks_per_env < 1:
        raise GeneratorError(f"n_envs={n_envs}, tasks_per_env={tasks_per_env}: must be >= 1")
    built = {domain.key: build_environment(domain) for domain in DOMAINS}
    for n in range(n_envs):
        yield replicated_environment(n, tasks_per_env, seed, built)


def replicated_environment(
    n: int, tasks_per_env: int = 100, seed: int = 0, built: dict | None = None
) -> tuple[Environment, list[Task]]:
    """Environment ``n`` (from 0) of :func:`replicated_environments` and its tasks, made alone
    (each is a function of ``n`` and ``seed`` only); ``built``: the domains' environments."""
    domain, replica = DOMAINS[n % len(DOMAINS)], n // len(DOMAINS)
    base = built[domain.key] if built else build_environment(domain)
    env_id = f"{domain.key}-r{replica:04d}"
    env = Environment(**{**vars(base), "env_id": env_id})
    made = _env_tasks(domain, env, tasks_per_env, seed, f"r{replica}", env_id)
    return env, [Task(**{**vars(task), "env_id": env_id}) for task in made]


def write_replicated_pool(
    directory: str | Path, n_envs: int, tasks_per_env: int = 100, seed: int = 0
) -> Path:
    """:func:`generate_replicated_pool` written environment by environment (``envs.json`` and
    ``tasks.jsonl``), never held in memory: the pool of a 1M-task benchmark. Files are written
    under temporary names and renamed once complete."""
    from envsched_gnn.envs.pool_io import (
        ENVS_FILE,
        TASKS_JSONL_FILE,
        environment_to_dict,
        task_to_dict,
    )

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    envs: dict[str, dict] = {}
    partial = directory / f".{TASKS_JSONL_FILE}.partial"
    with partial.open("w", encoding="utf-8") as handle:
        for env, env_tasks in replicated_environments(n_envs, tasks_per_env, seed):
            envs[env.env_id] = environment_to_dict(env)
            for task in env_tasks:
                handle.write(json.dumps(task_to_dict(task), ensure_ascii=False) + "\n")
    write_json_atomically(directory / ENVS_FILE, envs, indent=None, ensure_ascii=False)
    partial.replace(directory / TASKS_JSONL_FILE)
    return directory


def _with_split(task: Task, split: str) -> Task:
    return Task(**{**vars(task), "split": split})


def generate_extra_tasks(
    pool: Pool,
    per_env: int,
    seed: int,
    max_calls: int | None = None,
    operations: tuple[str, ...] | None = None,
) -> list[Task]:
    """Fresh ``train`` tasks in the pool's generated environments (new names, ids, values),
    references of at most ``max_calls`` calls (None: 1-6), made of ``operations`` (None: all).

    Task ids are ``<env>-x<seed>-<index>``; environments the generator did not make
    raise :class:`GeneratorError`.
    """
    if per_env < 0:
        raise GeneratorError(f"per_env={per_env}: must be at least 0")
    call_bands(max_calls)
    check_operations_allowed(operations)
    tasks: list[Task] = []
    for env_id, env in pool.envs.items():
        domain = generated_domain(env_id, env)
        if domain is None:
            raise GeneratorError(f"environment {env_id!r} was not made by the built-in generator")
        tasks += _env_tasks(
            domain, env, per_env, seed, f"extra{seed}", f"{env_id}-x{seed}", max_calls, operations
        )
    return tasks


def generated_domain(env_id: str, env: Environment) -> Domain | None:
    """The generator's domain of environment ``env_id``, or None when the generator did not
    make ``env`` under that id."""
    domain = DOMAIN_BY_KEY.get(env_id)
    if domain is None or env.env_class_code != class_source(domain):
        return None
    return domain


def write_pool_files(pool: Pool, directory: str | Path) -> Path:
    """Write ``envs.json`` and ``tasks.json`` (validated first, written atomically)."""
    from envsched_gnn.envs.pool_io import save_pool

    return save_pool(pool, directory)
