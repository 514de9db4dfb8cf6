"""RuntimeConfig refuses values the runtime cannot run with."""

from __future__ import annotations

import pytest

from envsched_gnn.envs.runtime_config import (
    PACKAGES_VARIABLE,
    RuntimeConfig,
    SandboxConfig,
    packages_from_environment,
    set_environment_defaults,
)


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="workers"):
        RuntimeConfig(workers=0)
    with pytest.raises(ValueError, match="call_timeout_s"):
        RuntimeConfig(call_timeout_s=0)


def test_sandbox_packages_from_the_environment_variable(monkeypatch):
    monkeypatch.setenv(PACKAGES_VARIABLE, " numpy, ,sympy,,numpy ")
    assert packages_from_environment() == ["numpy", "sympy", "numpy"]
    assert SandboxConfig().packages == ("mpmath", "numpy", "sympy")
    set_environment_defaults(False, ["mpmath", "pandas"])
    assert SandboxConfig().packages == ("mpmath", "numpy", "sympy", "pandas")
    monkeypatch.delenv(PACKAGES_VARIABLE)
    assert SandboxConfig().packages == ("mpmath",)
