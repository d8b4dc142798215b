"""asv benchmarks: out-of-core work under a host memory limit (spilling to disk)."""

import tempfile

import numpy as np

import numtile as nt


class OutOfCore:
    """A matmul + elementwise chain whose live data is ``factor`` x the host limit."""

    params = ([None, 4], [1024, 2048])
    param_names = ["factor", "n"]
    timeout = 300

    def setup(self, factor, n):
        live = 6 * n * n * 8  # six float64 n x n matrices stay referenced
        limit = None if factor is None else live // factor
        self.spill = tempfile.mkdtemp(prefix="numtile-asv-spill-")
        nt.init(host_mem_limit=limit, spill_dir=self.spill)
        rng = np.random.default_rng(0)
        self.a_np = rng.standard_normal((n, n)) / np.sqrt(n)
        self.b_np = rng.standard_normal((n, n)) / np.sqrt(n)
        self.tile = n // 4

    def teardown(self, factor, n):
        nt.init()

    def _run(self):
        a = nt.from_numpy(self.a_np, tile_shape=(self.tile, self.tile))
        b = nt.from_numpy(self.b_np, tile_shape=(self.tile, self.tile))
        ab = a @ b
        c = nt.tanh(ab) * 0.5 + a
        d = c @ b - c
        e = nt.exp(-d * d) + ab
        e.wait()
        return a, b, ab, c, d, e

    def time_chain(self, factor, n):
        self._run()

    def track_spilled_mib(self, factor, n):
        self._run()
        manager = nt.get_runtime().manager
        if manager is None:
            return 0.0
        return manager.counters()["transferred_bytes"].get("host->disk", 0) / 2**20

    track_spilled_mib.unit = "MiB"
