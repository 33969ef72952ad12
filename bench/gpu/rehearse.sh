#!/usr/bin/env bash
# Rehearses bench/gpu/check.sh on a machine without a GPU: against no driver
# (it must stop at the preflight and say why), and against the GPU-free
# driver stand-in (internal/cudastandin) with everything present, with a
# forced missing cuBLAS, with a forced step timeout and with a deadline that
# leaves steps unrun. Each run's summary must report exactly that. Needs
# bench/gpu/bin from bench/gpu/build.sh. The benchmark is not rehearsed (its
# synthetic 1B model needs more memory than the stand-in offers).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
lib=$(go run ./internal/cudastandin/cmd/build-standin) || { echo "rehearse: cannot build the stand-in" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
expect() { # name file pattern...
  local name=$1 f=$2; shift 2
  for p in "$@"; do
    if ! grep -qE -- "$p" "$f"; then
      echo "rehearse: $name: the summary lacks /$p/" >&2
      sed 's/^/    /' "$f" >&2
      status=1
    fi
  done
  echo "rehearse: $name: ok"
}
env -u KVWARDEN_CUDA_LIB OUT=$tmp/none KVWARDEN_CHECK_NO_BENCH=1 bash bench/gpu/check.sh >/dev/null
[ $? = 1 ] || { echo "rehearse: no driver: exit status not 1" >&2; status=1; }
expect "no driver" $tmp/none/summary.md 'device-test: FAIL \(GPU tests skipped\)' 'no usable CUDA driver' '^STOP: the device test failed'

OUT=$tmp/ok KVWARDEN_CUDA_LIB=$lib KVWARDEN_CUBLAS_LIB=$lib KVWARDEN_CHECK_NO_BENCH=1 bash bench/gpu/check.sh >/dev/null
[ $? = 0 ] || { echo "rehearse: stand-in: exit status not 0" >&2; status=1; }
expect "stand-in" $tmp/ok/summary.md 'cuda-tests: ok' 'gpu-tests: ok' 'engine-gpu: ok' 'module: embedded PTX' ', 0 failing step'

OUT=$tmp/noblas KVWARDEN_CUDA_LIB=$lib KVWARDEN_CUBLAS_LIB=/nonexistent/libcublas.so.13 KVWARDEN_CHECK_NO_BENCH=1 bash bench/gpu/check.sh >/dev/null
expect "missing cuBLAS" $tmp/noblas/summary.md 'cuBLAS: WARNING: KVWARDEN_CUBLAS_LIB=/nonexistent' 'no usable cuBLAS'

OUT=$tmp/timeout KVWARDEN_CUDA_LIB=$lib KVWARDEN_CUBLAS_LIB=$lib KVWARDEN_CHECK_STEP_LIMIT=2 KVWARDEN_CHECK_NO_BENCH=1 bash bench/gpu/check.sh >/dev/null
[ $? = 1 ] || { echo "rehearse: timeout: exit status not 1" >&2; status=1; }
expect "step timeout" $tmp/timeout/summary.md 'gpu-tests: TIMED OUT after 2s' 'last test started: TestGPU'

OUT=$tmp/deadline KVWARDEN_CUDA_LIB=$lib KVWARDEN_CUBLAS_LIB=$lib KVWARDEN_CHECK_DEADLINE=20 KVWARDEN_CHECK_STEP_LIMIT=4 bash bench/gpu/check.sh >/dev/null
[ $? = 1 ] || { echo "rehearse: deadline: exit status not 1" >&2; status=1; }
expect "deadline" $tmp/deadline/summary.md 'SKIPPED \(deadline' 'gpu-bench: SKIPPED \(deadline'
for d in none ok noblas timeout deadline; do
  n=$(find "$tmp/$d" -type f | wc -l)
  [ "$n" -le 8 ] || { echo "rehearse: $d: $n files under \$OUT" >&2; status=1; }
done
exit $status
