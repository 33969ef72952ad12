#!/usr/bin/env bash
# The GPU check: one script, run from the repository root on the GPU machine
# with what bench/gpu/build.sh prepared on the build machine (bench/gpu/bin:
# Go test binaries, PTX, cubins, test models). It builds nothing.
#
#   bash bench/gpu/check.sh            # results under $OUT (default bench/gpu/out)
#
# It cannot pass silently:
#   - a preflight logs the driver library, ldconfig's cuda/ptxjit lines, the
#     device name and memory, then runs one short device test; when that
#     fails the script stops and says why;
#   - a GPU test that skips counts as a failure (a missing driver or model
#     must not read as a pass); CI is unset so tests skip rather than fail
#     only where that is intended;
#   - the whole script ends within the deadline (8 minutes, or
#     KVWARDEN_CHECK_DEADLINE seconds): each step runs under timeout -k, and
#     steps that no longer fit are reported as skipped;
#   - the summary names each step with ok, FAIL (exit status) or TIMED OUT,
#     and on failure its first panic:/FAIL/error lines;
#   - the benchmark writes each row as it is measured, so a timeout keeps
#     what was measured.
# $OUT receives at most 8 files: summary.md, preflight.log, cuda-tests.log,
# gpu-tests.log, engine-gpu.log, gpu-bench.log, gpu-bench.md, gpu-bench.json.
#
# Environment: KVWARDEN_CUBLAS_LIB (cuBLAS to use), KVWARDEN_CUDA_LIB (driver),
# KVWARDEN_CUDA_MODULE (ptx or cubin: force the module kind),
# KVWARDEN_CHECK_DEADLINE (seconds), KVWARDEN_CHECK_NO_BENCH=1 (skip the benchmark),
# KVWARDEN_CHECK_STEP_LIMIT (seconds: caps each step, to rehearse a timeout).
set -uo pipefail
unset CI
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=$root/bench/gpu/bin
OUT=${OUT:-$root/bench/gpu/out}
mkdir -p "$OUT"
t0=$(date +%s)
deadline=$((t0 + ${KVWARDEN_CHECK_DEADLINE:-480}))
summary=$OUT/summary.md
fails=0

say() { echo "$*" | tee -a "$summary"; }
left() { echo $((deadline - $(date +%s))); }

: > "$summary"
say "# kvwarden GPU check"
say ""
say "revision: $(cat "$bin/REVISION" 2>/dev/null || echo unknown); started $(date -u +%FT%TZ); deadline $((deadline - t0))s"
say ""
for f in cuda.test gpu.test engine.test; do
  if [ ! -x "$bin/$f" ]; then
    say "STOP: $bin/$f is missing; run bench/gpu/build.sh on the build machine and carry bench/gpu/bin"
    exit 2
  fi
done

# ---- cuBLAS ---------------------------------------------------------------
# KVWARDEN_CUBLAS_LIB when set; else the CUDA 13 and 12 install locations,
# Python's nvidia wheels (cu13 and cublas), then a bounded find.
cublas_search() {
  local c
  for c in /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13 \
           /usr/local/cuda-13*/lib64/libcublas.so.13 /usr/local/cuda-13*/targets/x86_64-linux/lib/libcublas.so.13 \
           /usr/local/cuda/lib64/libcublas.so.12 /usr/local/cuda-12*/lib64/libcublas.so.12 \
           /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.12 \
           /usr/lib/x86_64-linux-gnu/libcublas.so.13 /usr/lib/x86_64-linux-gnu/libcublas.so.12; do
    [ -f "$c" ] && { echo "$c"; return; }
  done
  for py in python3 python; do
    command -v $py >/dev/null || continue
    for c in $(timeout -k 2 15 $py -c 'import site,sys; print(" ".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null); do
      for f in "$c/nvidia/cu13/lib/libcublas.so.13" "$c/nvidia/cublas/lib/libcublas.so.13" "$c/nvidia/cublas/lib/libcublas.so.12"; do
        [ -f "$f" ] && { echo "$f"; return; }
      done
    done
  done
  timeout -k 2 20 find /usr/local /opt /usr/lib/python3* -maxdepth 8 \( -name 'libcublas.so.13' -o -name 'libcublas.so.12' \) \
    -not -path '*/proc/*' 2>/dev/null | sort -r | head -1
}
if [ -n "${KVWARDEN_CUBLAS_LIB:-}" ]; then
  if [ -f "$KVWARDEN_CUBLAS_LIB" ]; then
    say "cuBLAS: $KVWARDEN_CUBLAS_LIB (from KVWARDEN_CUBLAS_LIB)"
  else
    say "cuBLAS: WARNING: KVWARDEN_CUBLAS_LIB=$KVWARDEN_CUBLAS_LIB does not exist; GEMMs use the fallback kernel and the figures are not representative"
  fi
else
  found=$(cublas_search)
  if [ -n "$found" ]; then
    export KVWARDEN_CUBLAS_LIB=$found
    say "cuBLAS: $found (searched)"
  else
    say "cuBLAS: WARNING: not found (searched /usr/local/cuda*, Python nvidia wheels, find under /usr/local /opt); GEMMs use the fallback kernel and the figures are not representative"
  fi
fi
[ -f "${KVWARDEN_CUBLAS_LIB:-}" ] && export LD_LIBRARY_PATH=$(dirname "$KVWARDEN_CUBLAS_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KVWARDEN_TEST_MODELS=$bin/shared/models
export KVWARDEN_CUDA_CUBIN_DIR=$bin/cubin
export KVWARDEN_GOLDEN_ARCH=$(cat "$bin/shared/golden/arch/CARRIED" 2>/dev/null)
[ -n "$KVWARDEN_GOLDEN_ARCH" ] || unset KVWARDEN_GOLDEN_ARCH
say "cubins: $(ls "$bin/cubin"/*.cubin 2>/dev/null | xargs -n1 basename 2>/dev/null | tr '\n' ' ')($(cat "$bin/cubin/PTXAS_VERSION" 2>/dev/null || echo 'none: no fallback if the PTX JIT is missing'))"
say "golden architectures carried: ${KVWARDEN_GOLDEN_ARCH:-none}"

# ---- steps ----------------------------------------------------------------
# run NAME BUDGET CMD...: runs CMD with at most BUDGET seconds (less when the
# deadline is nearer), logs to $OUT/NAME.log, and adds a line to the summary.
run() {
  local name=$1 budget=$2; shift 2
  local log=$OUT/$name.log rem to
  rem=$(($(left) - 5))
  if [ "$rem" -lt 10 ]; then
    say "- $name: SKIPPED (deadline: ${rem}s left)"
    fails=$((fails + 1))
    return 99
  fi
  to=$((budget < rem ? budget : rem))
  # KVWARDEN_CHECK_STEP_LIMIT caps every step (rehearsing a timeout).
  [ -n "${KVWARDEN_CHECK_STEP_LIMIT:-}" ] && [ "$KVWARDEN_CHECK_STEP_LIMIT" -lt "$to" ] && to=$KVWARDEN_CHECK_STEP_LIMIT
  local s=$(date +%s)
  timeout -k 5 "$to" "$@" > "$log" 2>&1
  local rc=$? dt=$(($(date +%s) - s))
  local pass fail skip status
  pass=$(grep -c -- '--- PASS' "$log")
  fail=$(grep -c -- '--- FAIL' "$log")
  skip=$(grep -cE -- '--- SKIP: TestGPU' "$log")
  case $rc in
    0) status=ok ;;
    124|137) status="TIMED OUT after ${to}s" ;;
    *) status="FAIL (exit $rc)" ;;
  esac
  # A GPU test that skipped is a failure here.
  [ $rc = 0 ] && [ "$skip" -gt 0 ] && { status="FAIL (GPU tests skipped)"; rc=98; }
  say "- $name: $status in ${dt}s; $pass passed, $fail failed, $skip GPU tests skipped"
  if [ $rc != 0 ]; then
    fails=$((fails + 1))
    grep -m8 -E -- 'panic:|--- FAIL|^FAIL|[Ee]rror|VIOLATION' "$log" | cut -c1-400 | sed 's/^/    /' | tee -a "$summary"
    case $rc in 124|137)
      say "    last test started: $(grep -E '^\s*=== (RUN|CONT)' "$log" | tail -1 | sed 's/^ *=== [A-Z]* *//')"
      say "    last output: $(tail -1 "$log" | cut -c1-300)" ;;
    esac
  fi
  if [ "$skip" -gt 0 ]; then
    say "    GPU tests skipped on the GPU machine count as failures; first reasons:"
    grep -B1 -E -- '--- SKIP: TestGPU' "$log" | grep -vE '^(--|=== RUN|--- SKIP)' | head -3 | cut -c1-400 | sed 's/^/    /' | tee -a "$summary"
  fi
  return $rc
}

# ---- preflight --------------------------------------------------------------
say ""
say "## preflight"
pre=$OUT/preflight.log
{
  echo "uname: $(uname -a)"
  echo "KVWARDEN_CUDA_LIB=${KVWARDEN_CUDA_LIB:-} KVWARDEN_CUBLAS_LIB=${KVWARDEN_CUBLAS_LIB:-} KVWARDEN_CUDA_MODULE=${KVWARDEN_CUDA_MODULE:-}"
  echo "--- ldconfig -p (cuda, ptxjit, cublas)"
  timeout -k 2 10 ldconfig -p 2>&1 | grep -iE 'libcuda|ptxjit|cublas' | head -20 || echo "(none)"
  echo "--- nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    timeout -k 2 20 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_cap --format=csv 2>&1 | head -5
  else
    echo "nvidia-smi: not found"
  fi
  if [ -x "$bin/ptxas" ] || command -v ptxas >/dev/null; then
    px=$( [ -x "$bin/ptxas" ] && echo "$bin/ptxas" || command -v ptxas)
    echo "--- $px -arch=sm_90 -v (registers, spills)"
    timeout -k 2 60 "$px" -arch=sm_90 -v "$bin/ptx/kvwarden_sm90.ptx" -o /dev/null 2>&1 | grep -E 'error|warning|spill' | sort | uniq -c | head -10
  fi
} > "$pre" 2>&1
drv=$(grep -E '^\s+lib(cuda|nvidia-ptxjit)' "$pre" | head -4)
say "    driver (ldconfig): ${drv:-libcuda.so.1 is not in the ldconfig cache}"
say "    KVWARDEN_CUDA_LIB: ${KVWARDEN_CUDA_LIB:-unset (the loader searches libcuda.so.1)}"
grep -A2 -- '--- nvidia-smi' "$pre" | tail -n +2 | grep -v '^name,' | head -2 | sed 's/^/    device: /' | tee -a "$summary"
grep -qi ptxjit "$pre" || say "    note: no libnvidia-ptxjitcompiler in ldconfig; the loader falls back to the cubin if the PTX does not load"
# The short device test: driver, context, module (PTX or cubin), one kernel.
run device-test 60 "$bin/cuda.test" -test.v -test.count=1 -test.timeout=50s -test.run '^(TestGPUDeviceInfo|TestGPUArena)$'
rc=$?
[ -f "$OUT/device-test.log" ] && { cat "$OUT/device-test.log" >> "$pre"; rm -f "$OUT/device-test.log"; }
grep -m3 -E 'compute capability|module:' "$pre" | sed 's/^ *gpu_test.go:[0-9]*: //; s/^/    /' | tee -a "$summary"
if [ $rc != 0 ]; then
  say ""
  if [ $rc = 99 ]; then
    say "STOP: no time left for the device test. Later steps not run."
  else
    say "STOP: the device test failed (exit $rc); the reason is above and in preflight.log. Later steps not run."
  fi
  say "total: $(($(date +%s) - t0))s, $fails failing step(s)"
  exit 1
fi

# ---- tests --------------------------------------------------------------------
say ""
say "## tests"
# TestGPUStepFailureWaitsForDevice needs the stand-in's fault injection and
# TestGPUBench* runs below: not skipped here, excluded.
run cuda-tests 100 "$bin/cuda.test" -test.v -test.count=1 -test.timeout=95s -test.run '^TestGPU'
# TestGPUGoldenArch runs the golden files build.sh carried (the summary's
# "golden architectures carried"), the mixture-of-experts ones included.
run gpu-tests 150 "$bin/gpu.test" -test.v -test.count=1 -test.timeout=145s -test.run '^TestGPU' -test.skip 'TestGPUBench|TestGPUStepFailureWaitsForDevice'
run engine-gpu 60 "$bin/engine.test" -test.v -test.count=1 -test.timeout=55s -test.run '^TestGPU'

# ---- benchmark ------------------------------------------------------------------
say ""
say "## benchmark"
if [ -n "${KVWARDEN_CHECK_NO_BENCH:-}" ]; then
  say "- gpu-bench: SKIPPED (KVWARDEN_CHECK_NO_BENCH)"
else
  KVWARDEN_GPU_BENCH=1 KVWARDEN_BENCH_OUT=$OUT run gpu-bench 200 "$bin/gpu.test" -test.v -test.count=1 -test.timeout=195s -test.run '^TestGPUBenchLlama1B$'
  if [ -f "$OUT/gpu-bench.md" ]; then
    say ""
    cat "$OUT/gpu-bench.md" >> "$summary"
  fi
fi

# ---- end ------------------------------------------------------------------------
n=$(find "$OUT" -type f | wc -l)
if [ "$n" -gt 8 ]; then
  say "note: $n files under \$OUT, more than 8: packing the logs into logs.tar.gz"
  (cd "$OUT" && tar czf logs.tar.gz --remove-files *.log)
fi
say ""
say "total: $(($(date +%s) - t0))s of $((deadline - t0))s, $fails failing step(s)"
exit $((fails > 0))
