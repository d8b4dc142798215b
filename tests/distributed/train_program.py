"""Data-parallel training on every rank of an ``mpiexec -n P`` launch (from
tests/distributed/test_train_mpi.py): ``fresh`` trains 4 steps and saves a checkpoint at
step 2, then samples ``SAMPLE`` greedily with the key/value cache (decode steps replayed);
``resume`` resumes that checkpoint (written by any number of ranks) to step 4. Each rank
writes the losses it read (its sample, its parameters' owners, the parameter bytes each
rank owns, whether the AdamW moments live on their parameters' owners) as JSON next to the
checkpoint."""

from __future__ import annotations

import json
import sys

import numtile as nt
from numtile.nn.generation import generate
from numtile.train import TrainConfig, Trainer

PROMPT = [100, 101, 102, 32]  # "def "
SAMPLE = 5  # tokens

TINY = json.dumps(dict(vocab_size=256, n_positions=16, n_embd=16, n_layer=2, n_head=2))


def config(data: str, **overrides) -> TrainConfig:
    base = dict(
        model=TINY,
        data=data,
        steps=4,
        batch=4,
        seq_len=16,
        batch_tile=1,
        seq_tile=8,
        lr=3e-3,
        warmup=2,
        eval_every=100,
        eval_batches=1,
        checkpoint=None,
        sample_tokens=0,
    )
    return TrainConfig(**{**base, **overrides})


def main(data: str, checkpoint: str, mode: str) -> None:
    nt.init(ncpu=1)
    if mode == "fresh":
        trainer = Trainer(config(data))
        losses = [trainer.train_step() for _ in range(2)]
        trainer.save(checkpoint)
        losses += [trainer.train_step() for _ in range(2)]
        sample = generate(trainer.model, PROMPT, SAMPLE, temperature=0).tolist()
    else:
        trainer = Trainer(config(data, resume=checkpoint))
        losses = [trainer.train_step() for _ in range(4 - trainer.step)]
        sample = None
    # where the parameters live: ranks (sharded), -1 (replicated: NUMTILE_MPI_PARAMETERS)
    parameters = trainer.model.parameters()
    owners = {getattr(h, "owner", -2) for p in parameters for h in p.handles}
    owned = [0] * nt.nranks()  # bytes of parameter tiles per owner rank
    for handle in (h for p in parameters for h in p.handles):
        if getattr(handle, "owner", -1) >= 0:
            owned[handle.owner] += handle.nbytes
    # each AdamW moment tile lives (and is updated) on its parameter tile's owner
    moments = [
        getattr(m, "owner", -2) == getattr(h, "owner", -3)
        for p in parameters
        for state in [trainer.optimizer.state[id(p)]]
        for moment in state
        for h, m in zip(p.handles, moment.handles)
    ]
    largest = max(h.nbytes for p in parameters for h in p.handles)
    # one file per rank: mpiexec may split and interleave the ranks' output lines
    with open(f"{checkpoint}.{mode}.rank{nt.rank()}.json", "w") as f:
        json.dump(
            {
                "losses": losses,
                "sample": sample,
                "owners": sorted(owners),
                "owned": owned,
                "largest": largest,
                "moments_on_owners": all(moments),
            },
            f,
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
