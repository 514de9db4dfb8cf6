"""Imperfect solutions of generated tasks: each kind where it applies, and executed for real."""

import random

import pytest

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.envs.generator.mistakes import (
    MISTAKE_KINDS,
    MistakeError,
    applicable_kinds,
    imperfect_solution,
)
from envsched_gnn.envs.generator.structure import task_structure
from envsched_gnn.envs.generator.tasks import generated_domain
from envsched_gnn.envs.generator.tool_names import tool_names
from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.training.sft_data import run_references


@pytest.fixture(scope="module")
def pool() -> Pool:
    return generate_pool(10, 20, seed=3, test_per_env=0, max_calls=2)


def _first(pool: Pool, kind: str, variant: str):
    for task in pool.tasks:
        for op in task_structure(task, pool.envs[task.env_id]):
            if op.kind == kind and op.variant == variant:
                return task
    raise AssertionError(f"no {kind}/{variant} task in the pool")


def test_a_state_gate_done_branch_becomes_a_forward_and_scores_below_1(pool):
    """Hand-checked: the record is already done, so the instruction asks for the category
    update; the wrong branch forwards it (refused: it is not in its start status), so the
    state keeps the old category and the check of the new one fails."""
    task = _first(pool, "state_gate", "done")
    env = pool.envs[task.env_id]
    lookup, update = task.reference_solution
    wrong = imperfect_solution(task, env, "wrong_branch", random.Random(0))
    record_key = next(k for k in update.arguments if k.endswith("_id"))
    assert wrong[0] == lookup
    assert wrong[1].name == tool_names(generated_domain(task.env_id, env)).forward
    assert wrong[1].arguments == {record_key: update.arguments[record_key]}
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        right, mistaken = run_references(
            runtime, [task, type(task)(**{**vars(task), "reference_solution": wrong})]
        )
    assert right.reward == 1.0
    assert mistaken.results[1]["success"] is False
    assert mistaken.reward < 1.0


def test_the_other_branch_takes_the_instructions_values(pool):
    """The start branch's wrong action is the update the instruction gives for ``done``."""
    task = _first(pool, "state_gate", "start")
    env = pool.envs[task.env_id]
    wrong = imperfect_solution(task, env, "wrong_branch", random.Random(0))
    value = next(v for k, v in wrong[1].arguments.items() if not k.endswith("_id"))
    assert f" to {value}." in task.task


def test_every_kind_is_applied_where_it_applies_and_refused_elsewhere(pool):
    seen = set()
    for task in pool.tasks:
        env = pool.envs[task.env_id]
        kinds = applicable_kinds(task, env)
        assert kinds[0] == "stop_early" and set(kinds) <= set(MISTAKE_KINDS)
        for kind in MISTAKE_KINDS:
            if kind not in kinds:
                with pytest.raises(MistakeError):
                    imperfect_solution(task, env, kind, random.Random(0))
                continue
            seen.add(kind)
            calls = imperfect_solution(task, env, kind, random.Random(0))
            reference = task.reference_solution
            assert calls != reference
            if kind == "stop_early":
                assert calls == reference[: len(calls)] and len(calls) < len(reference)
            elif kind == "extra_call":
                assert calls[:-1] == reference and isinstance(calls[-1], ToolCall)
            else:
                assert len(calls) == len(reference)
                changed = [
                    n for n, (a, b) in enumerate(zip(calls, reference, strict=True)) if a != b
                ]
                assert len(changed) == 1
    assert seen == set(MISTAKE_KINDS)


def test_an_unknown_kind_is_refused(pool):
    task = pool.tasks[0]
    with pytest.raises(MistakeError, match="unknown mistake kind"):
        imperfect_solution(task, pool.envs[task.env_id], "typo", random.Random(0))
