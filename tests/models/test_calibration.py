import numpy as np
import pytest
from scipy.stats import rankdata

from envsched_gnn.models.calibration import (
    SINGLE_TASK_PERCENTILE,
    TIE_DECIMALS,
    average_rank,
    calibrate,
    decline_penalty,
    percentile_rank,
    quantile_map,
    reconstructed_variance,
    sorted_values,
)


@pytest.mark.parametrize(
    "values",
    [
        [0.3, 0.1, 0.2],
        [0.1, 0.1, 0.1, 0.1],
        [0.5, 0.2, 0.5, 0.2, 0.9, 0.0, 0.5],
        [0.0, 0.25],
    ],
)
def test_average_rank_matches_scipy_including_ties(values):
    np.testing.assert_array_equal(
        average_rank(np.array(values)), rankdata(values, method="average")
    )


def test_percentile_rank_by_hand():
    # ranks 1, 2.5, 2.5, 4 of N = 4 -> (rank - 1) / 3
    pr = percentile_rank(np.array([0.0, 0.2, 0.2, 0.7]))
    np.testing.assert_allclose(pr, [0.0, 0.5, 0.5, 1.0])


def test_all_ties_and_single_task_get_one_half():
    np.testing.assert_array_equal(percentile_rank(np.full(5, 0.125)), np.full(5, 0.5))
    np.testing.assert_array_equal(percentile_rank(np.array([0.3])), [SINGLE_TASK_PERCENTILE])
    assert percentile_rank(np.zeros(0)).shape == (0,)


def test_quantile_map_equals_numpy_quantile_exactly():
    rng = np.random.default_rng(3)
    values = rng.random(101) * 0.25
    values[:10] = values[10]  # ties
    p = np.concatenate([rng.random(500), [0.0, 1.0, 0.5, 0.25, 0.999999]])
    np.testing.assert_array_equal(quantile_map(np.sort(values), p), np.quantile(values, p))


def test_calibrate_and_decline_by_hand():
    e_v = np.array([0.01, 0.04, 0.02])
    f = np.array([0.2, 0.1, 0.3])
    out = calibrate(e_v, f, 0.65, 0.35)
    np.testing.assert_allclose(out["pr_E_v"], [0.0, 1.0, 0.5])
    np.testing.assert_allclose(out["pr_f"], [0.5, 0.0, 1.0])
    level = np.array([0.35 * 0.5, 0.65, 0.65 * 0.5 + 0.35])
    np.testing.assert_allclose(out["u"], np.quantile(e_v, level))
    u = decline_penalty(np.array([0.04, 0.02]), np.array([0.01, 0.05]), 0.5)
    np.testing.assert_allclose(u, [0.04 - 0.5 * 0.03, 0.02])
    np.testing.assert_allclose(reconstructed_variance(np.array([0.5]), np.array([0.4])), [0.1])


def test_values_equal_up_to_rounding_noise_tie():
    g = 0.15595734747544668
    ranks = average_rank(np.array([np.nextafter(g, 0.0), g, np.nextafter(g, 1.0), g + 1e-9]))
    np.testing.assert_array_equal(ranks, [2.0, 2.0, 2.0, 4.0])


@pytest.mark.parametrize("scale", [1.0, -1.0, 1e9])
def test_average_rank_outside_the_packed_range_matches_scipy(scale):
    rng = np.random.default_rng(2)
    values = np.round(rng.random(300), 3) * scale  # many ties; negative or huge values
    expected = rankdata(np.round(values, 12), method="average")
    np.testing.assert_array_equal(average_rank(values), expected)


def test_average_rank_large_random_matches_scipy():
    values = np.random.default_rng(4).random(20_000) * 0.25
    values[::7] = values[3]
    np.testing.assert_array_equal(average_rank(values), rankdata(np.round(values, 12)))


@pytest.mark.parametrize("seed", range(4))
def test_ranks_and_sort_with_a_repeated_last_entry_equal_the_full_ones(seed):
    """With the last entry standing for a large block of equal values, only the others are
    sorted; the ranks and the sorted values are the full sort's, bit for bit."""
    rng = np.random.default_rng(seed)
    n = 5000
    x = np.full(n, rng.uniform(0, 0.25))
    rest = np.sort(rng.choice(n, 900 + 300 * seed, replace=False))
    x[rest] = np.round(rng.uniform(0, 0.25, rest.shape[0]), 3)  # ties among the others too
    block = int(np.setdiff1d(np.arange(n), rest)[seed])  # a task in the block
    x[rest[:7]] = x[block]  # some of the others hold the block's value too
    compact, repeats = np.append(x[rest], x[block]), n - rest.shape[0]
    positions = np.append(rest, block)
    assert np.array_equal(average_rank(compact, repeats), average_rank(x)[positions])
    assert np.array_equal(average_rank(x), rankdata(np.round(x, TIE_DECIMALS)))
    assert np.array_equal(percentile_rank(compact, repeats), percentile_rank(x)[positions])
    ordered = sorted_values(compact, repeats)
    assert ordered.shape == (n,)
    assert np.array_equal(ordered[np.arange(n)], np.sort(x))
    assert np.array_equal(average_rank(x[rest], 1), average_rank(x[rest]))
    assert np.array_equal(average_rank(np.array([0.125]), n), [(1 + n) / 2])


def test_calibrate_with_a_repeated_last_entry_equals_the_full_one():
    rng = np.random.default_rng(5)
    e_v, f = np.round(rng.uniform(0, 0.25, 300), 2), rng.uniform(0, 0.25, 300)
    e_v[-40:], f[-40:] = e_v[-1], f[-1]
    full = calibrate(e_v, f, 0.65, 0.35)
    compact = calibrate(e_v[:-39], f[:-39], 0.65, 0.35, repeats=40)
    for name, values in compact.items():
        assert np.array_equal(values, full[name][:-39]), name
