"""Data-parallel training under ``mpiexec -n 2`` and ``-n 3`` (issue 12): the same losses
as one process within float32 reduction-order tolerance, one HDF5 checkpoint written by
rank 0 that plain h5py reads, and a resume on another number of ranks (with replicated
parameters)."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

from numtile.io import prepare
from numtile.nn.generation import generate
from numtile.train import Trainer
from tests.distributed.test_mpi import ROOT, _environment, _mpiexec
from tests.distributed.train_program import PROMPT, SAMPLE, config

LAUNCH = 120  # seconds; a launch takes ~10 s


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    source = root / "src"
    source.mkdir()
    rng = np.random.default_rng(0)
    words = ["def", "return", "class", "import", "self", "for", "in", "if", "else", ":", "\n"]
    (source / "a.py").write_text(" ".join(rng.choice(words, 4000)))
    prepare([str(source)], str(root / "data"), progress=False)
    return str(root / "data")


def _launch(nranks: int, data: str, checkpoint: str, mode: str, **env) -> dict:
    command = [_mpiexec(), "-n", str(nranks), sys.executable, "-m"]
    command += ["tests.distributed.train_program", data, checkpoint, mode]
    env = {**_environment(), **env}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LAUNCH
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    read = []
    for rank in range(nranks):
        with open(f"{checkpoint}.{mode}.rank{rank}.json") as f:
            read.append(json.load(f))
    assert all(mine == read[0] for mine in read), read  # every rank read (and sampled) the same
    return read[0]


def test_data_parallel_training_equals_one_process_and_resumes_on_other_ranks(data_dir, tmp_path):
    pytest.importorskip("mpi4py")
    trainer = Trainer(config(data_dir))
    expected = [trainer.train_step() for _ in range(4)]
    checkpoint = str(tmp_path / "half.h5")
    fresh = _launch(2, data_dir, checkpoint, "fresh")
    np.testing.assert_allclose(fresh["losses"], expected, rtol=1e-5)
    # every rank's cached decode (replayed tasks go through the distributed front) gives the
    # one-process sample
    sample = generate(trainer.model, PROMPT, SAMPLE, temperature=0).tolist()
    assert fresh["sample"] == sample
    with h5py.File(checkpoint, "r") as f:  # one file, plain h5py, rank 0 wrote every tile
        weight = f["model/transformer.wte.weight"]
        assert weight.shape == (256, 16) and np.isfinite(weight[...]).all()
        assert json.loads(f.attrs["step"]) == 2
    assert -1 not in fresh["owners"]  # sharded by default: each parameter tile on one rank
    # balanced by bytes: the ranks' shares differ by at most the largest tile, and each
    # rank's moments (and so its updates) are those of its own parameter tiles
    assert fresh["owners"] == [0, 1] and fresh["moments_on_owners"], fresh
    assert max(fresh["owned"]) - min(fresh["owned"]) <= fresh["largest"], fresh
    # written by 2 ranks with sharded parameters, read by 3 that replicate them
    resumed = _launch(3, data_dir, checkpoint, "resume", NUMTILE_MPI_PARAMETERS="replicated")
    np.testing.assert_allclose(resumed["losses"], expected[2:], rtol=1e-5)
    assert resumed["owners"] == [-1]


def test_numtile_train_under_mpiexec_reports_and_logs_on_rank_0_only(data_dir, tmp_path):
    pytest.importorskip("mpi4py")
    logs = tmp_path / "logs"
    command = [_mpiexec(), "-n", "2", sys.executable, "-m", "numtile.cli.main", "train"]
    command += ["--model", json.dumps(json.loads(config(data_dir).model)), "--data", data_dir]
    command += ["--steps", "2", "--batch", "4", "--seq-len", "16", "--batch-tile", "1"]
    command += ["--seq-tile", "8", "--eval-every", "100", "--eval-batches", "1"]
    command += ["--sample-tokens", "4", "--log-dir", str(logs)]
    command += ["--checkpoint", str(tmp_path / "run.h5")]
    env = {**_environment(), "NUMTILE_NCPU": "1"}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LAUNCH
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert done.stdout.count("numtile train:") == 1, done.stdout
    assert done.stdout.count("sample:") == 1, done.stdout
    records = [json.loads(line) for line in (logs / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "train/loss" in r] == [1, 2]
