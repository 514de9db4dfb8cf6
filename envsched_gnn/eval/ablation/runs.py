"""The finished runs of ``eval ablate`` on disk, so that a rerun of the same command resumes.

Each run (name, seed) is written as soon as it finishes, atomically, to
``out/per_seed/<name>/seed<s>.json``: its name, scheduler, seed, graph and control, learner,
per-step records, times, and its identity with the identity's key. The identity is what
determines the run:

- the job: name, registered scheduler, graph key, penalty graph key, seed;
- the config, less :data:`SELECTION_FIELDS` (which runs exist, how many run at once, which
  score columns the table shows) and less the other learner's settings; the dynamic sampling
  settings only for the runs of ``NAME+ds`` (which read them);
- the SHA-256 of the pool (every environment and task as its pool files hold them);
- the SHA-256 of each graph the run reads (for a control drawn per seed: the default graph it
  is drawn from; the draw is fixed by the control seed and the run seed, both in the
  identity);
- with the policy learner, the SHA-256 of the starting policy's files.

key = SHA-256 of the identity as canonical JSON. A rerun loads every planned run whose file
holds the same key and runs only the others; a file whose key differs is never reused or
overwritten: the rerun stops before running anything, naming the file and the differing
fields. Records keep non-finite floats as JSON ``NaN``, and fresh runs are read back from their
files too, so a resumed ablation's table is computed from exactly what an uninterrupted one's is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from envsched_gnn.config_cli import non_default_fields
from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.pool_io import environment_to_dict, task_to_dict
from envsched_gnn.eval.ablation.config import DEFAULT_K, AblationConfig, Job, grid_name
from envsched_gnn.eval.controls import CONTROLS, DRAWN_CONTROLS
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.json_files import canonical_sha256, write_json_atomically
from envsched_gnn.scheduler.dynamic_sampling import SUFFIX

RUNS_DIR = "per_seed"
SELECTION_FIELDS = ("seeds", "schedulers", "controls", "k_grid", "oracle_graph", "score_steps")
"""Config fields that choose which runs exist and what the table shows, not what a run does."""


class RunMismatch(ValueError):
    """A finished run on disk whose identity differs from the run planned in its place."""


def pool_fingerprint(pool: Pool) -> str:
    """SHA-256 of every environment and task, in the form of the pool files."""
    return canonical_sha256(
        {
            "envs": {env_id: environment_to_dict(env) for env_id, env in pool.envs.items()},
            "tasks": sorted((task_to_dict(t) for t in pool.tasks), key=lambda t: t["task_id"]),
        }
    )


def graph_fingerprint(graph: TaskGraph) -> str:
    """SHA-256 of the nodes (ids, environments, order) and of each relation's edge arrays."""
    digest = hashlib.sha256(canonical_sha256([graph.task_ids, graph.env_ids]).encode())
    for relation in sorted(graph.edges):
        e = graph.edges[relation]
        digest.update(relation.encode())
        for array, dtype in ((e.src, np.int64), (e.dst, np.int64), (e.sim, np.float64)):
            digest.update(np.ascontiguousarray(array, dtype).tobytes())
    return digest.hexdigest()


def folder_fingerprint(folder: str | Path) -> str:
    """SHA-256 of every file under ``folder``: relative paths and bytes, in path order."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def run_settings(config: AblationConfig) -> dict:
    """The config as it determines a run, as the fields that differ from their defaults
    (:func:`~envsched_gnn.config_cli.non_default_fields`: an option added later at a default
    that keeps the old behaviour leaves finished runs reusable), with K always: less
    :data:`SELECTION_FIELDS`, the simulator's worker count, and the other learner's settings
    (the policy learner keeps K; its ``model`` path and process count give way to the
    starting policy's fingerprint)."""
    settings = {k: v for k, v in non_default_fields(config).items() if k not in SELECTION_FIELDS}
    settings.pop("workers", None)
    settings.pop("sampling", None)  # a run's own when it samples dynamically (identity)
    if config.learner == "sim":
        settings.pop("policy", None)
        settings.pop("evaluations", None)
    else:
        settings["simulator"] = {"rollouts": config.simulator.rollouts}
        settings["evaluations"] = config.evaluations
        policy = settings.get("policy", {})
        policy.pop("workers", None)
        policy.pop("model", None)
    return settings


class FinishedRuns:
    """The ``per_seed`` folder of one ablation: which planned runs are done, and saving more."""

    def __init__(
        self,
        out: str | Path,
        pool: Pool,
        graphs: dict[str, TaskGraph],
        config: AblationConfig,
        log: Callable[[str], None] = print,
    ) -> None:
        self.folder = Path(out) / RUNS_DIR
        self.config = config
        self.log = log
        self.settings = run_settings(config)
        self.pool = pool_fingerprint(pool)
        self.graphs = {key: graph_fingerprint(graph) for key, graph in graphs.items()}

    def path(self, job: Job) -> Path:
        return self.folder / job.name / f"seed{job.seed}.json"

    def identity(self, job: Job, start: str | None = None) -> dict:
        """What determines the run of ``job`` (module doc); ``start``: the starting policy's
        fingerprint (policy learner)."""

        def graph(key: str | None) -> str | None:
            if key is None:
                return None
            return self.graphs[grid_name(*DEFAULT_K) if key in DRAWN_CONTROLS else key]

        identity = {
            "job": asdict(job),
            "settings": self.settings,
            "pool": self.pool,
            "graph": graph(job.graph),
            "penalty_graph": graph(job.penalty_graph),
            "start": start,
        }
        if job.scheduler.endswith(SUFFIX):
            identity["sampling"] = non_default_fields(self.config.sampling)
        return identity

    def split(
        self, jobs: Sequence[Job], start: str | None = None
    ) -> tuple[dict[Job, dict], list[Job]]:
        """The finished runs of ``jobs`` (loaded) and the jobs still to run; raises
        :class:`RunMismatch`, before anything runs, when a file holds another run."""
        done: dict[Job, dict] = {}
        mismatched = []
        for job in jobs:
            path = self.path(job)
            if not path.exists():
                continue
            stored = json.loads(path.read_text(encoding="utf-8"))
            identity = self.identity(job, start)
            if stored.get("key") == canonical_sha256(identity):
                done[job] = stored
            else:
                changed = _differences(stored.get("identity", {}), identity)
                mismatched.append(f"{path}: {', '.join(changed[:6]) or 'key'} differ")
        if mismatched:
            raise RunMismatch(
                "ablate: finished runs in this folder were made with other options, pool, "
                "graph or starting policy; use another --out, or delete these files to rerun "
                "them:\n  " + "\n  ".join(mismatched)
            )
        todo = [job for job in jobs if job not in done]
        if done:
            names = ", ".join(f"{job.name} seed {job.seed}" for job in done)
            self.log(
                f"resume: reusing {len(done)} finished run(s) from {self.folder} ({names}); "
                f"{len(todo)} to run"
            )
        return done, todo

    def save(self, job: Job, run: dict, start: str | None = None) -> dict:
        """Write ``run`` (a harness run of ``job``) with its identity; returns it as read back."""
        identity = self.identity(job, start)
        control = job.name.removeprefix("envsched_")
        payload = {
            "name": job.name,
            "scheduler": job.scheduler,
            "seed": job.seed,
            "graph": job.graph,
            "control": control if control.removesuffix(SUFFIX) in CONTROLS else None,
            "learner": self.config.learner,
            **{k: v for k, v in run.items() if k not in ("name", "seed")},
            "key": canonical_sha256(identity),
            "identity": identity,
        }
        path = write_json_atomically(self.path(job), payload)
        return json.loads(path.read_text(encoding="utf-8"))


def _differences(old: Any, new: Any) -> list[str]:
    """Dotted paths where a stored identity and a planned one differ."""
    return _paths_differing(old, json.loads(json.dumps(new)), "")  # tuples as lists, as stored


def _paths_differing(old: Any, new: Any, prefix: str) -> list[str]:
    """Dotted paths of the leaves that differ; a dict on one side only (its fields at their
    defaults on the other) names its own leaves."""
    if isinstance(old, dict) or isinstance(new, dict):
        old = old if isinstance(old, dict) else {}
        new = new if isinstance(new, dict) else {}
        out = []
        for key in sorted(set(old) | set(new)):
            out += _paths_differing(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [prefix.rstrip(".") or "identity"]
