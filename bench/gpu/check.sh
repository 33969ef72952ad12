#!/usr/bin/env bash
# The GPU check. Run from the repository root on the GPU machine, after
# bench/gpu/build.sh has produced bench/gpu/bin here (it builds nothing):
#   bash bench/gpu/check.sh
# It runs the GPU tests and the Llama-3.2-1B-shaped benchmark in well under
# 8 minutes and writes logs and a results table to $OUT (default
# bench/gpu/out): summary.md, gpu-bench.md, gpu-bench.json, *.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=$root/bench/gpu/bin
OUT=${OUT:-$root/bench/gpu/out}
mkdir -p "$OUT"
t0=$(date +%s)
if [ ! -x "$bin/cuda.test" ] || [ ! -x "$bin/gpu.test" ] || [ ! -x "$bin/engine.test" ]; then
  echo "check: $bin has no test binaries; run bench/gpu/build.sh on the build machine first" >&2
  exit 2
fi
summary=$OUT/summary.md
{
  echo "# kvwarden GPU check"
  echo
  echo "revision: $(cat "$bin/REVISION" 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 | head -5
  echo '```'
} > "$summary"

# cuBLAS: honour KVWARDEN_CUBLAS_LIB, else look in the usual places and in
# Python's nvidia wheels.
if [ -z "${KVWARDEN_CUBLAS_LIB:-}" ]; then
  for c in /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/lib64/libcublas.so.12 \
           /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13 \
           $(ls -d /usr/local/cuda-*/lib64/libcublas.so.1[23] 2>/dev/null) \
           $(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib", "libcublas.so.12"))' 2>/dev/null); do
    if [ -f "$c" ]; then export KVWARDEN_CUBLAS_LIB=$c; break; fi
  done
fi
[ -n "${KVWARDEN_CUBLAS_LIB:-}" ] && export LD_LIBRARY_PATH=$(dirname "$KVWARDEN_CUBLAS_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "cuBLAS: ${KVWARDEN_CUBLAS_LIB:-not found (fallback GEMM kernel)}" | tee -a "$summary"
export KVWARDEN_TEST_MODELS=$bin/shared/models

# ptxas accepts the PTX (register and spill report for the record).
if command -v ptxas >/dev/null || [ -x /usr/local/cuda/bin/ptxas ]; then
  ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  timeout 120 "$ptxas" -arch=sm_90 -v "$bin/ptx/kvwarden_sm90.ptx" -o /dev/null > "$OUT/ptxas.log" 2>&1
  echo "ptxas sm_90: exit $? (see ptxas.log)" | tee -a "$summary"
fi

fails=0
run() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local s=$(date +%s)
  timeout "$to" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - s ))
  local pass=$(grep -c -- '^--- PASS' "$OUT/$name.log") fail=$(grep -c -- '^--- FAIL' "$OUT/$name.log") skip=$(grep -c -- '^--- SKIP' "$OUT/$name.log")
  echo "- $name: exit $rc in ${dt}s; $pass passed, $fail failed, $skip skipped" | tee -a "$summary"
  grep -- '^--- FAIL' "$OUT/$name.log" | sed 's/^/    /' | tee -a "$summary"
  [ $rc = 0 ] || fails=$((fails+1))
  # On the GPU machine a GPU test that skipped for want of a GPU is a failure.
  if command -v nvidia-smi >/dev/null && grep -q 'no CUDA GPU' "$OUT/$name.log"; then
    echo "    GPU tests skipped although nvidia-smi is present:" | tee -a "$summary"
    grep -m3 'no CUDA GPU' "$OUT/$name.log" | sed 's/^/    /' | tee -a "$summary"
    fails=$((fails+1))
  fi
}
echo >> "$summary"; echo "## tests" >> "$summary"
run cuda-tests 120 "$bin/cuda.test" -test.v -test.count=1 -test.timeout=110s
run gpu-tests 120 "$bin/gpu.test" -test.v -test.count=1 -test.timeout=110s -test.run 'GPU|Slot|Pack|Refuses' -test.skip 'Bench'
run engine-gpu 60 "$bin/engine.test" -test.v -test.count=1 -test.timeout=50s -test.run 'TestGPUEngineIsolation'
echo >> "$summary"; echo "## benchmark" >> "$summary"
KVWARDEN_GPU_BENCH=1 KVWARDEN_BENCH_OUT=$OUT run gpu-bench 180 "$bin/gpu.test" -test.v -test.count=1 -test.timeout=170s -test.run 'TestGPUBenchLlama1B'
[ -f "$OUT/gpu-bench.md" ] && cat "$OUT/gpu-bench.md" >> "$summary"
echo >> "$summary"
echo "total: $(( $(date +%s) - t0 ))s, $fails failing step(s)" | tee -a "$summary"
cat "$summary"
exit $(( fails > 0 ))
