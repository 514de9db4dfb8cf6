"""The hidden structure of generated tasks, held against the generator's own operations."""

import random

import pytest

from envsched_gnn.envs.generator.domains import DOMAINS
from envsched_gnn.envs.generator.structure import (
    StructureError,
    check_operations,
    task_structure,
)
from envsched_gnn.envs.generator.tasks import (
    CALL_BANDS,
    build_environment,
    compose_steps,
    compose_task,
    generate_pool,
)
from envsched_gnn.envs.generator.tool_names import tool_names
from envsched_gnn.envs.pool import ToolCall


@pytest.mark.parametrize("seed", [0, 1])
def test_parse_recovers_the_generators_operations_and_check_owners(seed):
    seen = set()
    for domain in DOMAINS:
        env = build_environment(domain)
        tools = tool_names(domain)
        role_of = {name: role for role, name in vars(tools).items() if name}
        for index in range(12):
            band = CALL_BANDS[index % 3]
            rng_seed = f"{seed}:{domain.key}:{index}"
            _, named = compose_steps(domain, random.Random(rng_seed), band)
            task = compose_task(domain, env, random.Random(rng_seed), band, f"t{index}")
            operations = task_structure(task, env)
            assert [op.kind for op in operations] == [name for name, _ in named]
            for op, (_, step) in zip(operations, named, strict=True):
                assert op.calls == len(step.calls)
                assert op.change_checks == len(step.checks)
                assert op.distractors <= len(step.distractors)
                last = step.calls[-1].name
                expected_variant = {
                    "state_gate": "start" if last == tools.forward else "done",
                    "validation_gate": "valid" if last == tools.forward else "invalid",
                    "eligibility_gate": "eligible" if last == tools.create else "ineligible",
                    "eligibility_by_name": "eligible" if last == tools.create else "ineligible",
                    "select_from_list": role_of[last],
                }.get(op.kind, "")
                assert op.variant == expected_variant
                if op.kind == "select_from_list":
                    assert op.list_siblings == len(step.distractors)
                seen.add((op.kind, op.variant))
            owners = check_operations(operations)
            for check, owner in zip(task.checklist_with_func, owners, strict=True):
                step = named[owner][1]
                assert check in step.checks or check in step.distractors
    kinds = {kind for kind, _ in seen}
    assert len(kinds) == 14  # every operation of the generator occurs and parses
    assert {("eligibility_gate", "eligible"), ("eligibility_gate", "ineligible")} <= seen
    assert {("state_gate", "start"), ("state_gate", "done")} <= seen


def test_the_generated_pool_parses_whole():
    pool = generate_pool(n_envs=51, tasks_per_env=20, seed=3)
    for task in pool.tasks:
        operations = task_structure(task, pool.envs[task.env_id])
        assert sum(op.calls for op in operations) == len(task.reference_solution)
        assert len(check_operations(operations)) == len(task.checklist_with_func)


def test_tasks_outside_the_grammar_are_clear_errors():
    pool = generate_pool(n_envs=2, tasks_per_env=2, seed=0, test_per_env=0)
    task = pool.tasks[0]
    env = pool.envs[task.env_id]
    odd = type(task)(**{**vars(task), "reference_solution": [ToolCall("no_such_tool", {})]})
    with pytest.raises(StructureError, match="call 1 \\(no_such_tool\\) starts no generator"):
        task_structure(odd, env)
    other = type(env)(**{**vars(env), "env_class_code": "class X:\n    pass\n"})
    with pytest.raises(StructureError, match="not a generated domain"):
        task_structure(task, other)
    fewer = type(task)(**{**vars(task), "checklist_with_func": task.checklist_with_func[:-1]})
    with pytest.raises(StructureError, match="checks, its checklist has"):
        task_structure(fewer, env)
