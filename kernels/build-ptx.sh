#!/usr/bin/env bash
# Compiles kernels/kvwarden.cu to PTX for sm_80 and sm_90 with Debian's
# clang-16 (no CUDA SDK needed) into the directory $1 (default: the
# committed internal/device/cuda/ptx). Used by `go generate`, cmake/ptx.cmake
# and scripts/check-ptx.sh, so all three produce byte-identical files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../internal/device/cuda/ptx}
clang=${CLANG_CUDA:-clang++-16}
if ! command -v "$clang" >/dev/null; then
  echo "build-ptx: $clang not found (Debian: apt-get install -y clang-16)" >&2
  exit 2
fi
mkdir -p "$out"
# Absolute, because the compiler runs in kernels/ (go generate passes "ptx",
# relative to internal/device/cuda).
out=$(cd "$out" && pwd)
for arch in 80 90; do
  # ptx78 enables the sync shuffles; without a CUDA installation clang
  # otherwise assumes an older PTX ISA. Relative paths keep the output
  # independent of where the tree lives.
  (cd "$here" && "$clang" -x cuda --cuda-device-only -nocudainc -nocudalib \
    --cuda-gpu-arch=sm_$arch -Xclang -target-feature -Xclang +ptx78 \
    -O3 -S kvwarden.cu -o "$out/kvwarden_sm$arch.ptx")
done
