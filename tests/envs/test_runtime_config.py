"""RuntimeConfig refuses values the runtime cannot run with."""

from __future__ import annotations

import pytest

from envsched_gnn.envs.runtime_config import RuntimeConfig


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="workers"):
        RuntimeConfig(workers=0)
    with pytest.raises(ValueError, match="call_timeout_s"):
        RuntimeConfig(call_timeout_s=0)
