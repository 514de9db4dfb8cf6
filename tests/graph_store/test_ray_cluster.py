"""The build on a Ray cluster of two node processes (``ray start --head`` and one
``ray start --address``, one CPU each) equals the local build edge for edge; its pieces ran on
both nodes, with the package that the driver shipped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from envsched_gnn.graph_build import builder, embeddings
from envsched_gnn.graph_build.builder import build
from envsched_gnn.graph_build.parallel import connect_ray
from tests.graph_store.small_pool import small_pool

POOL = small_pool(5, 7, seed=4)
JOIN_S = 120.0
"""Seconds a node may take to come up (two cores shared with other jobs)."""
STOP_S = 45.0
"""Seconds a node may take to drain and stop after SIGTERM (Ray drains for up to 30 s)."""


@dataclass
class RayNodes:
    """Ray node processes started here, each ``ray start --block`` in its own process group,
    so that they can be stopped without touching any other Ray on this machine (``ray stop``
    stops every Ray process of the user)."""

    temp_dir: Path
    started: list[tuple[subprocess.Popen, Path]]

    def start(self, name: str, *args: str) -> None:
        """Start the node ``name`` (its output in ``temp_dir/name.log``)."""
        log = self.temp_dir / f"{name}.log"
        # The test cluster runs without Ray's token authentication: this process reads the
        # auth mode once, when ray is imported, so it cannot take up a token made here.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
        env |= {"OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled"}
        command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", *args]
        command += ["--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats"]
        with log.open("w") as out:
            process = subprocess.Popen(
                command,
                cwd=self.temp_dir,  # not the checkout: the workers import the shipped package
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((process, log))

    def wait_for(self, what: str, ready: Callable[[], bool]) -> None:
        """Return once ``ready()``; raise with a node's output if it exits or time runs out."""
        deadline = time.monotonic() + JOIN_S
        while not ready():
            for process, log in self.started:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"ray start exited with {process.returncode} while waiting for {what}; "
                        f"its output ({log}):\n{log.read_text()[-3000:]}"
                    )
            if time.monotonic() > deadline:
                logs = ", ".join(str(log) for _, log in self.started)
                raise RuntimeError(f"no {what} after {JOIN_S:.0f} s; node output in {logs}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the nodes, the last started first (a node whose head has gone waits for it),
        then kill whatever of their process groups outlived them."""
        for process, _ in reversed(self.started):
            process.send_signal(signal.SIGTERM)  # --block: drain, stop the node's processes
            try:
                process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


@dataclass
class Cluster:
    address: str
    temp_dir: Path


@pytest.fixture
def ray_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Cluster]:
    """A head and a worker node, and this process connected to them by ``connect_ray``.

    A Ray left initialised by an earlier test is shut down first, else ``connect_ray`` would
    use it instead of the cluster; fixtures that need Ray start their own.
    """
    ray = pytest.importorskip("ray", reason="the Ray build needs the 'ray' extra")
    if ray.is_initialized():
        ray.shutdown()
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-"))  # short: Ray's socket paths are limited
    nodes = RayNodes(temp_dir, [])
    try:
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        nodes.start("head", "--head", f"--port={port}", f"--temp-dir={temp_dir}")
        head_address = temp_dir / "ray_current_cluster"
        nodes.wait_for("the head node", head_address.exists)
        address = head_address.read_text().strip()
        nodes.start("worker", f"--address={address}")
        # Ray puts the driver's working directory first on every worker's sys.path; from the
        # checkout, workers on this machine would import it, as no remote node could.
        monkeypatch.chdir(tmp_path)
        connect_ray(address)
        nodes.wait_for("two alive nodes", lambda: len(_alive(ray)) == 2)
        yield Cluster(address, temp_dir)
    finally:
        ray.shutdown()
        nodes.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _alive(ray: Any) -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def _noting(fn: Callable, notes: Path) -> Callable:
    """``fn``, leaving in ``notes`` one file per call: the node it ran on and the
    ``envsched_gnn`` it imported."""

    def noted(*args: Any) -> Any:
        import ray

        import envsched_gnn

        node = ray.get_runtime_context().get_node_id()
        (notes / uuid.uuid4().hex).write_text(f"{node} {envsched_gnn.__file__}")
        return fn(*args)

    return noted


@pytest.mark.slow  # two Ray nodes, each loading the encoder: about 60 s on 2 busy cores
def test_graph_build_on_a_two_node_cluster_equals_the_local_build(
    ray_cluster, embedder, config, monkeypatch, tmp_path
) -> None:
    import ray

    local = build(POOL, config, embedder=embedder)
    notes = tmp_path / "notes"  # each piece leaves a note: one machine, one file system
    notes.mkdir()
    monkeypatch.setattr(builder, "within_arrays", _noting(builder.within_arrays, notes))
    monkeypatch.setattr(embeddings, "encode_in_worker", _noting(embeddings.encode_in_worker, notes))
    monkeypatch.setattr(embeddings, "WORKER_CHUNK", 8)  # several pieces of embedding
    on_ray = build(POOL, replace(config, ray=ray_cluster.address), embedder=embedder)

    assert ray.get_runtime_context().gcs_address == ray_cluster.address
    assert on_ray.graph.task_ids == local.graph.task_ids
    assert list(on_ray.graph.edge_rows()) == list(local.graph.edge_rows())
    assert on_ray.abstracts == local.abstracts
    assert np.array_equal(on_ray.node_abstracts.vectors, local.node_abstracts.vectors)
    ran = [note.read_text().split(" ", 1) for note in notes.iterdir()]
    distinct = len(local.node_abstracts.texts)
    assert len(ran) == len(POOL.envs) + -(-distinct // 8)
    assert {node for node, _ in ran} == _alive(ray)  # both nodes
    packages = {package for _, package in ran}
    assert all(Path(p).is_relative_to(ray_cluster.temp_dir) for p in packages), packages
