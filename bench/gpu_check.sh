#!/usr/bin/env bash
# GPU check: run on a machine with an NVIDIA GPU (under 8 minutes). Installs the `cuda`
# extra (or uses what is installed when there is no network), runs the CUDA tests on the real
# GPU (simulator off; the cuSOLVER/cuBLAS factorisation kernels first), then
# bench/compare_gpu.py: tiled GEMM vs cupy.matmul (float32, TF32), tiled Cholesky/LU solve/QR
# vs cupy.linalg and cuSOLVER vs @cuda.jit tile kernels, GPT-2 training tokens/s vs PyTorch,
# and the largest GPT-2 trained under a memory limit of a quarter of the card. Results go to
# ${OUT:-.}/gpu_check.txt and gpu_results.json.
set -u
OUT="${OUT:-.}"
LOG="$OUT/gpu_check.txt"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 NUMBA_ENABLE_CUDASIM=0 NUMTILE_TEST_GPU=1
PY="${PYTHON:-python3}"
{
  echo "== numtile GPU check $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  if ! timeout 40 "$PY" -m pip install -q -e ".[cuda]" 2>/dev/null; then
    echo "(no network for the cuda extra: using the installed numba-cuda / CuPy)"
    timeout 40 "$PY" -m pip install -q --no-deps --no-build-isolation -e . || true
  fi
  "$PY" -c "import numba, numba.cuda as c; print('numba', numba.__version__, 'gpus', len(c.gpus))"
  "$PY" -c "from numtile import ops_cuda as o; print('GEMM', o.gemm_path(), 'factorisations', o.solver_path())"
  echo "== CUDA tests on the GPU"
  timeout 120 "$PY" -m pytest -q -p no:cacheprovider -x tests/ops_cuda/test_cusolver_gpu.py tests/ops_cuda \
    tests/runtime/test_cuda_runtime.py tests/nn/test_gpt2_cuda.py 2>&1 | tail -15
  echo "== benchmarks"
  timeout 300 "$PY" bench/compare_gpu.py --out "$OUT/gpu_results.json"
  echo "== done $(date -u +%FT%TZ)"
} 2>&1 | tee "$LOG"
