"""``pool import-envscaler`` on a small hand-written sample in EnvScaler's released format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.envscaler import EnvScalerImportError, import_envscaler
from envsched_gnn.envs.pool import ToolCall
from envsched_gnn.envs.pool_io import load_pool
from envsched_gnn.envs.pool_parse import PoolError
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig

CINEMA_CODE = '''
from typing import Dict, TypedDict


class ScreeningInfo(TypedDict):
    movie: str
    seats_left: int


class CinemaTicketing:
    def __init__(self, init_config: dict):
        """Screenings and ticket bookings of one cinema."""
        self.screenings: Dict[str, ScreeningInfo] = {}
        self.bookings: Dict[str, dict] = {}

    def list_screenings(self, movie: str) -> dict:
        found = {k: v for k, v in self.screenings.items() if v["movie"] == movie}
        return {"success": True, "data": found}

    def book_ticket(self, screening_id: str, customer: str) -> dict:
        screening = self.screenings.get(screening_id)
        if screening is None or screening["seats_left"] < 1:
            return {"success": False, "error": "no seat"}
        screening["seats_left"] -= 1
        self.bookings[f"K{len(self.bookings) + 1}"] = {"screening": screening_id, "who": customer}
        return {"success": True, "message": "booked"}
'''

COUNTER_CODE = """
class TallyCounter:
    def __init__(self):
        self.count = 0

    def increment(self) -> dict:
        self.count += 1
        return {"success": True, "message": "ok"}
"""


def _tools(*names: str) -> str:
    return json.dumps([{"type": "function", "function": {"name": name}} for name in names])


ENV_ITEMS = [
    {
        "env_class_name": "CinemaTicketing",
        "env_class_code": CINEMA_CODE,
        "tools": _tools("list_screenings", "book_ticket"),
        "environment_introduction": "A cinema's screenings and bookings.",
        "constraints_rules": ["A screening without seats cannot be booked."],
    },
    {
        "env_class_code": COUNTER_CODE,
        "tools": _tools("increment"),
        "environment_summary": "Counts.",
    },
]

CINEMA_INIT = {
    "screenings": {
        "S1": {"movie": "Alien", "seats_left": 1},
        "S2": {"movie": "Heat", "seats_left": 0},
    }
}


def _check(body: str) -> dict:
    return {"check_item": body, "check_func": f"def check_func(final_state):\n    return {body}"}


TASK_ITEMS = [
    {
        "task_id": "cinema_0",
        "env_id": 0,
        "env_class_name": "CinemaTicketing",
        "init_config": json.dumps(CINEMA_INIT),
        "task": "Book a ticket for Alien for Kim.",
        "checklist_with_func": [
            _check("final_state['screenings']['S1']['seats_left'] == 0"),
            _check("len(final_state['bookings']) == len(initial_state['bookings']) + 1"),
        ],
    },
    {
        "task_id": "counter_0",
        "env_id": 1,
        "init_config": json.dumps({"count": 2}),
        "task": "Increment the counter twice.",
        "checklist_with_func": json.dumps([_check("final_state['count'] == 4")]),
    },
]


def _write_sample(folder: Path, tasks_name: str = "envscaler_rl_scenario_metadata.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "191_env_metadata.json").write_text(json.dumps(ENV_ITEMS))
    if tasks_name.endswith(".jsonl"):
        (folder / tasks_name).write_text("\n".join(json.dumps(item) for item in TASK_ITEMS))
    else:
        (folder / tasks_name).write_text(json.dumps(TASK_ITEMS))
    (folder / "README.md").write_text("released data")
    return folder


def test_folder_import_gives_a_pool_that_loads_and_runs(tmp_path):
    pool = import_envscaler([_write_sample(tmp_path / "release")], tmp_path / "pool")
    loaded = load_pool(tmp_path / "pool")
    assert (loaded.envs, loaded.tasks) == (pool.envs, pool.tasks)
    assert list(pool.envs) == ["0", "1"]
    assert pool.envs["0"].tool_names == ["list_screenings", "book_ticket"]
    assert pool.envs["0"].constraints_rules == "- A screening without seats cannot be booked.\n"
    assert pool.envs["1"].environment_summary == "Counts."
    cinema, counter = pool.tasks
    assert (cinema.env_id, cinema.init_config) == ("0", CINEMA_INIT)
    assert counter.env_class_name == "TallyCounter"  # the only class of its environment's code
    assert counter.split == "train"
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        solved = runtime.replay(
            [
                ("cinema_0", [ToolCall("book_ticket", {"screening_id": "S1", "customer": "Kim"})]),
                ("counter_0", [ToolCall("increment"), ToolCall("increment")]),
            ]
        )
        empty = runtime.replay([("cinema_0", []), ("counter_0", [])])
    assert [score.reward for score in solved] == [1.0, 1.0]
    assert [score.reward for score in empty] == [0.0, 0.0]


def test_two_files_in_either_order_and_jsonl(tmp_path):
    release = _write_sample(tmp_path / "release", tasks_name="scenarios.jsonl")
    envs_file, tasks_file = release / "191_env_metadata.json", release / "scenarios.jsonl"
    pool = import_envscaler([tasks_file, envs_file], tmp_path / "pool")
    assert [task.task_id for task in pool.tasks] == ["cinema_0", "counter_0"]


def test_command_prints_counts(tmp_path, capsys):
    release = _write_sample(tmp_path / "release")
    out = tmp_path / "pool"
    assert main(["pool", "import-envscaler", str(release), "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == {"envs": 2, "tasks": 2, "out": str(out)}
    assert main(["pool", "import-envscaler", str(release), "--out", str(out)]) == 1
    assert "not an empty folder" in capsys.readouterr().err


def test_defective_scenarios_are_named_by_source_file_task_and_field(tmp_path):
    release = _write_sample(tmp_path / "release")
    tasks = json.loads((release / "envscaler_rl_scenario_metadata.json").read_text())
    tasks[0]["init_config"] = "{'screenings': {}}"
    tasks[1]["env_id"] = 7
    (release / "envscaler_rl_scenario_metadata.json").write_text(json.dumps(tasks))
    with pytest.raises(PoolError) as caught:
        import_envscaler([release], tmp_path / "pool")
    source = release / "envscaler_rl_scenario_metadata.json"
    assert caught.value.errors == [
        f"{source}: task #0 ('cinema_0'): field 'init_config': a string that is not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        f"{source}: task #1 ('counter_0'): missing field 'env_class_name'",
    ]
    assert not (tmp_path / "pool").exists()


def test_environment_defects_are_named_by_source_file_and_position(tmp_path):
    release = _write_sample(tmp_path / "release")
    envs = json.loads((release / "191_env_metadata.json").read_text())
    envs[1]["tools"] = "[{"
    (release / "191_env_metadata.json").write_text(json.dumps(envs))
    with pytest.raises(PoolError, match="191_env_metadata.json: environment '1': field 'tools'"):
        import_envscaler([release], tmp_path / "pool")


@pytest.mark.parametrize(
    ("arrange", "message"),
    [
        (lambda d: (d / "envscaler_rl_scenario_metadata.json").unlink(), "one tasks file"),
        (
            lambda d: (d / "more_envs.json").write_text(json.dumps(ENV_ITEMS)),
            "expected exactly one environments file",
        ),
        (lambda d: (d / "broken.json").write_text("[{"), "broken.json: neither a JSON document"),
        (lambda d: (d / "odd.json").write_text('"text"'), "odd.json: expected a list of items"),
    ],
)
def test_unusable_release_folders(tmp_path, arrange, message):
    release = _write_sample(tmp_path / "release")
    arrange(release)
    with pytest.raises(EnvScalerImportError, match=message):
        import_envscaler([release], tmp_path / "pool")


def test_wrong_number_of_sources(tmp_path):
    with pytest.raises(EnvScalerImportError, match="one folder, or two files"):
        import_envscaler([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "pool")
