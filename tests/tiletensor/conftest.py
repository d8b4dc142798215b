"""Fixtures of the automatic fusion tests (test_auto_fusion.py, test_fused_reduction.py)."""

from __future__ import annotations

import pytest

from numtile.runtime import get_runtime
from numtile.tiletensor import auto_fusion


@pytest.fixture
def fusing():
    """Automatic fusion on for the test (and put back as it was)."""
    previous = auto_fusion.set_enabled(True)
    yield
    auto_fusion.set_enabled(previous)


@pytest.fixture
def submitted(monkeypatch, fusing):
    """The names of the codelets submitted while the test runs, in order."""
    runtime = get_runtime()
    names: list[str] = []
    submit = runtime.submit

    def recording(codelet, *args, **kwargs):
        names.append(codelet.name)
        return submit(codelet, *args, **kwargs)

    monkeypatch.setattr(runtime, "submit", recording)
    return names
