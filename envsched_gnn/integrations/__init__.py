"""Adapters to the RL trainers users already have: TRL, Ray, prime-rl, verl.

Each is an optional extra (``pip install envsched-gnn[trl]``, ``[ray]``, ``[verl]``); they use
``scheduler`` and ``envs`` (and ``training`` read-only), and nothing in the core imports them.
Each builds or checks its scheduler with :mod:`~envsched_gnn.integrations.schedulers`, which
also says what each does with a scheduler behind dynamic sampling.
"""
