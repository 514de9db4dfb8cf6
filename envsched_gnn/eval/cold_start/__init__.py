"""``eval cold-start``: the replay of environments joining a pool, its command and its report."""
