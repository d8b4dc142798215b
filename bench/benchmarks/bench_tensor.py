"""asv benchmarks: elementwise ops, reductions and runtime overhead."""

import numpy as np

import numtile as nt


class Elementwise:
    params = ([1 << 20, 1 << 24], ["gelu_tanh", "exp", "add"])
    param_names = ["size", "op"]

    def setup(self, size, op):
        rng = np.random.default_rng(0)
        self.x = nt.from_numpy(rng.standard_normal(size, dtype=np.float32))
        self.y = nt.from_numpy(rng.standard_normal(size, dtype=np.float32))
        self.time_op(size, op)

    def time_op(self, size, op):
        if op == "add":
            (self.x + self.y).wait()
        else:
            getattr(nt, op)(self.x).wait()


class Reductions:
    params = ([None, 0, 1], [(256, 256), (1024, 64)])
    param_names = ["axis", "tile_shape"]

    def setup(self, axis, tile_shape):
        data = np.random.default_rng(0).standard_normal((2048, 2048))
        self.x = nt.from_numpy(data, tile_shape=tile_shape)
        nt.sum(self.x, axis=axis).wait()

    def time_sum(self, axis, tile_shape):
        nt.sum(self.x, axis=axis).wait()

    def time_max(self, axis, tile_shape):
        nt.max(self.x, axis=axis).wait()


class EmptyTasks:
    """Runtime overhead: one tiny task per one-element tile (submission + execution)."""

    params = [2000, 20000]
    param_names = ["ntasks"]

    def setup(self, ntasks):
        self.x = nt.from_numpy(np.zeros(ntasks), tile_shape=(1,))
        (self.x + 1).wait()

    def time_add_one(self, ntasks):
        (self.x + 1).wait()
