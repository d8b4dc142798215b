"""bf16-mixed training under a host memory limit: the training state lives in spill files
between uses, and the losses are those of the unlimited run, bit for bit."""

import numpy as np

import numtile as nt
from numtile.cli.main import main
from numtile.train import Trainer
from tests.train.test_train import TINY, _config, data_dir  # noqa: F401 (a fixture)

LIMIT = 150_000  # bytes: below the float32 training state of the tiny model (175,104)


def _losses(config, steps: int, **runtime) -> tuple[list[float], Trainer]:
    # one worker running tasks in submission order: the float32 gradient sums are added in
    # the same order in both runs, so any difference comes from the spilled tiles
    nt.init(scheduler="sync", **runtime)
    trainer = Trainer(config)
    return [trainer.train_step() for _ in range(steps)], trainer


def test_bf16_training_spills_its_state_and_keeps_the_losses(data_dir, tmp_path):  # noqa: F811
    config = _config(data_dir, tmp_path, checkpoint=None, precision="bf16-mixed", eval_every=100)
    try:
        free, _ = _losses(config, 4)
        assert nt.get_runtime().manager is None  # nothing counted, nothing spilled
        limited, trainer = _losses(
            config, 4, host_mem_limit=LIMIT, spill_dir=str(tmp_path / "spill")
        )
        counters = nt.get_runtime().manager.counters()
    finally:
        nt.init()
    # weights, gradients and both AdamW moments, float32: they cannot all stay in RAM
    assert 16 * trainer.model.num_parameters() > LIMIT
    assert limited == free  # bit for bit
    assert free[-1] < free[0]
    host = counters["nodes"]["host"]
    assert host["evictions"] > 0 and host["peak"] <= LIMIT
    spill = counters["spill"]
    assert spill["writes"] > 0 and spill["reads"] > 0  # written out and read back
    assert np.isfinite(limited).all()


def test_the_train_command_takes_the_limit(data_dir, tmp_path, capsys):  # noqa: F811
    args = ["train", "--model", TINY, "--data", data_dir, "--steps", "2", "--batch", "2"]
    args += ["--seq-len", "16", "--eval-every", "1000", "--sample-tokens", "0"]
    args += ["--checkpoint", str(tmp_path / "run.h5"), "--precision", "bf16-mixed"]
    args += ["--host-mem-limit", str(LIMIT), "--spill-dir", str(tmp_path / "spill")]
    try:
        assert main(args) == 0
        counters = nt.get_runtime().manager.counters()
    finally:
        nt.init()
    assert counters["nodes"]["host"]["capacity"] == LIMIT
    assert counters["spill"]["writes"] > 0 and counters["spill"]["reads"] > 0
    assert "final validation loss" in capsys.readouterr().out
