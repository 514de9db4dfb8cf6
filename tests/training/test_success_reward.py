"""The success reward end to end on the hand-made pool: ``train grpo --reward success`` scores
every rollout 0 or 1, its history and the store say so, and what was written under one reward
is refused under the other with one line (a resume and the store before the policy loads, a
history read into a scheduler) while nothing of it changes."""

from __future__ import annotations

import json

import pytest
import torch

from envsched_gnn.cli import main
from envsched_gnn.graph_store.connect import open_store
from envsched_gnn.observations import read_history
from envsched_gnn.training.grpo.train import HISTORY_FILE, RESULT_FILE
from tests.training.grpo_setup import POOL
from tests.training.test_grpo_user_errors import SMALL_RUN, _inputs
from tests.training.tiny_policy import untrained_policy_dir

pytestmark = [pytest.mark.slow, pytest.mark.store]

MIXED = "holds 'success' rewards, not 'fraction' ones: the two rewards do not mix"


def _last_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_a_success_run_is_refused_under_partial_credit(
    tmp_path, capsys, store, store_server, monkeypatch
):
    torch.set_num_threads(1)
    for name, value in zip(
        ("NEO4J_USER", "NEO4J_PASSWORD", "NEO4J_DATABASE"),
        (*store_server.auth, store_server.database),
        strict=True,
    ):
        monkeypatch.setenv(name, value)
    store.write_pool(POOL)
    inputs = _inputs(tmp_path, POOL)
    out = tmp_path / "run"

    def train(folder, *more: str) -> int:
        model = ["--model", str(untrained_policy_dir()), "--out", str(folder)]
        return main(["train", "grpo", *model, *inputs, *SMALL_RUN, *more])

    assert train(out, "--store", store_server.uri, "--reward", "success", "--stop-after", "1") == 0

    history = read_history(out / HISTORY_FILE)
    assert history and {o.reward for o in history} == {"success"}
    assert {r for o in history for r in o.rewards} <= {0.0, 1.0}
    rewards = json.loads((out / RESULT_FILE).read_text())["rewards"]
    assert [{o.task_id: list(o.rewards) for o in history}] == rewards
    lines = (out / HISTORY_FILE).read_text().splitlines()
    assert all(json.loads(line)["reward"] == "success" for line in lines)
    with open_store(store_server.uri) as opened:
        assert opened.read_observations() == history
    capsys.readouterr()

    monkeypatch.setattr(
        "envsched_gnn.training.policy.load_policy",
        lambda *args, **kwargs: pytest.fail("the policy loaded before the reward was checked"),
    )
    # resumed under partial credit: refused before the policy loads
    checkpoint = out / "checkpoints" / "last.ckpt"
    assert train(out, "--resume", str(checkpoint)) == 1
    last = _last_error(capsys)
    assert last.startswith(f"error: {checkpoint}: task ") and MIXED in last
    assert read_history(out / HISTORY_FILE) == history

    # a partial-credit run into the success store: refused before the policy loads
    assert train(tmp_path / "other", "--store", store_server.uri) == 1
    assert _last_error(capsys).startswith(f"error: the store {store_server.uri} {MIXED}")
    assert not (tmp_path / "other").exists()
    with open_store(store_server.uri) as opened:
        assert opened.read_observations() == history

    # the run's history read into a scheduler: only under --reward success
    select = ["select", "--graph", inputs[3], "--history", str(out / HISTORY_FILE)]
    select += ["--step", "1", "--batch", "2", "--out", str(tmp_path / "batch.json")]
    assert main(select) == 2
    assert MIXED in capsys.readouterr().err
    assert main([*select, "--reward", "success"]) == 0
