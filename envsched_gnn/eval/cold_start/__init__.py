"""``eval cold-start``: environments joining a pool, simulated on recorded observations; its
measure, command and report."""
