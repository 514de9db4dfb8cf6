"""The sandboxed runtime on the hand-made pool and on a deliberately hostile environment."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.envs.episode import EpisodeScore
from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from tests.envs.handmade_pool import handmade_pool

HOSTILE_CODE = """
import os
import sys
import time


class Hostile:
    def __init__(self, init_config):
        self.counter = init_config.get("start", 0) * 10
        self.note = "built with init_config"

    def bump(self, by: int = 1):
        self.counter += by
        return {"success": True, "data": self.counter}

    def explode(self):
        raise RuntimeError("boom")

    def spin(self):
        while True:
            pass

    def nap(self):
        time.sleep(100)

    def spin_stubborn(self):
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass

    def not_a_dict(self):
        return [1, 2, 3]

    def not_json(self):
        return {"success": True, "data": object()}

    def nan(self):
        return {"success": True, "data": float("nan")}

    def huge(self):
        return {"success": True, "data": "x" * 5_000_000}

    def cycle(self):
        loop = []
        loop.append(loop)
        return loop

    def hog(self):
        blob = bytearray(8 * 1024 ** 3)
        return {"success": True, "data": len(blob)}

    def hog_slowly(self):
        chunks = []
        while True:
            chunks.append(bytes(50_000_000))

    def die(self):
        os._exit(3)

    def echo(self, text: str):
        print(text)
        sys.stdout.flush()
        return {"success": True, "data": text}

    def secrets(self):
        with open("/proc/self/environ", "rb") as handle:
            block = handle.read().decode(errors="replace")
        return {"success": True, "data": {"environ": dict(os.environ), "block": block}}

    def modules(self):
        return {"success": True, "data": sorted(sys.modules)}

    def untooled(self):
        return {"success": True}


class NoArgument:
    def __init__(self):
        self.counter = -1

    def bump(self, by: int = 1):
        self.counter += by
        return {"success": True, "data": self.counter}


class Broken:
    def __init__(self, init_config):
        raise ValueError("cannot build")
"""

TOOL_NAMES = [
    "bump",
    "explode",
    "spin",
    "nap",
    "spin_stubborn",
    "not_a_dict",
    "not_json",
    "nan",
    "huge",
    "cycle",
    "hog",
    "hog_slowly",
    "die",
    "echo",
    "secrets",
    "modules",
]


STUBBORN_CHECK = Check(
    "swallows the alarm",
    "def check_func(final_state):\n    while True:\n        try:\n            while True:\n"
    "                pass\n        except BaseException:\n            pass\n",
)


def _check(body: str) -> Check:
    return Check(check_item=body, check_func=f"def check_func(final_state):\n    return {body}\n")


def hostile_pool() -> Pool:
    tools = [{"type": "function", "function": {"name": name}} for name in TOOL_NAMES]
    env = Environment(env_id="7", env_class_code=HOSTILE_CODE, tools=tools)
    counter_checks = [_check("final_state['counter'] == 2"), _check("final_state['counter'] > 0")]

    def task(task_id: str, class_name: str, checks: list[Check], init: dict | None = None):
        return Task(
            task_id=task_id,
            env_id="7",
            env_class_name=class_name,
            init_config=init if init is not None else {"start": 0},
            task="count",
            checklist_with_func=checks,
        )

    weird_checks = [
        _check("True"),
        _check("1 / 0"),
        Check("loops", "def check_func(final_state):\n    while True:\n        pass\n"),
        _check("'yes'"),
        _check("1"),
        Check("no check_func", "def other(final_state):\n    return True\n"),
        Check(
            "mutates", "def check_func(final_state):\n    final_state.clear()\n    return True\n"
        ),
        _check("final_state['counter'] == 0 and initial_state['counter'] == 0"),
        _check("initial_state['note'] == 'built with init_config'"),
    ]
    return Pool(
        envs={"7": env},
        tasks=[
            task("count", "Hostile", counter_checks),
            task("weird-checks", "Hostile", weird_checks),
            task("from-config", "Hostile", [_check("final_state['counter'] == 31")], {"start": 3}),
            task("no-argument", "NoArgument", [_check("final_state['counter'] == 5")], {}),
            task(
                "set-attrs", "NoArgument", [_check("final_state['extra'] == [1]")], {"extra": [1]}
            ),
            task("broken", "Broken", counter_checks),
            task("stubborn-check", "Hostile", [_check("True"), STUBBORN_CHECK]),
            task("missing-class", "Nowhere", counter_checks),
        ],
    )


FAST = RuntimeConfig(workers=1, call_timeout_s=0.5, memory_limit_mb=512, grace_s=0.5)


@pytest.fixture(scope="module")
def hostile():
    with EnvRuntime(hostile_pool(), FAST) as runtime:
        yield runtime


def test_handmade_references_score_one_and_doing_nothing_scores_less():
    pool = handmade_pool()
    with EnvRuntime(pool, RuntimeConfig(workers=2)) as runtime:
        reference = runtime.replay([(t.task_id, t.reference_solution) for t in pool.tasks])
        empty = runtime.replay([(t.task_id, []) for t in pool.tasks])
    assert [score.reward for score in reference] == [1.0] * len(pool.tasks)
    assert all(score.reward < 1.0 for score in empty)
    assert empty[2] == EpisodeScore(reward=0.5, checks=(True, False))


def test_the_success_reward_is_one_only_when_every_check_passes():
    """Same episodes, both rewards: identical checks; success = 1 exactly where the fraction
    is 1 (the references), else 0, also for a reference cut short (some checks pass)."""
    pool = handmade_pool()
    runs = [(t.task_id, t.reference_solution) for t in pool.tasks]
    runs += [(t.task_id, []) for t in pool.tasks]
    runs += [(t.task_id, t.reference_solution[:1]) for t in pool.tasks]
    scores = {}
    for reward in ("fraction", "success"):
        with EnvRuntime(pool, RuntimeConfig(workers=2, reward=reward)) as runtime:
            scores[reward] = runtime.replay(runs)
    fraction, success = scores["fraction"], scores["success"]
    assert [s.checks for s in success] == [s.checks for s in fraction]
    assert [s.reward for s in success] == [float(s.reward == 1.0) for s in fraction]
    assert 0.0 < fraction[len(pool.tasks) + 2].reward < 1.0  # doing nothing: partial credit
    assert success[len(pool.tasks) + 2] == EpisodeScore(reward=0.0, checks=(True, False))
    assert {s.reward for s in success} == {0.0, 1.0}


def test_an_unknown_reward_is_refused():
    with pytest.raises(ValueError, match=r"RuntimeConfig.reward = 'partial', expected one of"):
        RuntimeConfig(reward="partial")


def test_many_episodes_run_in_parallel_and_answer_in_order():
    pool = handmade_pool()
    episodes = [(f"e{i}", pool.tasks[i % len(pool.tasks)].task_id) for i in range(60)]
    with EnvRuntime(pool, RuntimeConfig(workers=2)) as runtime:
        assert runtime.reset(episodes) == [{"success": True}] * 60
        longest = max(len(t.reference_solution) for t in pool.tasks)
        for turn in range(longest):
            calls = [
                (episode_id, pool.task(task_id).reference_solution[turn])
                for episode_id, task_id in episodes
                if turn < len(pool.task(task_id).reference_solution)
            ]
            results = runtime.call(calls)
            assert all(result["success"] is True for result in results)
        found = runtime.call([("e0", ToolCall("find_member", {"name": "Grace Hopper"}))])
        assert found == [
            {"success": True, "data": {"name": "Grace Hopper", "active": True, "member_id": "M3"}}
        ]
        scores = runtime.score([episode_id for episode_id, _ in episodes])
        assert [score.reward for score in scores] == [1.0] * 60
        runtime.release([episode_id for episode_id, _ in episodes])
        with pytest.raises(ValueError, match="unknown episode 'e0'"):
            runtime.score(["e0"])


def test_calls_of_one_episode_in_one_batch_apply_in_order(hostile):
    hostile.reset([("a", "count")])
    results = hostile.call([("a", ToolCall("bump", {"by": 5})), ("a", ToolCall("bump"))])
    assert [result["data"] for result in results] == [5, 6]
    hostile.release(["a"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (ToolCall("launch_rockets"), "unknown tool 'launch_rockets'"),
        (ToolCall("untooled"), "unknown tool 'untooled'"),
        (ToolCall("__init__", {"init_config": {}}), "unknown tool '__init__'"),
        (ToolCall("bump", {"by": 1, "extra": 2}), "bad arguments for bump"),
        (ToolCall("echo"), "bad arguments for echo"),
        (ToolCall("explode"), "RuntimeError: boom"),
        (ToolCall("huge"), "over the limit"),
        (ToolCall("cycle"), "cannot be encoded: the result holds itself"),
        (ToolCall("spin"), "timed out after 0.5 s"),
        (ToolCall("nap"), "timed out after 0.5 s"),
        (ToolCall("hog"), "MemoryError"),
        (ToolCall("hog_slowly"), "MemoryError"),
    ],
)
def test_bad_tools_give_error_results_and_the_episode_goes_on(hostile, call, message):
    restarts = hostile.restarts
    assert hostile.reset([("a", "count")]) == [{"success": True}]
    first, failed, last = hostile.call(
        [("a", ToolCall("bump")), ("a", call), ("a", ToolCall("bump"))]
    )
    assert failed["success"] is False
    assert message in failed["error"]
    json.dumps(failed)
    assert (first["data"], last["data"]) == (1, 2)
    assert hostile.score(["a"])[0].reward == 1.0
    assert hostile.restarts == restarts
    hostile.release(["a"])


def test_results_that_are_not_json_objects_are_sent_encoded_not_refused(hostile):
    hostile.reset([("a", "count")])
    listed, opaque, nan = hostile.call(
        [("a", ToolCall("not_a_dict")), ("a", ToolCall("not_json")), ("a", ToolCall("nan"))]
    )
    assert listed == [1, 2, 3]
    assert opaque == {"success": True, "data": "<object object>"}  # no memory address
    assert nan == {"success": True, "data": "nan"}
    hostile.release(["a"])


def test_arguments_that_are_not_json_give_an_error_result(hostile):
    hostile.reset([("a", "count")])
    [result] = hostile.call([("a", ToolCall("bump", {"by": {1, 2}}))])
    assert result["success"] is False
    assert "not JSON" in result["error"]
    hostile.release(["a"])


@pytest.mark.parametrize("killer", ["spin_stubborn", "die"])
def test_stuck_or_dead_worker_is_replaced_and_its_episodes_rebuilt(hostile, killer):
    restarts, [pid] = hostile.restarts, hostile.pids
    hostile.reset([("a", "count"), ("b", "count")])
    hostile.call([("a", ToolCall("bump")), ("b", ToolCall("bump", {"by": 10}))])
    results = hostile.call(
        [("a", ToolCall(killer)), ("b", ToolCall("bump")), ("a", ToolCall("bump"))]
    )
    assert results[0]["success"] is False
    assert ("timed out" if killer == "spin_stubborn" else "died (exit code 3)") in results[0][
        "error"
    ]
    assert [results[1]["data"], results[2]["data"]] == [11, 2]
    assert hostile.restarts == restarts + 1
    assert hostile.pids != [pid]
    assert [score.reward for score in hostile.score(["a", "b"])] == [1.0, 0.5]
    hostile.release(["a", "b"])


def test_checks_that_raise_loop_or_return_non_bool_count_false(hostile):
    hostile.reset([("w", "weird-checks")])
    [score] = hostile.score(["w"])
    assert score.checks == (True, False, False, False, False, False, True, True, True)
    assert score.reward == pytest.approx(4 / 9)
    assert "ZeroDivisionError" in score.errors[1]
    assert "timed out" in score.errors[2]
    assert "returned str, not bool" in score.errors[3]
    assert "check_func" in score.errors[5]
    hostile.release(["w"])


def test_a_check_that_cannot_be_stopped_fails_alone_not_the_trainer(hostile):
    restarts = hostile.restarts
    hostile.reset([("a", "count"), ("s", "stubborn-check")])
    hostile.call([("a", ToolCall("bump")), ("a", ToolCall("bump"))])
    stubborn, fine = hostile.score(["s", "a"])
    assert stubborn.checks == (True, False)  # only the check that hung takes the blame
    assert stubborn.errors[0] == ""
    assert "worker replaced" in stubborn.errors[1]
    assert fine == EpisodeScore(1.0, (True, True))
    assert hostile.restarts == restarts + 1
    hostile.release(["a", "s"])


def test_instantiation_follows_envscaler(hostile):
    episodes = [("c", "from-config"), ("n", "no-argument"), ("s", "set-attrs")]
    assert hostile.reset(episodes) == [{"success": True}] * 3
    hostile.call([("c", ToolCall("bump")), ("n", ToolCall("bump", {"by": 6}))])
    assert [score.reward for score in hostile.score(["c", "n", "s"])] == [1.0, 1.0, 1.0]
    hostile.release(["c", "n", "s"])


def test_failed_instantiation_is_an_error_result_not_a_crash(hostile):
    results = hostile.reset([("x", "broken"), ("y", "missing-class")])
    assert results[0]["success"] is False
    assert results[0]["error"] == "ValueError: cannot build"
    assert results[1]["success"] is False
    assert "no class 'Nowhere'" in results[1]["error"]
    [result] = hostile.call([("x", ToolCall("bump"))])
    assert result["success"] is False
    assert hostile.score(["x", "y"]) == [EpisodeScore(0.0, (False, False))] * 2
    hostile.release(["x", "y"])


def test_env_code_sees_no_secrets_no_project_and_cannot_break_the_protocol(monkeypatch):
    monkeypatch.setenv("NEO4J_PASSWORD", "hunter2-secret")
    with EnvRuntime(hostile_pool(), FAST) as runtime:
        runtime.reset([("a", "count")])
        secrets, modules, echo = runtime.call(
            [
                ("a", ToolCall("secrets")),
                ("a", ToolCall("modules")),
                ("a", ToolCall("echo", {"text": '{"i": 99, "r": {}}\n'})),
            ]
        )
    assert "NEO4J_PASSWORD" not in secrets["data"]["environ"]
    assert "hunter2-secret" not in secrets["data"]["block"]
    assert not [name for name in modules["data"] if name.startswith(("torch", "envsched_gnn"))]
    assert echo["success"] is True


def test_unknown_task_or_episode_is_a_caller_error(hostile):
    with pytest.raises(KeyError, match="unknown task 'nope'"):
        hostile.reset([("a", "nope")])
    with pytest.raises(ValueError, match="twice"):
        hostile.reset([("a", "count"), ("a", "count")])
    with pytest.raises(ValueError, match="unknown episode 'ghost'"):
        hostile.call([("ghost", ToolCall("bump"))])
    hostile.release(["ghost"])


def test_closed_workers_exit_by_themselves():
    """close() asks each worker to exit; none has to be killed (its scorer once missed the
    tool process's exit now and then, and waited to be killed)."""
    pool = handmade_pool()
    task = pool.tasks[0]
    codes = []
    for _ in range(12):
        runtime = EnvRuntime(pool, RuntimeConfig(workers=2))
        runtime.reset([("a", task.task_id), ("b", pool.tasks[-1].task_id)])
        runtime.call([("a", task.reference_solution[0])])
        runtime.release(["a"])
        processes = [slot.process.proc for _, slot in runtime._slots.items()]
        runtime.close()
        codes += [process.returncode for process in processes]
    assert set(codes) == {0}, codes
