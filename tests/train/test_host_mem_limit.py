"""bf16-mixed training under a host memory limit: the training state lives in spill files
between uses, and the losses are those of the unlimited run, bit for bit."""

import numpy as np
import pytest

import numtile as nt
from numtile.cli.main import main
from numtile.train import Trainer
from tests.train.test_train import TINY, _config, data_dir  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("frozen_heap")

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


def test_a_limit_of_the_arena_size_spills_and_keeps_the_losses(tmp_path):
    # tiles of 0.25-32 MiB cut from the arena of a 256 MiB limit (runtime/arena.py), under
    # the ~330 MiB float32 state of a one-layer GPT-2 with a 32K vocabulary
    from numtile.nn import optim
    from numtile.nn.gpt2 import Tiling
    from numtile.train import build_model
    from numtile.train_config import _model_config

    fields = dict(vocab_size=32768, n_positions=128, n_embd=512, n_layer=1, n_head=8)
    tiling = Tiling(batch=2, seq=128, embd=512, inner=1024, head=4, vocab=8192)
    rng = np.random.default_rng(0)
    batches = [tuple(rng.integers(0, 32768, (4, 128)) for _ in range(2)) for _ in range(3)]

    def losses(**runtime):
        nt.init(scheduler="sync", **runtime)
        model = build_model(_model_config(fields, "config"), tiling, seq_len=128)
        model.set_precision("bf16-mixed")
        opt = optim.AdamW(model.parameters(), lr=1e-3)
        out = []
        for x, y in batches:
            loss = model(x, y)[1]  # logits dropped: freed tile by tile
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item())
        return out, 16 * model.num_parameters()

    limit = 256 << 20
    try:
        free, state = losses()
        limited, _ = losses(host_mem_limit=limit, spill_dir=str(tmp_path))
        manager = nt.get_runtime().manager
        counters = manager.counters()
        arena = manager.host.arena
    finally:
        nt.init()
    assert state > limit and arena is not None
    assert limited == free  # bit for bit
    host = counters["nodes"]["host"]
    assert host["peak"] <= limit and host["reused"] > 0
    assert counters["spill"]["writes"] > 0 and counters["spill"]["reads"] > 0
