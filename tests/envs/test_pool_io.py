"""Loading, validating and saving pools in the EnvScaler layout."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.pool_io import load_pool, save_pool
from envsched_gnn.envs.pool_parse import PoolError
from tests.envs.handmade_pool import handmade_pool, write_handmade_pool


def _raw(directory: Path) -> tuple[dict, list]:
    return (
        json.loads((directory / "envs.json").read_text()),
        json.loads((directory / "tasks.json").read_text()),
    )


def _write(directory: Path, envs: object, tasks: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "envs.json").write_text(json.dumps(envs))
    (directory / "tasks.json").write_text(json.dumps(tasks))
    return directory


def _digests(directory: Path) -> dict[str, tuple[str, int]]:
    return {
        path.name: (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(directory.iterdir())
    }


def test_handmade_pool_loads_as_written_and_loading_modifies_nothing(tmp_path):
    directory = write_handmade_pool(tmp_path / "pool")
    before = _digests(directory)
    pool = load_pool(directory)
    assert _digests(directory) == before
    expected = handmade_pool()
    assert pool.envs == expected.envs
    assert pool.tasks == expected.tasks
    assert [task.task_id for task in pool.split("test")] == ["library-gated", "clinic-cancel"]


def test_save_then_load_round_trips_with_plain_objects(tmp_path):
    pool = handmade_pool()
    save_pool(pool, tmp_path / "saved")
    envs, tasks = _raw(tmp_path / "saved")
    assert isinstance(envs["clinic"]["tools"], list)
    assert all(isinstance(task["init_config"], dict) for task in tasks)
    again = load_pool(tmp_path / "saved")
    assert (again.envs, again.tasks) == (pool.envs, pool.tasks)
    assert sorted(path.name for path in (tmp_path / "saved").iterdir()) == [
        "envs.json",
        "tasks.json",
    ]


def test_jsonl_tasks_integer_ids_and_optional_fields(tmp_path):
    envs, tasks = _raw(write_handmade_pool(tmp_path / "source"))
    envs = {"3": envs["library"]}
    envs["3"]["constraints_rules"] = ["No loans to inactive members.", "At most 2 loans."]
    library_tasks = [task for task in tasks if task["env_id"] == "library"]
    for number, task in enumerate(library_tasks):
        task["env_id"] = 3
        task["task_id"] = 100 + number
    for name in ("reference_solution", "abstract", "split"):
        del library_tasks[0][name]
    library_tasks[1]["reference_solution"][0]["arguments"] = json.dumps({"book_id": "B2"})
    directory = tmp_path / "jsonl"
    directory.mkdir()
    (directory / "envs.json").write_text(json.dumps(envs))
    lines = [json.dumps(task) for task in library_tasks]
    (directory / "tasks.jsonl").write_text("\n".join(lines[:1] + [""] + lines[1:]) + "\n")
    pool = load_pool(directory)
    assert list(pool.envs) == ["3"]
    assert (
        pool.envs["3"].constraints_rules == "- No loans to inactive members.\n- At most 2 loans.\n"
    )
    assert [task.task_id for task in pool.tasks] == ["100", "101", "102"]
    assert {task.env_id for task in pool.tasks} == {"3"}
    first = pool.task("100")
    assert (first.reference_solution, first.abstract, first.split) == (None, None, "train")
    assert pool.task("101").reference_solution[0].arguments == {"book_id": "B2"}


Mutation = Callable[[dict, list], None]


def _set(target: str, index_or_key, field: str, value) -> Mutation:
    def mutate(envs: dict, tasks: list) -> None:
        container = envs if target == "env" else tasks
        container[index_or_key][field] = value

    return mutate


def _delete(index: int, field: str) -> Mutation:
    def mutate(envs: dict, tasks: list) -> None:
        del tasks[index][field]

    return mutate


def _check_source(index: int, source: str) -> Mutation:
    def mutate(envs: dict, tasks: list) -> None:
        tasks[index]["checklist_with_func"][1]["check_func"] = source

    return mutate


def _duplicate(envs: dict, tasks: list) -> None:
    tasks[4]["task_id"] = tasks[1]["task_id"]


def _delete_env(envs: dict, tasks: list) -> None:
    del envs["library"]["tools"]


TASK_FIELDS = ("task_id", "env_id", "env_class_name", "init_config", "task", "checklist_with_func")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        *[
            (_delete(2, name), f"task #2 ('library-gated'): missing field {name!r}")
            for name in TASK_FIELDS
            if name != "task_id"
        ],
        (_delete(2, "task_id"), "task #2: field 'task_id' must be a non-empty string"),
        (_duplicate, "task #4 ('library-swap'): duplicate task_id (first at task #1)"),
        (_set("task", 0, "env_id", "bank"), "field 'env_id' names unknown environment 'bank'"),
        (_set("task", 0, "env_id", True), "field 'env_id' must be a non-empty string"),
        (
            _set("task", 3, "env_class_name", "Clinic"),
            "task #3 ('clinic-book'): field 'env_class_name' is 'Clinic', which the code of "
            "environment 'clinic' does not define (classes: ClinicScheduler)",
        ),
        (
            _check_source(1, "def check(final_state):\n    return True\n"),
            "task #1 ('library-swap'): field 'checklist_with_func'[1]: field 'check_func' "
            "does not define check_func(final_state)",
        ),
        (
            _check_source(1, "def check_func(final_state)\n    return True\n"),
            "field 'check_func' has a Python syntax error at line 1",
        ),
        (
            _set("task", 5, "checklist_with_func", []),
            "task #5 ('clinic-cancel'): field 'checklist_with_func': must be a non-empty list",
        ),
        (
            _set("task", 1, "init_config", "{'members': 1}"),
            "task #1 ('library-swap'): field 'init_config': a string that is not valid JSON",
        ),
        (
            _set("task", 0, "init_config", [1, 2]),
            "field 'init_config': expected an object or a JSON string of one, got list",
        ),
        (_set("task", 0, "task", ""), "field 'task' must be a non-empty instruction string"),
        (_set("task", 0, "split", "dev"), "field 'split' must be one of ('train', 'test')"),
        (_set("task", 0, "abstract", 3), "field 'abstract' must be a string"),
        (
            _set("task", 0, "reference_solution", [{"name": "burn_books", "arguments": {}}]),
            "field 'reference_solution'[0]: calls 'burn_books', not a tool of the environment",
        ),
        (
            _set("task", 0, "reference_solution", [{"name": "find_member", "arguments": "[1]"}]),
            "field 'reference_solution'[0]: field 'arguments': expected an object",
        ),
        (_delete_env, "environment 'library': field 'tools': missing"),
        (_set("env", "clinic", "tools", "[{"), "environment 'clinic': field 'tools': a string"),
        (
            _set("env", "clinic", "tools", [{"function": {}}]),
            "environment 'clinic': field 'tools': tool #0 has no 'name'",
        ),
        (
            _set("env", "library", "env_class_code", "class LibrarySystem(:\n    pass\n"),
            "environment 'library': field 'env_class_code': Python syntax error at line 1",
        ),
        (
            _set("env", "library", "env_class_code", ""),
            "environment 'library': field 'env_class_code' must be non-empty Python source",
        ),
        (_set("env", "library", "env_id", "books"), "field 'env_id' is 'books', but its key"),
        (_set("env", "library", "constraints_rules", 5), "field 'constraints_rules' must be a"),
    ],
)
def test_every_defect_names_file_task_or_environment_and_field(tmp_path, mutate, expected):
    envs, tasks = _raw(write_handmade_pool(tmp_path / "source"))
    mutate(envs, tasks)
    directory = _write(tmp_path / "bad", envs, tasks)
    before = _digests(directory)
    with pytest.raises(PoolError) as caught:
        load_pool(directory)
    assert _digests(directory) == before
    matching = [error for error in caught.value.errors if expected in error]
    assert matching, caught.value.errors
    assert matching[0].startswith((str(directory / "envs.json"), str(directory / "tasks.json")))


def test_all_defects_are_reported_together(tmp_path):
    envs, tasks = _raw(write_handmade_pool(tmp_path / "source"))
    tasks[0]["split"] = "dev"
    tasks[3]["checklist_with_func"] = []
    envs["library"]["env_class_code"] = "class Library(:"
    with pytest.raises(PoolError) as caught:
        load_pool(_write(tmp_path / "bad", envs, tasks))
    errors = caught.value.errors
    assert len(errors) == 6  # the library's code, its three tasks, the split, the checklist
    assert "task #2 ('library-gated'): its environment 'library' has defects" in errors[4]
    assert "Python syntax error" in str(caught.value)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"envs.json": "{", "tasks.json": "[]"}, "envs.json: invalid JSON at line 1 column 2"),
        ({"envs.json": "[]", "tasks.json": "[]"}, "expected an object keyed by env_id, got list"),
        ({"envs.json": "{}", "tasks.json": "{}"}, "tasks.json: expected a list of tasks"),
        ({"envs.json": "{}", "tasks.jsonl": "{}\n{oops\n"}, "tasks.jsonl: line 2: invalid JSON"),
        ({"envs.json": '{"a": 1}', "tasks.json": "[]"}, "environment 'a': expected an object"),
        ({"envs.json": "{}", "tasks.json": "[7]"}, "tasks.json: task #0: expected an object"),
        ({"envs.json": "{}", "tasks.json": "[]", "tasks.jsonl": ""}, "holds both tasks.json"),
        ({"tasks.json": "[]"}, "envs.json: missing"),
        ({"envs.json": "{}"}, "tasks.json: missing"),
    ],
)
def test_file_level_defects(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(PoolError, match=expected.replace("(", r"\(")):
        load_pool(tmp_path)


def test_not_a_folder(tmp_path):
    with pytest.raises(PoolError, match="not a folder"):
        load_pool(tmp_path / "nowhere")


def test_save_refuses_an_invalid_pool_and_writes_nothing(tmp_path):
    pool = handmade_pool()
    orphan = dataclasses.replace(pool.tasks[0], task_id="orphan", env_id="bank")
    with pytest.raises(PoolError, match="unknown environment 'bank'"):
        save_pool(Pool(envs=pool.envs, tasks=[*pool.tasks, orphan]), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_save_refuses_a_folder_with_a_jsonl_task_file(tmp_path):
    (tmp_path / "tasks.jsonl").write_text("")
    with pytest.raises(PoolError, match="two task files"):
        save_pool(handmade_pool(), tmp_path)
    assert not (tmp_path / "tasks.json").exists()
