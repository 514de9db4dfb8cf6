"""Node properties without a server: a task survives its node, and bad rows are refused with
the task, field and value named (the store tests check the same rows against a real server)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.nodes import (
    observation_rows,
    prediction_rows,
    record_key,
    task_from_properties,
    task_properties,
    text_key,
)
from envsched_gnn.observations import Observation, ObservationError
from tests.envs.handmade_pool import handmade_pool


def test_a_task_survives_its_node_properties() -> None:
    for task in handmade_pool().tasks:
        assert task_from_properties({"id": task.task_id, **task_properties(task)}) == task


def test_keys_name_the_record_and_the_text() -> None:
    assert record_key("clinic-book", 7) == "7:clinic-book"
    assert text_key("lookup") == text_key("lookup") != text_key("lookup ")
    assert len(text_key("lookup")) == 32  # blake2b-128 in hex


def test_observation_rows_carry_reward_stats_and_drop_exact_repeats() -> None:
    rows = observation_rows(
        [
            Observation("library-checkout", 0, (0.0, 1.0, 1.0, 0.5)),
            {"task_id": "library-checkout", "step": 0, "rewards": [0.0, 1.0, 1.0, 0.5]},
        ]
    )
    assert len(rows) == 1
    assert rows[0]["key"] == "0:library-checkout"
    assert rows[0]["m"] == 0.625 and rows[0]["v"] == pytest.approx(0.171875)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"task_id": 3, "step": 0, "rewards": [0.5]}, "not a string"),
        ({"task_id": "clinic-book", "step": 0, "rewards": [0.5, 1.5]}, "1.5"),
        ({"task_id": "clinic-book", "step": 0, "rewards": [math.nan]}, "nan"),
        ({"task_id": "clinic-book", "step": -1, "rewards": [0.5]}, "step -1"),
        ({"task_id": "clinic-book", "step": True, "rewards": [0.5]}, "step True"),
        ({"task_id": "clinic-book", "step": 0, "rewards": 0.5}, "is not a list"),
        ({"task_id": "clinic-book", "step": 0, "rewards": [1.0]}, "given twice"),
    ],
)
def test_bad_observation_rows_are_refused(bad: dict, message: str) -> None:
    good = {"task_id": "clinic-book", "step": 0, "rewards": [0.0]}
    with pytest.raises(ObservationError, match=message):
        observation_rows([good, bad])


def test_prediction_rows_split_predictions_and_evidence() -> None:
    row = {
        "task_id": "library-checkout",
        "q": np.float32(0.25),
        "rank": np.int64(1),
        "neighbours": [{"task_id": "clinic-book", "relation": "cross", "sim": 0.75}],
    }
    predictions, evidence, ids = prediction_rows(4, [row])
    assert predictions[0]["key"] == "4:library-checkout"
    props = predictions[0]["props"]
    assert props["q"] == 0.25 and type(props["q"]) is float
    assert props["rank"] == 1 and type(props["rank"]) is int
    assert props["u"] is None
    assert evidence == [
        {
            "key": "4:library-checkout",
            "task_id": "clinic-book",
            "props": {"relation": "cross", "sim": 0.75, "W": None, "y_v": None, "y_m": None,
                      "y_d": None, "share": None},
        }
    ]  # fmt: skip
    assert ids == {"library-checkout", "clinic-book"}


@pytest.mark.parametrize(
    ("step", "row", "message"),
    [
        (-1, {"task_id": "t"}, "prediction step -1"),
        (0, {"task_id": None}, "task_id None is not a string"),
        (0, {"task_id": "t", "q": "high"}, "field 'q' is 'high', expected a number"),
        (0, {"task_id": "t", "u": math.inf}, "field 'u' is inf, expected a finite number"),
        (0, {"task_id": "t", "neighbours": [{"task_id": "n", "relation": "near"}]}, "'near'"),
    ],
)
def test_bad_prediction_rows_are_refused(step: int, row: dict, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        prediction_rows(step, [row])
