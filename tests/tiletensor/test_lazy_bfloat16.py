"""ml_dtypes (about 1.2 s to import) is imported on the first use of bfloat16, never by
``import numtile`` or a program without bfloat16 (``numtile/tiletensor/dtypes.py``).

Each case runs in a fresh interpreter: the test process itself has imported ml_dtypes.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

FLOAT32_PROGRAM = """
import numpy as np
import numtile as nt
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling

rng = np.random.default_rng(0)
a = rng.standard_normal((5, 7)).astype(np.float32)
x = nt.from_numpy(a, tile_shape=(2, 3))
np.testing.assert_allclose((nt.exp(x) * 2 - x / 3).to_numpy(), np.exp(a) * 2 - a / 3, 1e-6)
np.testing.assert_allclose(nt.sum(x, axis=0).to_numpy(), a.sum(axis=0), 1e-5)
assert nt.max(x).item() == a.max() and nt.mean(x).dtype == np.float32
np.testing.assert_allclose((x @ x.T).to_numpy(), a @ a.T, 1e-5)
np.testing.assert_array_equal(nt.where(x > 0, x, 0.0).to_numpy(), np.where(a > 0, a, 0))
np.testing.assert_array_equal(x[x > 0].to_numpy(), a[a > 0])
np.testing.assert_array_equal(x.astype(nt.float64).to_numpy(), a.astype(np.float64))
np.testing.assert_array_equal(nt.sort(x, axis=1).to_numpy(), np.sort(a, axis=1))
assert nt.result_type(nt.int32, nt.float32, 1.0) == np.float64
assert nt.isdtype(nt.float32, "real floating") and not nt.can_cast(nt.float64, nt.int64)
assert nt.finfo(nt.float32).bits == 32 and "bfloat16" in dir(nt) and "bfloat16" in nt.__all__

config = GPT2Config(vocab_size=37, n_positions=16, n_embd=12, n_layer=1, n_head=3)
model = GPT2(config, Tiling(seq=3, embd=6, vocab=10))
logits, loss = model(np.array([[1, 2, 3, 4, 5]]), np.array([[2, 3, 4, 5, 6]]))
loss.backward()
assert logits.dtype == np.float32 and np.isfinite(loss.item())
assert all(p.grad is not None for p in model.parameters())
"""


def run(script: str) -> str:
    """The stdout of ``script`` run in a fresh interpreter on this tree (after its checks
    that ``ml_dtypes`` is imported, or not, where the script says)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_float32_program_and_model_never_import_ml_dtypes():
    loaded = run(FLOAT32_PROGRAM + "import sys; print('ml_dtypes' in sys.modules)")
    assert loaded.split() == ["False"]


def test_nt_bfloat16_imports_ml_dtypes_when_first_read():
    out = run(
        """
        import sys
        import numpy as np
        import numtile as nt
        import numtile.tiletensor.dtypes as dtypes

        assert not dtypes.is_bfloat16(nt.float32) and not dtypes.is_narrow_floating(nt.int8)
        print("ml_dtypes" in sys.modules)
        bfloat16 = nt.bfloat16
        print("ml_dtypes" in sys.modules)
        import ml_dtypes
        from numtile import bfloat16 as imported

        assert bfloat16 == imported == dtypes.bfloat16 == np.dtype(ml_dtypes.bfloat16)
        assert dtypes.is_bfloat16(bfloat16) and dtypes.is_narrow_floating(bfloat16)
        values = np.linspace(-3.0, 3.0, 37) ** 3
        narrow = nt.from_numpy(values, tile_shape=10).astype(nt.bfloat16)
        assert narrow.dtype == bfloat16
        bits = narrow.to_numpy().view(np.uint16)
        np.testing.assert_array_equal(bits, values.astype(ml_dtypes.bfloat16).view(np.uint16))
        back = narrow.astype(nt.float32).to_numpy()
        np.testing.assert_array_equal(back, values.astype(ml_dtypes.bfloat16).astype(np.float32))
        assert nt.finfo(bfloat16).eps == float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
        assert nt.isdtype(bfloat16, "real floating") and not nt.isdtype(bfloat16, "integral")
        assert nt.result_type(bfloat16, nt.int64, 2.0) == bfloat16
        assert nt.result_type(bfloat16, nt.float16) == nt.float32
        assert nt.can_cast(nt.uint8, bfloat16) and not nt.can_cast(nt.int16, bfloat16)
        """
    )
    assert out.split() == ["False", "True"]


def test_the_name_bfloat16_imports_ml_dtypes_when_first_used():
    out = run(
        """
        import sys
        import numpy as np
        import numtile as nt

        x = nt.asarray([1.5, -2.25, 3.0], dtype="bfloat16")
        print("ml_dtypes" in sys.modules, x.dtype, nt.ones(2).astype("bfloat16").dtype)
        print(x.astype(nt.float32).to_numpy().tolist())
        """
    )
    assert out.split("\n")[:2] == ["True bfloat16 bfloat16", "[1.5, -2.25, 3.0]"]


def test_an_unsupported_dtype_error_still_names_bfloat16():
    out = run(
        """
        import sys
        import numtile as nt

        try:
            nt.zeros(2, dtype="float128")
        except TypeError as error:
            print(error)
        print("ml_dtypes" in sys.modules)
        """
    )
    message, loaded = out.strip().split("\n")
    assert "complex128, bfloat16, float16" in message and loaded == "False"
