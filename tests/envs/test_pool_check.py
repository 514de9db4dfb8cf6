"""``pool check``: validation plus replay of reference solutions and empty trajectories."""

from __future__ import annotations

import argparse
import json

import pytest

from envsched_gnn.envs import commands
from envsched_gnn.envs.check import CheckConfig, check_pool
from envsched_gnn.envs.runtime_config import RuntimeConfig
from tests.envs.handmade_pool import write_handmade_pool


def _run_check(directory, capsys, *extra: str) -> tuple[int, dict, str]:
    """Runs ``pool check`` through its argparse registration; returns code, summary, stderr."""
    parser = argparse.ArgumentParser()
    groups = {"": parser.add_subparsers()}
    groups["pool"] = groups[""].add_parser("pool").add_subparsers()
    groups["bench"] = groups[""].add_parser("bench").add_subparsers()
    commands.register(groups)
    argv = ["pool", "check", str(directory), "--workers", "2", "--no-progress", *extra]
    args = parser.parse_args(argv)
    code = args.func(args)
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


def test_handmade_pool_checks_clean(tmp_path, capsys):
    code, summary, _ = _run_check(write_handmade_pool(tmp_path), capsys)
    assert code == 0
    assert summary["errors"] == []
    assert (summary["envs"], summary["tasks"]) == (2, 6)
    assert summary["reference_mean_reward"] == summary["reference_min_reward"] == 1.0
    assert summary["empty_max_reward"] == 0.5
    assert summary["empty_mean_reward"] == (0.5 + 0.25) / 6
    assert summary["seconds"] > 0


def test_defective_tasks_are_errors_with_a_nonzero_exit(tmp_path, capsys):
    directory = write_handmade_pool(tmp_path)
    envs = json.loads((directory / "envs.json").read_text())
    tasks = json.loads((directory / "tasks.json").read_text())
    tasks[0]["reference_solution"] = tasks[0]["reference_solution"][:2]  # forgets the checkout
    tasks[3]["checklist_with_func"] = [
        {"check_item": "always", "check_func": "def check_func(final_state):\n    return True\n"}
    ]
    envs["clinic"]["env_class_code"] += (
        "\n\nclass Fragile:\n    def __init__(self):\n        1 / 0\n"
    )
    tasks[5]["env_class_name"] = "Fragile"
    (directory / "envs.json").write_text(json.dumps(envs))
    (directory / "tasks.json").write_text(json.dumps(tasks))
    code, summary, stderr = _run_check(directory, capsys)
    assert code == 1
    errors = sorted(summary["errors"])
    assert len(errors) == 4
    assert errors[0] == (
        "task 'clinic-book': doing nothing already scores 1.0, so its rollouts can never differ"
    )
    assert errors[1].startswith("task 'clinic-cancel': instantiation failed: ")
    assert errors[1].endswith("ZeroDivisionError: division by zero")
    assert errors[2].startswith("task 'clinic-cancel': reference solution scores 0.000")
    assert errors[3].startswith(
        "task 'library-checkout': reference solution scores 0.000; failed checks: "
        "'Ada Lovelace has a loan of Dune'; 'Dune is no longer available'"
    )
    assert summary["reference_min_reward"] == 0.0
    assert summary["empty_max_reward"] == 1.0
    assert "error: task 'clinic-book'" in stderr


def test_invalid_pool_reports_the_loader_errors(tmp_path, capsys):
    directory = write_handmade_pool(tmp_path)
    (directory / "tasks.json").write_text("[{}]")
    code, summary, _ = _run_check(directory, capsys)
    assert code == 1
    assert summary["tasks"] == 0
    assert summary["reference_mean_reward"] is None
    assert summary["errors"] == [
        f"{directory / 'tasks.json'}: task #0: field 'task_id' must be a non-empty string or an "
        "integer"
    ]


def test_batches_smaller_than_the_pool_cover_every_task(tmp_path):
    config = CheckConfig(runtime=RuntimeConfig(workers=1), chunk_size=4, progress=False)
    summary = check_pool(write_handmade_pool(tmp_path), config)
    assert summary["tasks"] == 6
    assert summary["reference_min_reward"] == 1.0
    assert summary["empty_mean_reward"] == (0.5 + 0.25) / 6


@pytest.mark.slow  # every reference call replayed with state snapshots
def test_write_effects_records_what_each_tool_did(tmp_path, capsys):
    from envsched_gnn.envs.generator import generate_pool, write_pool_files
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.tool_effects import TOOL_EFFECTS_FILE

    write_pool_files(generate_pool(n_envs=51, tasks_per_env=4, seed=0, test_per_env=1), tmp_path)
    code, summary, stderr = _run_check(tmp_path, capsys, "--write-effects")
    assert code == 0 and summary["tool_effects_file"] == str(tmp_path / TOOL_EFFECTS_FILE)
    # the generator's names and descriptions already say what its tools do
    assert summary["recategorised"] == [] and "recategorised" not in stderr
    effects = load_pool(tmp_path).tool_effects
    assert len(effects) == 51
    kinds = {kind for tools in effects.values() for seen in tools.values() for kind in seen}
    assert {"added", "status", "link", "field"} <= kinds
    assert all(
        not seen for tools in effects.values() for t, seen in tools.items() if t.startswith("get_")
    )
    code, summary, _ = _run_check(tmp_path, capsys)
    assert "tool_effects" not in summary and (tmp_path / TOOL_EFFECTS_FILE).is_file()


FRAGILE_CODE = """
import ctypes
import os


class Fragile:
    def __init__(self, init_config):
        self.count = 0

    def bump(self):
        self.count += 1
        return {"success": True, "data": self.count}

    def loop(self):
        while True:
            pass

    def segfault(self):
        ctypes.string_at(0)

    def exit(self):
        os._exit(1)

    def hog(self):
        return {"success": True, "data": len(bytearray(20 * 1024**3))}
"""


def test_reference_calls_that_crash_hang_or_kill_their_worker_are_errors(tmp_path, capsys):
    """The checks pass (the last call does the work), yet each broken tool is reported."""
    directory = write_handmade_pool(tmp_path)
    envs = json.loads((directory / "envs.json").read_text())
    tasks = json.loads((directory / "tasks.json").read_text())
    tools = ["bump", "loop", "segfault", "exit", "hog"]
    envs["fragile"] = {
        "env_class_code": FRAGILE_CODE,
        "tools": [{"type": "function", "function": {"name": name}} for name in tools],
    }
    for tool in tools[1:]:
        tasks.append(
            {
                "task_id": f"fragile-{tool}",
                "env_id": "fragile",
                "env_class_name": "Fragile",
                "init_config": {},
                "task": "bump the counter",
                "checklist_with_func": [
                    {
                        "check_item": "bumped",
                        "check_func": "def check_func(final_state):\n"
                        "    return final_state['count'] == 1\n",
                    }
                ],
                "reference_solution": [{"name": tool, "arguments": {}}, {"name": "bump"}],
            }
        )
    (directory / "envs.json").write_text(json.dumps(envs))
    (directory / "tasks.json").write_text(json.dumps(tasks))
    parser = argparse.ArgumentParser()
    groups = {"": parser.add_subparsers()}
    groups["pool"] = groups[""].add_parser("pool").add_subparsers()
    groups["bench"] = groups[""].add_parser("bench").add_subparsers()
    commands.register(groups)
    args = parser.parse_args(
        [
            "pool",
            "check",
            str(directory),
            "--workers",
            "1",
            "--call-timeout",
            "0.5",
            "--no-progress",
        ]
    )
    code = args.func(args)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1
    assert summary["reference_min_reward"] == 1.0  # only the runtime saw the faults
    errors = sorted(summary["errors"])
    prefix = "reference call 0 ({}) failed in the runtime: "
    expected = {
        "exit": "the worker process died (exit code 1)",
        "hog": "MemoryError",
        "loop": "timed out after 0.5 s",
        "segfault": "the worker process died (exit code 139: signal 11, SIGSEGV)",
    }
    assert len(errors) == 4, errors
    for error, (tool, reason) in zip(errors, sorted(expected.items()), strict=True):
        assert error.startswith(f"task 'fragile-{tool}': " + prefix.format(tool)), error
        assert reason in error, error
