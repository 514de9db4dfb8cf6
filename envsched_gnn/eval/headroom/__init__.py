"""``eval headroom``: what GRPO could gain from a policy on a pool, its command and its report."""
