"""asv benchmarks: tiled matmul and Cholesky."""

import numpy as np

import numtile as nt


class Matmul:
    params = ([512, 2048], ["float32", "float64"], [256, 1024])
    param_names = ["n", "dtype", "tile"]

    def setup(self, n, dtype, tile):
        if tile > n:
            raise NotImplementedError("tile larger than the matrix")
        rng = np.random.default_rng(0)
        self.a = nt.from_numpy(rng.standard_normal((n, n)).astype(dtype), tile_shape=(tile, tile))
        self.b = nt.from_numpy(rng.standard_normal((n, n)).astype(dtype), tile_shape=(tile, tile))
        (self.a @ self.b).wait()

    def time_matmul(self, n, dtype, tile):
        (self.a @ self.b).wait()


class Cholesky:
    params = ([1024, 4096], [256, 1024])
    param_names = ["n", "tile"]

    def setup(self, n, tile):
        if tile > n:
            raise NotImplementedError("tile larger than the matrix")
        m = np.random.default_rng(1).standard_normal((n, n))
        self.a = nt.from_numpy(m @ m.T / n + 2 * np.eye(n), tile_shape=(tile, tile))
        nt.linalg.cholesky(self.a).wait()

    def time_cholesky(self, n, tile):
        nt.linalg.cholesky(self.a).wait()
