import numpy as np
import pytest

from envsched_gnn.models.history import half_life_stats, observed_before
from envsched_gnn.observations import Observation, ObservationLog

DEFAULTS = (0.125, 0.5, 0.5)


def _log(rows):
    log = ObservationLog(["a", "b", "c"])
    log.extend(Observation(t, s, r) for t, s, r in rows)
    return log


def test_statistics_by_hand():
    # step 0: a (v .25, m .5, d 1) and b (all 1: v 0, m 1, d 0); step 1: a (v 0, m 0, d 0)
    log = _log(
        [("a", 0, (0.0, 1.0)), ("b", 0, (1.0, 1.0)), ("a", 1, (0.0, 0.0)), ("c", 2, (1.0, 0.0))]
    )
    history = observed_before(log, 2, 3)
    assert len(history) == 3  # the step-2 observation is not before t = 2
    stats = half_life_stats(history, 3, 2.0, DEFAULTS)
    w0, w1 = 2.0 ** (-2 / 2), 2.0 ** (-1 / 2)
    ybar0 = np.array([0.125, 0.75, 0.5])  # (v, m, d) mean at step 0
    ybar1 = np.array([0.0, 0.0, 0.0])
    g = (w0 * ybar0 + w1 * ybar1) / (w0 + w1)
    np.testing.assert_allclose(stats.g, g)
    np.testing.assert_allclose(stats.weight, [w0 + w1, w0, 0.0])
    centred_a0 = np.clip(np.array([0.25, 0.5, 1.0]) - ybar0 + g, 0, [0.25, 1, 1])
    centred_a1 = np.clip(np.array([0.0, 0.0, 0.0]) - ybar1 + g, 0, [0.25, 1, 1])
    centred_b0 = np.clip(np.array([0.0, 1.0, 0.0]) - ybar0 + g, 0, [0.25, 1, 1])
    np.testing.assert_allclose(stats.weighted_sum[0], w0 * centred_a0 + w1 * centred_a1)
    np.testing.assert_allclose(stats.weighted_sum[1], w0 * centred_b0)
    own = stats.own_estimate()
    np.testing.assert_allclose(own[1], centred_b0)
    assert np.isnan(own[2]).all()


def test_no_history_gives_the_defaults():
    stats = half_life_stats(observed_before(_log([("a", 5, (0.0, 1.0))]), 5, 3), 3, 8.0, DEFAULTS)
    np.testing.assert_array_equal(stats.g, DEFAULTS)
    np.testing.assert_array_equal(stats.weight, np.zeros(3))


def test_old_history_does_not_underflow_the_reference():
    log = _log([("a", 0, (0.0, 1.0))])
    stats = half_life_stats(observed_before(log, 5000, 3), 3, 2.0, DEFAULTS)
    np.testing.assert_allclose(stats.g, [0.25, 0.5, 1.0])
    assert stats.weight[0] == 0.0  # 2^-2500: the task counts as unobserved


def test_bad_columns_are_rejected():
    columns = _log([("a", 0, (0.0, 1.0))]).arrays()
    with pytest.raises(ValueError, match="node index 0, the graph has 0"):
        observed_before(columns, 1, 0)
    with pytest.raises(ValueError, match="missing"):
        observed_before({"task": columns["task"]}, 1, 3)


def test_steps_are_dense_indices_so_a_huge_step_costs_nothing():
    """A step of 2,000,000,000 once made ``np.bincount`` over raw steps allocate 14.9 GiB."""
    import tracemalloc

    small = _log([("a", 0, (0.0, 1.0)), ("b", 3, (1.0, 0.0)), ("a", 3, (1.0, 1.0))])
    offset = 2_000_000_000
    huge = _log([("a", offset, (0.0, 1.0)), ("b", offset + 3, (1.0, 0.0))])
    huge.extend([Observation("a", offset + 3, (1.0, 1.0))])
    tracemalloc.start()
    try:
        shifted = half_life_stats(observed_before(huge, offset + 5, 3), 3, 8.0, DEFAULTS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # bytes, not gigabytes
    plain = half_life_stats(observed_before(small, 5, 3), 3, 8.0, DEFAULTS)
    # w_h depends on t - s only: the shifted history gives the same statistics, bit for bit
    np.testing.assert_array_equal(shifted.g, plain.g)
    np.testing.assert_array_equal(shifted.weight, plain.weight)
    np.testing.assert_array_equal(shifted.weighted_sum, plain.weighted_sum)
