# Sourced by the device scripts: where the CUDA toolkit is. `nvcc` on PATH may be a wrapper
# script (e.g. /usr/local/bin/nvcc exec'ing the real one), so its grandparent directory is
# accepted only when it holds the toolkit's headers.
cuda_root() {
  local c nvcc
  nvcc="$(command -v nvcc 2>/dev/null || true)"
  for c in "${CUDA_HOME:-}" "${CUDA_PATH:-}" ${nvcc:+"$(dirname "$(dirname "$nvcc")")"} \
           /usr/local/cuda; do
    if [[ -n "$c" && -f "$c/include/cuda_runtime.h" ]]; then echo "$c"; return 0; fi
  done
  echo /usr/local/cuda
}
