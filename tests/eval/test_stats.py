"""The reports' statistics on hand-made numbers: intervals, the noise rule, Spearman."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from envsched_gnn.eval.stats import (
    NOISE_MARK,
    between_group_share,
    env_bootstrap,
    excludes_zero,
    format_ci,
    inside_noise,
    mean_ci,
    paired_difference,
    percentile_ci,
    permutation_p,
    spearman,
    verdict,
)


def test_mean_ci_is_the_student_t_interval():
    stat = mean_ci([1.0, 2.0, 3.0])
    assert stat["mean"] == 2.0 and stat["n"] == 3
    assert stat["ci95"] == pytest.approx(student_t.ppf(0.975, 2) * 1.0 / math.sqrt(3))
    assert mean_ci([4.0]) == {"mean": 4.0, "ci95": None, "se": None, "n": 1}


def test_paired_difference_pairs_by_key_and_keeps_the_differences_when_asked():
    a, b = {0: 1.0, 1: 3.0, 2: 9.0}, {1: 1.0, 2: 4.0, 3: 0.0}
    stat = paired_difference(a, b, per_key="per_seed")
    assert stat["n"] == 2 and stat["mean"] == 3.5 and stat["per_seed"] == [2.0, 5.0]
    assert "per_seed" not in paired_difference(a, b)
    with pytest.raises(ValueError, match="share no key"):
        paired_difference({0: 1.0}, {1: 1.0})


@pytest.mark.parametrize(
    ("stat", "inside"),
    [
        ({"mean": 0.1, "ci95": 0.2}, True),
        ({"mean": -0.1, "ci95": 0.2}, True),
        ({"mean": 0.3, "ci95": 0.2}, False),
        ({"mean": -0.3, "ci95": 0.2}, False),
        ({"mean": 0.3, "ci95": None}, False),
        (None, False),
    ],
)
def test_one_noise_rule_for_the_tables_and_the_words(stat, inside):
    assert inside_noise(stat) is inside
    if stat is not None:
        assert format_ci(stat, noise=True).endswith(NOISE_MARK) is inside
    if stat is not None:
        words = verdict(stat, "above", "below")
        assert words.startswith("inside the noise") is inside
        if stat["ci95"] is None:
            assert words == "no interval (a single pair)"


def test_format_ci():
    assert format_ci({"mean": 0.12345, "ci95": 0.01}) == "0.123 ± 0.010"
    assert format_ci({"mean": 0.5, "ci95": None}, 2) == "0.50"
    assert format_ci({"mean": 3.0, "ci95": 1.0}, 0, sign=True) == "+3 ± 1"
    assert format_ci(None) == "-" and format_ci(None, missing="n/a") == "n/a"
    assert format_ci({"mean": -0.1, "ci95": 0.2}, 1, sign=True, noise=True) == (
        "-0.1 ± 0.2" + NOISE_MARK
    )


def test_spearman_is_undefined_over_too_few_pairs_or_a_constant_side():
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 2], [1, 2]))
    assert spearman([1, 2], [1, 2], min_pairs=2) == pytest.approx(1.0)
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(spearman([], [], min_pairs=1))


def test_the_between_group_share_by_hand():
    # groups x: (0, 2), y: (4, 6); grand mean 3; SS_t = 9 + 1 + 1 + 9 = 20;
    # SS_b = 2 * (1 - 3)^2 + 2 * (5 - 3)^2 = 16; SS_w = 4; N = 4, g = 2
    share = between_group_share([0.0, 2.0, 4.0, 6.0], ["x", "x", "y", "y"], permutations=199)
    assert (share["values"], share["groups"]) == (4, 2)
    assert share["eta2"] == pytest.approx(0.8)
    assert share["epsilon2"] == pytest.approx((16 - 1 * 4 / 2) / 20)  # 0.7
    assert share["chance"] == pytest.approx(1 / 3)
    # the 3 distinct splits into two pairs give eta^2 0.8, 0.2 and 0: p ~ 1/3 of the shuffles
    assert 0.2 < share["p_value"] < 0.5


def test_a_real_group_effect_is_found_and_shuffled_labels_are_not():
    rng = np.random.default_rng(0)
    labels = [i % 10 for i in range(400)]
    values = np.array(labels) * 0.1 + rng.normal(0.0, 0.2, 400)
    found = between_group_share(values, labels)
    assert found["eta2"] > 0.5 and found["p_value"] < 0.01
    assert found["epsilon2"] == pytest.approx(found["eta2"], abs=0.02)
    none = between_group_share(rng.normal(0.0, 1.0, 400), labels)
    assert none["p_value"] > 0.05 and abs(none["epsilon2"]) < 0.03
    assert none["eta2"] == pytest.approx(none["chance"], abs=0.03)


def test_the_between_group_share_is_undefined_without_variance_and_checks_its_input():
    equal = between_group_share([1.0, 1.0, 1.0], ["a", "b", "b"])
    assert math.isnan(equal["eta2"]) and math.isnan(equal["p_value"])
    with pytest.raises(ValueError, match="3 values but 2 labels"):
        between_group_share([1.0, 2.0, 3.0], ["a", "b"])


def test_the_percentile_interval_skips_undefined_draws():
    draws = [float(x) for x in range(101)] + [math.nan, math.inf]
    assert percentile_ci(draws) == [2.5, 97.5]
    assert all(math.isnan(v) for v in percentile_ci([math.nan, math.nan]))


def test_the_permutation_p_value_counts_ties_and_the_observation_itself():
    null = [0.1, 0.2, 0.3, 0.3, 0.5]
    assert permutation_p(null, 0.3) == 4 / 6  # 0.3, 0.3 and 0.5 reach it, plus itself
    assert permutation_p(null, 0.3 + 1e-13) == 4 / 6  # a rounding error is still a tie
    assert permutation_p(null, 0.9) == 1 / 6


def _bootstrap_rows(env_of_rows, keep=None, count=200):
    seen = []

    def score(rows, rng):
        seen.append([r.tolist() for r in rows])
        return np.array([len(rows[0])], np.float64)

    draws = env_bootstrap(env_of_rows, count, np.random.default_rng(0), score, keep)
    assert draws.shape == (count, 1)
    return seen


def _drawn(rows: list[int]) -> tuple[str, ...]:
    """The environments drawn, read from set 0's rows (a: rows 0 and 1, b: row 2)."""
    envs, k = [], 0
    while k < len(rows):
        envs.append("a" if rows[k] == 0 else "b")
        k += 2 if rows[k] == 0 else 1
    return tuple(envs)


def test_an_environment_bootstrap_draws_whole_environments_alike_in_every_set():
    seen = _bootstrap_rows([np.array(["a", "a", "b"]), np.array(["b", "a"])])
    second = {"a": [1], "b": [0]}
    for rows in seen:
        drawn = _drawn(rows[0])
        assert len(drawn) == 2  # two environments, drawn with replacement
        assert rows[0] == [r for e in drawn for r in {"a": [0, 1], "b": [2]}[e]]
        assert rows[1] == [r for e in drawn for r in second[e]]
    assert {_drawn(rows[0]) for rows in seen} == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}


def test_an_environment_bootstrap_draws_only_kept_rows_and_their_environments():
    keep = [np.array([True, True, False]), np.array([False, True])]
    seen = _bootstrap_rows([np.array(["a", "a", "b"]), np.array(["b", "a"])], keep, count=20)
    assert all(rows == [[0, 1], [1]] for rows in seen)  # b has no kept row: never drawn


def test_the_noise_rule_takes_a_percentile_interval_too():
    assert inside_noise([-0.1, 0.2]) and not excludes_zero([-0.1, 0.2])
    assert excludes_zero([0.05, 0.2]) and not inside_noise([0.05, 0.2])
    assert not inside_noise([math.nan, math.nan]) and not excludes_zero([math.nan, math.nan])
    assert excludes_zero({"mean": 0.3, "ci95": 0.1})
    assert not excludes_zero({"mean": 0.3, "ci95": None})
