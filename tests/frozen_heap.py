"""``frozen_heap``: a module-scoped fixture for test files that collect garbage often.

Each start of a runtime with a memory limit runs a full ``gc.collect()`` (``set_manager``:
tiles that only cycles keep alive must not be adopted), and tests here collect too, to
check that tiles die. In a test process that has compiled many Numba kernels before (a CI
worker runs other files first) the heap holds ~650k objects and each full collection
takes ~1 s, most of such a file's time. The fixture collects once, then freezes
(``gc.freeze``) the objects alive when the file starts: later collections skip them and
scan only what the file's own tests made, which is everything these tests create and
check. The objects go back to the collector when the file ends (``gc.unfreeze``)."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(scope="module")
def frozen_heap():
    gc.collect()  # garbage left by earlier files is freed now, not frozen
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
