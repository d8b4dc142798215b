"""GEMM tile kernels: gemm and gemm_batched on row-major tiles (float32/float64 and
complex64/complex128 through the kernels' BLAS, integers through a plain loop)."""

from numba import njit, types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from numtile.ops_cpu.kernel_blas import call, leading, operation


@njit(inline="always")
def _gemm_shape(a, b, c, trans_a, trans_b):
    """(m, n, k) of c(m, n) = op(a)(m, k) @ op(b)(k, n), asserting the shapes agree."""
    m, k = (a.shape[1], a.shape[0]) if trans_a else (a.shape[0], a.shape[1])
    k_b, n = (b.shape[1], b.shape[0]) if trans_b else (b.shape[0], b.shape[1])
    assert k == k_b and c.shape[0] == m and c.shape[1] == n, "gemm: shapes do not agree"
    return m, n, k


def _gemm_matrix(a, b, c, trans_a, trans_b, alpha, beta):
    """c = alpha * op(a) @ op(b) + beta * c for one matrix (implementation chosen by dtype)."""
    raise NotImplementedError


@overload(_gemm_matrix)
def _gemm_matrix_overload(a, b, c, trans_a, trans_b, alpha, beta):
    if isinstance(c.dtype, types.Integer):
        scalar = as_dtype(c.dtype).type

        def gemm_loop(a, b, c, trans_a, trans_b, alpha, beta):
            # BLAS has no integer routines: a plain loop, correct rather than fast.
            m, n, k = _gemm_shape(a, b, c, trans_a, trans_b)
            alpha, beta = scalar(alpha), scalar(beta)
            for i in range(m):
                for j in range(n):
                    total = scalar(0)
                    for p in range(k):
                        left = a[p, i] if trans_a else a[i, p]
                        right = b[j, p] if trans_b else b[p, j]
                        total += left * right
                    c[i, j] = alpha * total + beta * c[i, j]

        return gemm_loop

    def gemm_blas(a, b, c, trans_a, trans_b, alpha, beta):
        m, n, k = _gemm_shape(a, b, c, trans_a, trans_b)
        if m == 1 and not trans_a:
            # One row (a decoding step): gemv, several times faster than gemm with m = 1.
            # Read column-major, b is the (n, k) matrix op(b)^T (leading dimension n), or
            # when trans_b the (k, n) matrix op(b) (leading dimension k), which gemv transposes.
            rows, columns = (k, n) if trans_b else (n, k)
            flag = operation(trans_b)
            call(
                "gemv", c, flag, rows, columns, float(alpha), b, leading(b), a, 1, float(beta), c, 1
            )
            return
        # Column-major, c^T(n, m) = op(b)^T @ op(a)^T: b comes first, the flags stay.
        call(
            "gemm",
            c,
            operation(trans_b),
            operation(trans_a),
            n,
            m,
            k,
            float(alpha),
            b,
            leading(b),
            a,
            leading(a),
            float(beta),
            c,
            leading(c),
        )

    return gemm_blas


@njit(nogil=True, cache=True)
def gemm(a, b, c, trans_a, trans_b, alpha, beta):
    """c = alpha * op(a) @ op(b) + beta * c in place; op(x) = x.T when trans_x is True, the
    conjugate transpose x^H when it is 2; c is ignored when beta == 0 (NaN in it stays out).
    Floating and complex tiles through BLAS (s/d/c/zgemm), integers through a plain loop with
    alpha and beta cast to c's dtype."""
    _gemm_matrix(a, b, c, trans_a, trans_b, alpha, beta)


@njit(nogil=True, cache=True)
def gemm_batched(a, b, c, trans_a, trans_b, alpha, beta):
    """gemm on each matrix of 3-D stacks: c[i] = alpha * op(a[i]) @ op(b[i]) + beta * c[i];
    a or b with leading size 1 is broadcast over the batch."""
    batch = c.shape[0]
    assert a.shape[0] in (1, batch) and b.shape[0] in (1, batch), "gemm_batched: batch sizes"
    for i in range(batch):
        a_i = a[0] if a.shape[0] == 1 else a[i]
        b_i = b[0] if b.shape[0] == 1 else b[i]
        _gemm_matrix(a_i, b_i, c[i], trans_a, trans_b, alpha, beta)
