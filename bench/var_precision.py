"""How many digits ``nt.var`` keeps: the largest relative error of M2 (the sum of squared
deviations, ``var * N``) over every column of ``var(x, axis=0)``, against a two-pass reference
in long double, beside NumPy's ``var`` on the same data.

Each data set (8192 rows x 2048 columns, float64) runs over one tile along the
reduced axis, over 4 tiles merged into one running state a column (``ncpu=1``), and over 4
tiles in partial chains merged at the end (``ncpu=2``: one output tile, fewer than workers).

Usage: python bench/var_precision.py [--rows R] [--columns C]
"""

from __future__ import annotations

import argparse

import numpy as np

import numtile as nt

DATA = {
    "N(0, 1)": lambda rng, shape: rng.standard_normal(shape),
    "N(1e6, 1)": lambda rng, shape: 1e6 + rng.standard_normal(shape),
    "N(-1e8, 1e-2)": lambda rng, shape: -1e8 + 1e-2 * rng.standard_normal(shape),
    "N(1e6, 1), first row +1e3": lambda rng, shape: _outlier_first(
        1e6 + rng.standard_normal(shape)
    ),
}


def _outlier_first(x: np.ndarray) -> np.ndarray:
    x[0] += 1e3
    return x


def _relative_error(m2: np.ndarray, reference: np.ndarray) -> float:
    return float(np.max(np.abs(m2.astype(np.longdouble) - reference) / reference))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--columns", type=int, default=2048)
    args = parser.parse_args(argv)
    rows, columns = args.rows, args.columns
    runs = [("1 tile", rows, 1), ("4 tiles", rows // 4, 1), ("4 tiles, chains", rows // 4, 2)]
    print(f"M2 relative error, {rows} x {columns}, var(x, axis=0), against long double")
    print(f"{'data':28} {'tiles':16} {'numtile':>9} {'NumPy':>9}")
    for name, make in DATA.items():
        x = make(np.random.default_rng(0), (rows, columns))
        precise = x.astype(np.longdouble)
        reference = ((precise - precise.mean(axis=0)) ** 2).sum(axis=0)
        numpy_error = _relative_error(np.var(x, axis=0) * rows, reference)
        for label, tile_rows, ncpu in runs:
            nt.init(ncpu=ncpu)
            tensor = nt.from_numpy(x, tile_shape=(tile_rows, columns))
            m2 = nt.var(tensor, axis=0).to_numpy() * rows
            error = _relative_error(m2, reference)
            print(f"{name:28} {label:16} {error:9.1e} {numpy_error:9.1e}")
    nt.init()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
