"""Every tool result is accepted and sent as JSON by one rule (spec section 8), the same text
on every run: :func:`envsched_gnn.envs.tool_results.encode_result`, in the sandbox too."""

from __future__ import annotations

import datetime
import decimal
import fractions
import json
import os
import subprocess
import sys
from pathlib import Path

import mpmath
import pytest

from envsched_gnn.envs.episode import ToolFault
from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.tool_results import ResultNotEncodable, encode_result


class Exact:
    """An mpf-like number: converts to float exactly."""

    def __float__(self) -> float:
        return 0.25

    def __eq__(self, other: object) -> bool:
        return other == 0.25


class Point:
    def __init__(self) -> None:
        self.x = 1


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (None, {"success": True}),
        ([1, "a", None], [1, "a", None]),
        ("done", "done"),
        (3, 3),
        (2.5, 2.5),
        (True, True),
        ({"success": True, "data": [1, (2, 3)]}, {"success": True, "data": [1, [2, 3]]}),
        (mpmath.mpf("2.5"), 2.5),
        ({"result": mpmath.mpf(1) / 3}, {"result": 1 / 3}),
        (Exact(), 0.25),
        (decimal.Decimal("0.1"), "0.1"),  # float(Decimal('0.1')) is not 0.1: kept as text
        (decimal.Decimal("2.5"), 2.5),
        (fractions.Fraction(1, 3), "1/3"),
        ({3, 1, 2}, [1, 2, 3]),
        (frozenset({"b", "a"}), ["a", "b"]),
        ({1, "a"}, ["a", 1]),  # no order between them: sorted by JSON text ('"a"' < '1')
        ({(1, 2): "x", 3: "y"}, {"(1, 2)": "x", "3": "y"}),
        (float("nan"), "nan"),
        ({"at": datetime.date(2026, 1, 2)}, {"at": "2026-01-02"}),
        (Point(), f"<{__name__}.Point object>"),  # its address would change from run to run
    ],
)
def test_every_value_is_encoded_by_the_rule(value, sent):
    assert json.loads(encode_result(value)) == sent


def test_a_result_that_holds_itself_cannot_be_encoded():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ResultNotEncodable, match="holds itself"):
        encode_result({"loop": loop})


def test_the_text_is_the_same_in_every_process():
    """Sets of strings iterate in an order that the hash seed changes; their text does not."""
    script = (
        "from envsched_gnn.envs.tool_results import encode_result\n"
        "print(encode_result({'tags': {'red', 'green', 'blue', 'teal'}, 'obj': object()}))\n"
    )
    texts = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=Path(__file__).parents[2],
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert texts == {'{"tags": ["blue", "green", "red", "teal"], "obj": "<object object>"}\n'}


RETURNS_CODE = """
import decimal

import mpmath


class Exact:
    def __float__(self):
        return 0.25

    def __eq__(self, other):
        return other == 0.25


class Returns:
    def __init__(self, init_config):
        self.calls = 0

    def nothing(self):
        self.calls += 1

    def a_list(self):
        return ["SFO", "LAX"]

    def a_string(self):
        return "moved"

    def a_number(self):
        return 42

    def an_mpf(self):
        return {"result": mpmath.log(8) / mpmath.log(2)}

    def mpf_like(self):
        return Exact()

    def a_decimal(self):
        return decimal.Decimal("19.99")

    def a_set(self):
        return {"b", "c", "a"}

    def too_big(self):
        return ["x" * 1000] * 1000
"""
TOOLS = ["nothing", "a_list", "a_string", "a_number", "an_mpf", "mpf_like", "a_decimal"]
TOOLS += ["a_set", "too_big"]


def test_the_policy_gets_what_the_tool_returned_through_the_sandbox():
    env = Environment(
        "returns", RETURNS_CODE, [{"type": "function", "function": {"name": n}} for n in TOOLS]
    )
    check = Check(
        "called once", "def check_func(final_state):\n    return final_state['calls'] == 1\n"
    )
    task = Task("returns", "returns", "Returns", {}, "call", [check])
    config = RuntimeConfig(workers=1, max_result_bytes=100_000)
    with EnvRuntime(Pool(envs={"returns": env}, tasks=[task]), config) as runtime:
        runtime.reset([("e", "returns")])
        results = runtime.call([("e", ToolCall(name)) for name in TOOLS])
        [score] = runtime.score(["e"])
    *sent, too_big = results
    assert sent == [
        {"success": True},
        ["SFO", "LAX"],
        "moved",
        42,
        {"result": 3.0},
        0.25,
        "19.99",
        ["a", "b", "c"],
    ]
    assert not [result for result in sent if isinstance(result, ToolFault)]
    assert isinstance(too_big, ToolFault) and "over the limit 100000" in too_big["error"]
    assert score.reward == 1.0  # `nothing` changed the state: the call ran, and said so
