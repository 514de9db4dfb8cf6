"""``eval ablate``: its config, the two learners, resumable runs, the summary and report."""
