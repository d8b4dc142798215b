"""Complex tiles count 4x the real flops in the linear algebra codelets (a complex
multiply-add is 8 real flops to a real one's 2), so traces and the summary's GFLOP/s are not
4x low; element-wise codelets keep their count."""

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import Codelet
from numtile.runtime.handle import DataHandle
from numtile.tiletensor.codelets import linalg, lu, qr, tsqr


def _flops_of(run, dtype):
    """The flops each linear algebra codelet counted while ``run(dtype)`` ran."""
    codelets = [linalg.gemm, linalg.potrf, linalg.trsm, linalg.herk, linalg.syrk]
    codelets += [qr.geqrt_panel, tsqr.tsqr_leaf, tsqr.tsqr_node, tsqr.tsqr_apply, lu.getrf_panel]
    before = [c.total_flops for c in codelets]
    run(dtype)
    nt.wait_all()
    return {c.name: c.total_flops - b for c, b in zip(codelets, before, strict=True)}


def _factorisations(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((5, 5))
    spd = a @ a.conj().T + 5 * np.eye(5)
    tiled = nt.from_numpy(a, tile_shape=(2, 2))
    (tiled @ tiled).to_numpy()
    nt.linalg.cholesky(nt.from_numpy(spd, tile_shape=(2, 2))).to_numpy()
    nt.linalg.det(tiled).to_numpy()  # tiled LU: panels, TRSM and GEMM updates
    nt.linalg.qr(tiled)[1].to_numpy()  # blocked: panels and GEMM updates
    tall = rng.standard_normal((12, 3)).astype(dtype)
    nt.linalg.qr(nt.from_numpy(tall, tile_shape=(4, 3)))[0].to_numpy()  # TSQR


def test_complex_factorisations_count_four_times_the_real_flops():
    real = _flops_of(_factorisations, np.float64)
    complex_ = _flops_of(_factorisations, np.complex128)
    # the real Cholesky updates with syrk, the complex one with herk: the same formula
    real["herk"], real["syrk"] = real["syrk"], 0.0
    assert all(real[name] > 0 for name in real if name != "syrk"), real
    for name, flops in real.items():
        # differences of running totals: rounding of the totals, far below a factor of 4
        assert complex_[name] == pytest.approx(4 * flops, rel=1e-6), name


def test_only_complex_tiles_scale_and_only_where_asked():
    scaled = Codelet("test_scaled_flops", kernel=lambda ops, x: None, flops=lambda s: 10.0,
                     complex_flops=4.0)  # fmt: skip
    plain = Codelet("test_plain_flops", kernel=lambda ops, x: None, flops=lambda s: 10.0)
    real, complex_ = DataHandle((2,), np.float32), DataHandle((2,), np.complex64)
    assert scaled.task_flops([real], ()) == 10.0
    assert scaled.task_flops([complex_], ()) == 40.0
    assert plain.task_flops([complex_], ()) == 10.0
