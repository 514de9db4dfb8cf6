"""Observation statistics (spec section 2), validation and the history.jsonl format."""

import json
import math

import numpy as np
import pytest

from envsched_gnn.observations import (
    Observation,
    ObservationConfig,
    ObservationError,
    ObservationLog,
    group_stats,
    read_history,
    reward_stats,
    write_history,
)


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([0, 0, 0, 0], (0.0, 0.0, 0.0)),
        ([1, 1, 1, 1], (1.0, 0.0, 0.0)),
        ([0.5, 0.5], (0.5, 0.0, 0.0)),
        ([0, 1, 0, 1], (0.5, 0.25, 1.0)),
        ([0, 0, 0, 1], (0.25, 0.1875, 1.0)),
        ([0.5, 0.25, 0.25, 0.0], (0.25, 0.03125, 0.03125 / 0.1875)),
        # m (1 - m) below the 0.01 floor: v / 0.01, then clipped into [0, 1]
        ([1.0] * 199 + [0.0], (0.995, 0.995 * 0.005, 0.995 * 0.005 / 0.01)),
    ],
)
def test_reward_stats_match_the_spec(rewards, expected):
    m, v, d = reward_stats(rewards)
    assert (m, v, d) == pytest.approx(expected, abs=1e-15)
    gm, gv, gd = group_stats(np.array([rewards], dtype=float))
    assert (gm[0], gv[0], gd[0]) == (m, v, d)


@pytest.mark.parametrize("bad", [[1.5], [-0.1], [math.nan], [math.inf], [], ["1"], [True]])
def test_bad_rewards_are_rejected_with_task_and_step(bad):
    with pytest.raises(ObservationError, match=r"task 't7' step 3"):
        Observation("t7", 3, tuple(bad))


def test_a_failed_history_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "history.jsonl"
    old = [Observation("a", 0, (0.0, 1.0))]
    write_history(path, old)

    def observations_that_fail_midway():
        yield Observation("b", 1, (0.5, 0.5))
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_history(path, observations_that_fail_midway())
    assert read_history(path) == old
    assert [p.name for p in tmp_path.iterdir()] == ["history.jsonl"]


def test_history_round_trip_and_line_errors(tmp_path):
    path = tmp_path / "history.jsonl"
    obs = [Observation("a", 0, (0.0, 1.0)), Observation("b", 1, (0.5, 0.5))]
    write_history(path, obs)
    assert read_history(path) == obs
    path.write_text(json.dumps({"task_id": "a", "step": 0, "rewards": [0.2]}) + "\n{oops\n")
    with pytest.raises(ObservationError, match=r"history.jsonl:2: not valid JSON"):
        read_history(path)
    path.write_text(json.dumps({"task_id": "a", "rewards": [0.2]}) + "\n")
    with pytest.raises(ObservationError, match=r"history.jsonl:1: missing field 'step'"):
        read_history(path)
    path.write_text(json.dumps({"task_id": "a", "step": 2, "rewards": [2.0]}) + "\n")
    with pytest.raises(ObservationError, match=r"history.jsonl:1: .*reward 0 is 2.0"):
        read_history(path)


def test_log_is_idempotent_and_all_or_nothing():
    log = ObservationLog(["a", "b"])
    assert log.extend([Observation("a", 0, (0.0, 1.0)), Observation("b", 0, (1.0, 1.0))]) == 2
    assert log.extend([Observation("a", 0, (0.0, 1.0))]) == 0
    with pytest.raises(ObservationError, match="unknown task 'zz'"):
        log.extend([Observation("a", 1, (0.0, 0.0)), Observation("zz", 1, (0.0, 0.0))])
    with pytest.raises(ObservationError, match="already recorded"):
        log.extend([Observation("a", 0, (1.0, 1.0))])
    assert len(log) == 2
    arrays = log.arrays()
    assert arrays["task"].tolist() == [0, 1]
    assert arrays["v"].tolist() == [0.25, 0.0]
    restored = ObservationLog(["a", "b"])
    restored.load_state_dict(json.loads(json.dumps(log.state_dict())))
    assert list(restored.observations()) == list(log.observations())


def test_groups_of_one_reward_are_rejected_or_kept_out_of_the_evidence():
    """K = 1 groups mixed with K = 8 once counted as zero-variance evidence (q 0.818 -> 0.0)."""
    eight = Observation("a", 0, (0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0))
    single = Observation("a", 1, (1.0,))
    strict = ObservationLog(["a", "b"])
    with pytest.raises(ObservationError, match=r"task 'a' step 1: 1 reward\(s\), fewer than 2"):
        strict.extend([eight, single])
    assert len(strict) == 0  # all or nothing
    lenient = ObservationLog(["a", "b"], ObservationConfig(small_groups="ignore"))
    assert lenient.extend([eight, single]) == 2
    assert lenient.arrays()["step"].tolist() == [0]  # the single reward is no evidence
    assert list(lenient.observations()) == [eight, single]  # but it is kept
    restored = ObservationLog(["a", "b"], ObservationConfig(small_groups="ignore"))
    restored.load_state_dict(json.loads(json.dumps(lenient.state_dict())))
    assert restored.arrays()["step"].tolist() == [0]
    with pytest.raises(ValueError, match="small_groups"):
        ObservationConfig(small_groups="zero")
    with pytest.raises(ValueError, match="min_rewards"):
        ObservationConfig(min_rewards=1)


def test_success_observations_are_zero_or_one_and_say_so_in_the_history(tmp_path):
    with pytest.raises(ObservationError, match=r"task 't7' step 3: reward 1 is 0.5, expected 0 or"):
        Observation("t7", 3, (1.0, 0.5), "success")
    with pytest.raises(ObservationError, match=r"reward 'partial', expected one of"):
        Observation("t7", 3, (1.0, 0.5), "partial")
    path = tmp_path / "history.jsonl"
    success = [Observation("a", 0, (0.0, 1.0), "success"), Observation("b", 1, (1, 1), "success")]
    write_history(path, success)
    assert json.loads(path.read_text().splitlines()[0]) == {
        "task_id": "a",
        "step": 0,
        "rewards": [0.0, 1.0],
        "reward": "success",
    }
    assert read_history(path) == success
    write_history(path, [Observation("a", 0, (0.0, 1.0))])  # partial credit: as before
    assert json.loads(path.read_text()) == {"task_id": "a", "step": 0, "rewards": [0.0, 1.0]}


def test_a_history_that_mixes_rewards_is_refused(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(path, [Observation("a", 0, (0.5, 1.0)), Observation("b", 0, (0, 1), "success")])
    with pytest.raises(
        ObservationError,
        match=r"history.jsonl: task 'b' step 0 holds 'success' rewards, not 'fraction' ones",
    ):
        read_history(path)


def test_a_log_takes_the_reward_of_its_config_only():
    """A log of partial-credit rewards refuses success ones and the other way round, all or
    nothing; its state says which reward it holds, so a restore into the other refuses it."""
    fraction = Observation("a", 0, (0.0, 1.0))
    success = Observation("a", 1, (0.0, 1.0), "success")
    log = ObservationLog(["a"])
    with pytest.raises(ObservationError, match=r"task 'a' step 1 holds 'success' rewards, not"):
        log.extend([fraction, success])
    assert len(log) == 0
    held = ObservationLog(["a"], ObservationConfig(reward="success"))
    assert held.extend([success]) == 1
    assert list(held.observations()) == [success]
    with pytest.raises(ObservationError, match=r"--reward success to use these"):
        log.load_state_dict(json.loads(json.dumps(held.state_dict())))
    with pytest.raises(ValueError, match=r"ObservationConfig.reward = 'binary', expected one of"):
        ObservationConfig(reward="binary")
