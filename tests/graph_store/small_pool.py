"""A small, varied pool for graph tests, built in memory from a seed (not the pool generator).

Each environment manages one kind of record with its own tools; each task is a short
sequence of tool calls (find / list / create / update / delete) with checks over the
final state. Abstracts are left out, so the builder extracts them from the reference
solutions.
"""

from __future__ import annotations

import random

from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall

DOMAINS = ("book", "patient", "order", "flight", "ticket", "invoice", "room", "course")
VERBS = ("find", "list", "create", "update", "delete", "validate")
ADJECTIVES = ("urgent", "late", "new", "blue", "quiet", "shared", "premium", "old")


def _tool(name: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the system",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }


def _task(rng: random.Random, env_id: str, noun: str, n: int) -> Task:
    verbs = rng.sample(VERBS, rng.randint(1, 4))
    ident = f"{noun[:2].upper()}{rng.randint(100, 999)}"
    calls = [ToolCall(f"{verb}_{noun}", {f"{noun}_id": ident}) for verb in verbs]
    adjective = rng.choice(ADJECTIVES)
    field = rng.choice(("status", "owner", "count", "price", "note"))
    value = rng.choice(('"closed"', "3", "True", '"Ann"', "2.5"))
    checks = [
        Check(
            f"the {adjective} {noun} {ident} has {field} {value}",
            f"def check_func(final_state):\n"
            f"    return final_state['{noun}s']['{ident}']['{field}'] == {value}",
        )
        for _ in range(rng.randint(1, 2))
    ]
    return Task(
        task_id=f"{env_id}-t{n:02d}",
        env_id=env_id,
        env_class_name=f"{noun.title()}System",
        init_config={f"{noun}s": {ident: {field: None, "tag": adjective}}},
        task=f"Please {' then '.join(verbs)} the {adjective} {noun} {ident} and set its {field}.",
        checklist_with_func=checks,
        reference_solution=calls,
    )


def small_pool(n_envs: int = 4, tasks_per_env: int = 8, seed: int = 0) -> Pool:
    """``n_envs`` environments (one record kind each) with ``tasks_per_env`` tasks each."""
    rng = random.Random(seed)
    envs, tasks = {}, []
    for e in range(n_envs):
        noun = DOMAINS[e % len(DOMAINS)]
        env_id = f"env{e}-{noun}"
        envs[env_id] = Environment(
            env_id=env_id,
            env_class_code=f"class {noun.title()}System:\n    pass\n",
            tools=[_tool(f"{verb}_{noun}") for verb in VERBS],
        )
        tasks.extend(_task(rng, env_id, noun, n) for n in range(tasks_per_env))
    return Pool(envs, tasks)


def sub_pool(pool: Pool, env_ids: set[str]) -> Pool:
    """The environments ``env_ids`` of ``pool`` and their tasks."""
    return Pool(
        {e: env for e, env in pool.envs.items() if e in env_ids},
        [t for t in pool.tasks if t.env_id in env_ids],
    )
