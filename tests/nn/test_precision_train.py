"""Training in a precision mode: the checkpoint attribute, float32 master weights, resuming in
another mode, ``--precision`` checks."""

import warnings

import numpy as np
import pytest

from numtile.io import checkpoint_info
from numtile.tiletensor.precision import PrecisionFallbackWarning
from numtile.train import ConfigError, Trainer
from numtile.train_config import ScheduleChangeWarning
from tests.train.test_train import _config, data_dir  # noqa: F401 (a fixture)


def test_checkpoint_keeps_the_mode_and_float32_master_weights(data_dir, tmp_path):  # noqa: F811
    path = str(tmp_path / "bf16.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionFallbackWarning)
        trainer = Trainer(_config(data_dir, tmp_path, precision="bf16-mixed", checkpoint=None))
    assert trainer.model.precision == "bf16-mixed"
    losses = [trainer.train_step()]
    assert np.isfinite(losses).all()
    trainer.save(path)
    weights = {name: p.to_numpy() for name, p in trainer.model.named_parameters()}
    info = checkpoint_info(path)
    assert info["attrs"]["precision"] == "bf16-mixed"
    assert set(info["dtypes"].values()) == {"float32"}  # weights and AdamW state
    with pytest.warns(ScheduleChangeWarning, match="--precision bf16-mixed -> fp32"):
        resumed = Trainer(_config(data_dir, tmp_path, resume=path, checkpoint=None))
    assert resumed.model.precision == "fp32" and resumed.step == 1
    for name, p in resumed.model.named_parameters():
        np.testing.assert_array_equal(p.to_numpy(), weights[name], err_msg=name)
    assert np.isfinite(resumed.train_step())


def test_bad_precision_is_refused(data_dir, tmp_path):  # noqa: F811
    with pytest.raises(ConfigError, match="--precision must be one of fp32, bf16-mixed"):
        _config(data_dir, tmp_path, precision="fp16")


def test_fast_modes_train_end_to_end_naming_their_fallback(data_dir, tmp_path, monkeypatch):  # noqa: F811
    """fp32-fast-bf16 and tf32 train through the Trainer (as ``numtile train --precision``):
    float32 storage, the first loss that of rounded GEMM inputs (near fp32's, not equal), and
    the CPU's fallback said in the warning."""
    from numtile.tiletensor.precision import cpu_fallback

    monkeypatch.setattr("numtile.tiletensor.precision._WARNED", set())
    losses = {}
    for mode in ("fp32", "fp32-fast-bf16", "tf32"):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", PrecisionFallbackWarning)
            trainer = Trainer(_config(data_dir, tmp_path, precision=mode, checkpoint=None))
        messages = [str(w.message) for w in said if w.category is PrecisionFallbackWarning]
        expected = cpu_fallback(mode)  # None on a CPU with bf16 units (fp32-fast-bf16)
        assert messages == ([f"precision {mode!r}: {expected}"] if expected else [])
        losses[mode] = trainer.train_step()
        assert {p.dtype for p in trainer.model.parameters()} == {np.dtype(np.float32)}
    assert "TF32 is a GPU tensor-core format" in cpu_fallback("tf32")
    for mode in ("fp32-fast-bf16", "tf32"):
        gap = abs(losses[mode] - losses["fp32"])
        assert 0 < gap < 1e-2 * losses["fp32"], (mode, losses)
    # bf16 inputs (8-bit mantissa) move the loss more than TF32's 11 bits
    assert abs(losses["fp32-fast-bf16"] - losses["fp32"]) > abs(losses["tf32"] - losses["fp32"])
