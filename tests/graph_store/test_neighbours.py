"""Top-k neighbours by similarity, ties by the pair key (spec section 3), against loops."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from envsched_gnn.graph_build.neighbours import (
    pair_keys,
    task_hashes,
    top_neighbours,
    top_shared_neighbours,
)


def reference_top(sims, valid, k, ids_rows, ids_cols) -> list[tuple[int, int]]:
    """A plain loop: per row, sort valid columns with sim > 0 by (-min(sim, 1), blake2b key)."""
    chosen = []
    for r in range(sims.shape[0]):
        candidates = [
            (-min(sims[r, c], 1.0), blake_pair_key(ids_rows[r], ids_cols[c]), c)
            for c in range(sims.shape[1])
            if valid[r, c] and sims[r, c] > 0
        ]
        chosen += [(r, c) for _, _, c in sorted(candidates)[:k]]
    return chosen


def blake_pair_key(target: str, candidate: str) -> int:
    """The pair key computed from scratch with hashlib and Python integers (mod 2^64)."""
    mask = (1 << 64) - 1

    def h(x: str) -> int:
        return int.from_bytes(hashlib.blake2b(x.encode(), digest_size=8).digest(), "little")

    def mix(x: int) -> int:
        x ^= x >> 30
        x = (x * 0xBF58476D1CE4E5B9) & mask
        x ^= x >> 27
        x = (x * 0x94D049BB133111EB) & mask
        return x ^ (x >> 31)

    return mix(h(target) ^ mix(h(candidate)))


@pytest.mark.parametrize("seed", range(4))
def test_top_neighbours_ranks_by_sim_then_pair_key_and_drops_non_positive(seed) -> None:
    rng = np.random.default_rng(seed)
    rows, cols, k = 30, 40, 5
    sims = rng.choice([1.3, 1.0, 0.75, 0.5, 0.0, -0.2], (rows, cols))  # many ties, 1.3 -> 1
    valid = rng.random((rows, cols)) < 0.8
    ids_r = [f"r{i:02d}" for i in range(rows)]
    ids_c = [f"c{j:02d}" for j in range(cols)]
    found_r, found_c = top_neighbours(sims, valid, k, task_hashes(ids_r), task_hashes(ids_c))
    assert list(zip(found_r.tolist(), found_c.tolist(), strict=True)) == reference_top(
        sims, valid, k, ids_r, ids_c
    )
    assert np.all(sims[found_r, found_c] > 0) and np.all(valid[found_r, found_c])


def test_pair_key_is_a_function_of_the_pair_only() -> None:
    ids = ["a", "b", "env7-task-003", "ünïcode"]
    h = task_hashes(ids)
    keys = pair_keys(h[:, None], h[None, :])
    for i, target in enumerate(ids):
        for j, candidate in enumerate(ids):
            assert int(keys[i, j]) == blake_pair_key(target, candidate)
    assert keys[0, 1] != keys[1, 0]  # asymmetric: (target, candidate) is ordered


def test_ties_do_not_make_hubs() -> None:
    """All candidates tie: every target picks its k by pair key, spread evenly over sources."""
    n_targets, n_sources, k = 400, 50, 5
    ids_t = [f"target-{i}" for i in range(n_targets)]
    ids_s = [f"source-{j}" for j in range(n_sources)]
    sims = np.ones((n_targets, n_sources))
    valid = np.ones_like(sims, dtype=bool)
    _, cols = top_neighbours(sims, valid, k, task_hashes(ids_t), task_hashes(ids_s))
    out_degree = np.bincount(cols, minlength=n_sources)
    expected = n_targets * k / n_sources  # 40 each, binomial sd about 6
    assert out_degree.max() < 1.6 * expected and out_degree.min() > 0.4 * expected
    first = cols.reshape(n_targets, k)
    assert len({tuple(sorted(row)) for row in first.tolist()}) > 0.95 * n_targets


@pytest.mark.parametrize("seed", range(12))
def test_top_shared_neighbours_equals_top_neighbours_of_the_broadcast(seed) -> None:
    """Rows sharing one similarity per column, valid where environments differ: the prefix
    computation returns what the full (rows, columns) ranking returns, ties included."""
    rng = np.random.default_rng(seed)
    rows, cols, k = int(rng.integers(1, 40)), int(rng.integers(1, 200)), int(rng.integers(1, 15))
    col_sims = rng.choice([1.2, 1.0, 0.9, 0.9, 0.4, 0.1, 0.0, -0.3], cols)
    col_envs = rng.integers(0, 6, cols)
    row_envs = rng.integers(0, 6, rows)
    row_h = task_hashes([f"r{seed}-{i}" for i in range(rows)])
    col_h = task_hashes([f"c{seed}-{j}" for j in range(cols)])
    expected = top_neighbours(
        np.broadcast_to(col_sims, (rows, cols)),
        row_envs[:, None] != col_envs[None, :],
        k,
        row_h,
        col_h,
    )
    cells = int(rng.integers(1, 2000))  # chunks of rows, down to one row at a time
    found = top_shared_neighbours(col_sims, row_envs, col_envs, k, row_h, col_h, cells=cells)
    for want, got in zip(expected, found, strict=True):
        np.testing.assert_array_equal(got, want)
