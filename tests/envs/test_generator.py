"""The built-in pool generator: domains, determinism, splits, and executable references."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from importlib import resources

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.abstract import (
    abstract_from_calls,
    operation_categories,
    tool_categories,
)
from envsched_gnn.envs.generator import (
    GeneratorError,
    generate_extra_tasks,
    generate_pool,
    write_pool_files,
)
from envsched_gnn.envs.generator.domains import DOMAINS, DomainDataError, load_domains
from envsched_gnn.envs.generator.tasks import generate_replicated_pool
from envsched_gnn.envs.generator.tool_names import TOOLS_IN_CLASS_ORDER, ToolNames, tool_names
from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.envs.pool_io import load_pool, task_to_dict

KIND_CATEGORIES = {
    "get": "lookup",
    "find_owner": "identifier resolution",
    "find_assignee": "identifier resolution",
    "list": "list/filter",
    "create": "create",
    "update": "update",
    "update_amount": "update",
    "update_owner": "update",
    "forward": "status transition",
    "reassign": "relation replacement",
    "check": "eligibility check",
    "hold": "update",
    "validate": "validate",
}


@pytest.fixture(scope="module")
def small_pool() -> Pool:
    return generate_pool(n_envs=51, tasks_per_env=3, seed=0, test_per_env=1)


class InProcessEpisode:
    """Test-only executor: instantiate as EnvScaler does, call tools, score the checks."""

    def __init__(self, pool: Pool, task: Task) -> None:
        namespace: dict = {}
        exec(pool.envs[task.env_id].env_class_code, namespace)
        self.task = task
        self.initial = copy.deepcopy(task.init_config)
        self.env = namespace[task.env_class_name](copy.deepcopy(task.init_config))
        for key, value in copy.deepcopy(task.init_config).items():
            setattr(self.env, key, value)

    def call(self, call: ToolCall) -> dict:
        return getattr(self.env, call.name)(**call.arguments)

    def reward(self) -> float:
        final = {k: v for k, v in vars(self.env).items() if not k.startswith("__")}
        passed = 0
        for check in self.task.checklist_with_func:
            namespace = {"initial_state": copy.deepcopy(self.initial)}
            exec(check.check_func, namespace)
            passed += namespace["check_func"](copy.deepcopy(final)) is True
        return passed / len(self.task.checklist_with_func)


def _replay(pool: Pool, task: Task, calls: list[ToolCall]) -> tuple[float, list[dict]]:
    episode = InProcessEpisode(pool, task)
    results = [episode.call(call) for call in calls]
    return episode.reward(), results


def test_51_distinct_domains_with_distinct_structure():
    assert len(DOMAINS) == 51
    assert len({d.key for d in DOMAINS}) == 51
    assert len({d.class_name for d in DOMAINS}) == 51
    tool_sets = {frozenset(n for n in vars(tool_names(d)).values() if n) for d in DOMAINS}
    assert len(tool_sets) == 51
    structures = {
        (
            d.assignee is not None,
            d.assignee_rule,
            d.eligibility.kind if d.eligibility else "",
            d.validation,
            d.delete_style,
            d.delete_from_done,
            d.list_tool,
            d.amount_tool,
            d.owner_tool,
        )
        for d in DOMAINS
    }
    assert len(structures) >= 20


def test_every_tool_role_has_its_place_in_the_class():
    roles = [field.name for field in dataclasses.fields(ToolNames)]
    assert sorted(TOOLS_IN_CLASS_ORDER) == sorted(roles)


def _packaged_domains() -> list[dict]:
    return json.loads(
        resources.files("envsched_gnn.envs.generator").joinpath("domains.json").read_text()
    )


def test_domains_are_the_packaged_data():
    rows = _packaged_domains()
    assert load_domains(json.dumps(rows)) == DOMAINS
    assert [row["key"] for row in rows] == [d.key for d in DOMAINS]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda row: row.pop("summary"), r"\[3\]: missing fields \['summary'\]"),
        (lambda row: row.update(colour="red"), r"unknown fields \['colour'\]"),
        (lambda row: row.update(delete_style="burn"), r"\(library_holds\)\.delete_style"),
        (lambda row: row["owner"].pop("prefix"), r"library_holds\)\.owner: missing"),
        (lambda row: row.update(eligibility={"kind": "most"}), r"eligibility\.kind"),
        (lambda row: row.update(assignee=None), r"assignee_rule: 'available' does not fit"),
        (lambda row: row.update(statuses=["a", "b"]), r"statuses: expected three statuses"),
    ],
)
def test_bad_domain_data_names_the_domain_and_field(edit, message):
    rows = _packaged_domains()
    edit(rows[3])
    with pytest.raises(DomainDataError, match=message):
        load_domains(json.dumps(rows))


def test_a_domain_key_twice_is_an_error():
    rows = _packaged_domains()
    with pytest.raises(DomainDataError, match="appears twice"):
        load_domains(json.dumps([*rows, rows[0]]))


def test_environments_have_2_to_4_entities_and_6_to_12_classified_tools(small_pool):
    for domain in DOMAINS:
        env = small_pool.envs[domain.key]
        assert 6 <= len(env.tools) <= 12, domain.key
        entities = [domain.owner, domain.record] + ([domain.assignee] if domain.assignee else [])
        assert 2 <= len(entities) <= 4
        names = tool_names(domain)
        categories = tool_categories(env)
        # a closing tool that removes the record deletes it; one that marks it moves its status
        closing = "delete" if domain.delete_style == "remove" else "status transition"
        for kind, name in vars(names).items():
            if name:
                expected = closing if kind == "delete" else KIND_CATEGORIES[kind]
                assert categories[name] == expected, (domain.key, name)
        assert {"lookup", "identifier resolution", "create", "update", closing} <= set(
            categories.values()
        )
        namespace: dict = {}
        exec(env.env_class_code, namespace)
        cls = namespace[domain.class_name]
        assert all(callable(getattr(cls, name)) for name in env.tool_names)
        assert domain.summary in env.environment_introduction


def test_every_reference_scores_one_and_doing_nothing_less(small_pool):
    bands = Counter()
    for task in small_pool.tasks:
        reward, results = _replay(small_pool, task, task.reference_solution)
        assert reward == 1.0, (task.task_id, results)
        assert all(result["success"] for result in results), task.task_id
        assert all(len(json.dumps(result)) < 300 for result in results), task.task_id
        empty, _ = _replay(small_pool, task, [])
        assert empty < 1.0, task.task_id
        assert 2 <= len(task.checklist_with_func) <= 16
        assert 1 <= len(task.reference_solution) <= 6
        bands[(len(task.reference_solution) + 1) // 2] += 1
    assert set(bands) == {1, 2, 3}
    assert max(bands.values()) - min(bands.values()) <= len(small_pool.tasks) // 6


def test_abstracts_come_from_the_extractor_and_recur_across_domains(small_pool):
    envs_of = {}
    for task in small_pool.tasks:
        env = small_pool.envs[task.env_id]
        assert task.abstract == abstract_from_calls(task.reference_solution, env, task.task)
        categories = operation_categories(task.abstract)
        assert categories == [tool_categories(env)[call.name] for call in task.reference_solution]
        envs_of.setdefault(task.abstract, set()).add(task.env_id)
    assert max(len(envs) for envs in envs_of.values()) >= 5


def test_deterministic_per_seed():
    first = generate_pool(n_envs=3, tasks_per_env=4, seed=7, test_per_env=1)
    second = generate_pool(n_envs=3, tasks_per_env=4, seed=7, test_per_env=1)
    other = generate_pool(n_envs=3, tasks_per_env=4, seed=8, test_per_env=1)
    dump = [task_to_dict(task) for task in first.tasks]
    assert dump == [task_to_dict(task) for task in second.tasks]
    assert dump != [task_to_dict(task) for task in other.tasks]
    assert first.envs == second.envs


def test_counts_splits_and_held_out_environments():
    pool = generate_pool(n_envs=6, tasks_per_env=5, seed=1, test_per_env=2, holdout_envs=2)
    assert len(pool.envs) == 6 and len(pool.tasks) == 30
    assert len({task.task_id for task in pool.tasks}) == 30
    test_by_env = Counter(task.env_id for task in pool.split("test"))
    assert sorted(test_by_env.values()) == [2, 2, 2, 2, 5, 5]
    assert len(pool.split("train")) == 12


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n_envs=52), "51 distinct domains"),
        (dict(n_envs=0), "envs=0"),
        (dict(tasks_per_env=0), "tasks_per_env=0"),
        (dict(tasks_per_env=5, test_per_env=6), "test_per_env=6"),
        (dict(n_envs=3, tasks_per_env=2, test_per_env=0, holdout_envs=3), "holdout_envs=3"),
    ],
)
def test_impossible_arguments_are_errors(kwargs, message):
    with pytest.raises(GeneratorError, match=message):
        generate_pool(**kwargs)


def test_extra_tasks_are_fresh_and_executable(small_pool):
    extra = generate_extra_tasks(small_pool, per_env=2, seed=3)
    assert len(extra) == 2 * 51
    pool_ids = {task.task_id for task in small_pool.tasks}
    assert not pool_ids & {task.task_id for task in extra}
    assert {task.split for task in extra} == {"train"}
    pool_texts = {task.task for task in small_pool.tasks}
    assert not pool_texts & {task.task for task in extra}
    for task in extra[::5]:
        assert _replay(small_pool, task, task.reference_solution)[0] == 1.0
    again = generate_extra_tasks(small_pool, per_env=2, seed=3)
    assert [task_to_dict(t) for t in again] == [task_to_dict(t) for t in extra]
    foreign = Pool(envs={"x": small_pool.envs["blood_donation"]}, tasks=[])
    with pytest.raises(GeneratorError, match="'x'"):
        generate_extra_tasks(foreign, per_env=1, seed=0)


def test_replicated_pool_repeats_domains_with_fresh_executable_tasks():
    pool = generate_replicated_pool(53, 2, seed=1)  # two domains get a second replica
    assert len(pool.envs) == 53 and len(pool.tasks) == 106
    assert len({t.task_id for t in pool.tasks}) == 106
    first, second = pool.envs[f"{DOMAINS[0].key}-r0000"], pool.envs[f"{DOMAINS[0].key}-r0001"]
    assert first.env_class_code == second.env_class_code
    replicas = [pool.tasks_of(env_id) for env_id in (first.env_id, second.env_id)]
    assert {t.task for t in replicas[0]}.isdisjoint({t.task for t in replicas[1]})
    for task in pool.tasks[::17]:
        assert _replay(pool, task, task.reference_solution)[0] == 1.0
    with pytest.raises(GeneratorError):
        generate_replicated_pool(0, 2)


def test_written_pool_loads_back(tmp_path):
    pool = generate_pool(n_envs=2, tasks_per_env=3, seed=0, test_per_env=1)
    write_pool_files(pool, tmp_path)
    loaded = load_pool(tmp_path)
    assert [task_to_dict(t) for t in loaded.tasks] == [task_to_dict(t) for t in pool.tasks]
    assert loaded.envs == pool.envs


def _cli(argv: list[str]) -> int:
    """Runs ``pool generate`` as the command line does."""
    return main(argv)


def test_cli_generate_writes_pool_and_rejects_too_many_envs(tmp_path, capsys):
    out = tmp_path / "pool"
    code = _cli(
        ["pool", "generate", "--envs", "2", "--tasks-per-env", "4", "--test-per-env", "1"]
        + ["--holdout-envs", "1", "--seed", "5", "--out", str(out)]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["envs"] == 2 and summary["tasks"] == 8 and summary["test"] == 5
    assert len(load_pool(out).tasks) == 8
    assert _cli(["pool", "generate", "--envs", "60", "--out", str(tmp_path / "no")]) == 2
    assert "51 distinct domains" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_max_calls_caps_references_and_keeps_the_counts(small_pool, tmp_path):
    capped = generate_pool(n_envs=3, tasks_per_env=12, seed=2, test_per_env=2, max_calls=3)
    lengths = Counter(len(task.reference_solution) for task in capped.tasks)
    assert len(capped.tasks) == 36 and len(capped.split("test")) == 6
    assert set(lengths) == {1, 2, 3} and lengths[3] == 18
    single = generate_pool(n_envs=2, tasks_per_env=5, seed=2, test_per_env=1, max_calls=1)
    assert {len(task.reference_solution) for task in single.tasks} == {1}
    full = generate_pool(n_envs=2, tasks_per_env=6, seed=2, test_per_env=1)
    six = generate_pool(n_envs=2, tasks_per_env=6, seed=2, test_per_env=1, max_calls=6)
    assert [task_to_dict(t) for t in six.tasks] == [task_to_dict(t) for t in full.tasks]
    extra = generate_extra_tasks(small_pool, per_env=2, seed=4, max_calls=2)
    assert {len(task.reference_solution) for task in extra} == {1, 2}
    for task in extra[::9]:
        assert _replay(small_pool, task, task.reference_solution)[0] == 1.0
    with pytest.raises(GeneratorError, match="max_calls=0"):
        generate_pool(n_envs=1, tasks_per_env=2, test_per_env=0, max_calls=0)
    out = tmp_path / "pool"
    assert _cli(["pool", "generate", "--envs", "2", "--max-calls", "2", "--out", str(out)]) == 0
    assert max(len(task.reference_solution) for task in load_pool(out).tasks) == 2


def test_a_pool_of_chosen_operations_holds_only_them():
    from envsched_gnn.envs.generator.structure import task_structure

    allowed = ("update", "delete", "state_gate")
    pool = generate_pool(4, 12, seed=1, test_per_env=2, max_calls=2, operations=allowed)
    kinds = {op.kind for task in pool.tasks for op in task_structure(task, pool.envs[task.env_id])}
    assert kinds == set(allowed)
    extra = generate_extra_tasks(pool, 6, seed=2, max_calls=2, operations=("forward", "create"))
    assert {op.kind for task in extra for op in task_structure(task, pool.envs[task.env_id])} == {
        "forward",
        "create",
    }
    # no filter: the same tasks as before the option existed
    assert generate_pool(4, 12, seed=1, test_per_env=2, max_calls=2, operations=None).tasks == (
        generate_pool(4, 12, seed=1, test_per_env=2, max_calls=2).tasks
    )


@pytest.mark.parametrize(
    ("operations", "message"),
    [(("update", "teleport"), "unknown operation"), (("state_gate",), "include one of")],
)
def test_operations_that_cannot_fill_a_task_are_refused(operations, message):
    with pytest.raises(GeneratorError, match=message):
        generate_pool(2, 4, seed=0, test_per_env=1, operations=operations)
