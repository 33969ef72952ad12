#!/usr/bin/env bash
# The whole kvwarden test suite: prerequisites, formatting, vet, unit and
# race tests, a short fuzz run, and the C/Python/PTX checks where those parts
# exist. CI (.ci/run) calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Every step is timed; the summary prints on exit, also when a step fails,
# so a slow or failing step is visible at the end of the CI log.
step_names=() step_secs=() cur_step= cur_start=0
end_step() {
  if [ -n "$cur_step" ]; then
    local d=$((SECONDS - cur_start))
    printf '    (%ds)\n' "$d"
    step_names+=("$cur_step") step_secs+=("$d")
    cur_step=
  fi
}
step() { end_step; printf '\n==> %s\n' "$*"; cur_step=$*; cur_start=$SECONDS; }
summary() {
  local rc=$?
  end_step
  printf '\n==> step timings (seconds)\n'
  local i
  for i in "${!step_names[@]}"; do printf '%6d  %s\n' "${step_secs[$i]}" "${step_names[$i]}"; done
  printf '%6d  total%s\n' "$SECONDS" "$( ((rc)) && echo " (FAILED, exit $rc)")"
}
trap summary EXIT

# ---- prerequisites -------------------------------------------------------
step "checking prerequisites (go >= 1.26, cmake, clang-16, python3)"
missing=()
if ! command -v go >/dev/null; then
  echo "error: go is not on PATH; install Go 1.26 from your distribution or go.dev" >&2
  exit 1
fi
gov=$(go env GOVERSION | sed 's/^go//')
case "$gov" in
  1.2[6-9]*|1.[3-9][0-9]*) ;;
  *) echo "error: Go $gov found, kvwarden needs Go >= 1.26" >&2; exit 1 ;;
esac
command -v cmake >/dev/null || missing+=(cmake)
command -v clang-16 >/dev/null || missing+=(clang-16)
command -v python3 >/dev/null || missing+=(python3)
# The arm64 NEON kernels run under qemu-user's qemu-aarch64 on other hosts
# (installed like the rest as root, required in CI, else skipped).
qemu_arm64=qemu-aarch64
if [ "$(go env GOHOSTARCH)" = arm64 ]; then
  qemu_arm64=
elif ! command -v qemu-aarch64 >/dev/null; then
  if { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; } || [ -n "${CI:-}" ]; then
    missing+=(qemu-user)
  else
    echo "note: qemu-aarch64 not found (Debian: sudo apt-get install qemu-user); the arm64 kernel tests will skip"
    qemu_arm64=skip
  fi
fi
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing missing prerequisites with apt-get: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null || {
      echo "error: could not install ${missing[*]} with apt-get; install them and rerun" >&2; exit 1; }
  else
    echo "error: missing prerequisites: ${missing[*]}" >&2
    echo "install them (Debian: sudo apt-get install ${missing[*]}) and rerun" >&2
    exit 1
  fi
fi

export KVWARDEN_TEST_MODELS=${KVWARDEN_TEST_MODELS:-$root/../shared/models}
if [ ! -f "$KVWARDEN_TEST_MODELS/stories260K.bin" ]; then
  if [ -n "${CI:-}" ]; then
    echo "error: test models not found in $KVWARDEN_TEST_MODELS (CI requires them)" >&2; exit 1
  fi
  echo "note: test models not found in $KVWARDEN_TEST_MODELS; model tests will skip"
fi

# ---- static checks -------------------------------------------------------
step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed on:"; echo "$unformatted"; exit 1; fi
# A merge that left its conflict markers in a file no compiler reads (a
# README, a script's comment) would otherwise go unnoticed.
if git rev-parse --git-dir >/dev/null 2>&1 && git grep -nE '^(<<<<<<< |>>>>>>> )' -- . ':!bench/out'; then
  echo "merge conflict markers left in the files above"; exit 1
fi

step "go vet"
go vet ./...

step "go mod tidy -diff"
go mod tidy -diff

# Generated files (the Q8 and K-quant kernels, the PTX) must be what their
# generators print today. The tree's state before and after is compared, so
# the check also works in a checkout with local edits.
step "go generate ./... leaves the tree unchanged"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tree_state() { git status --porcelain=v1 -uall; git diff; }
  before=$(tree_state | sha256sum)
  go generate ./...
  if [ "$(tree_state | sha256sum)" != "$before" ]; then
    echo "go generate changed the tree; commit the regenerated files:" >&2
    git status --short >&2
    exit 1
  fi
else
  echo "note: not a git checkout; go generate is not checked"
fi

# Supported systems build: Windows and macOS run on the CPU (the CUDA
# backend reports itself unsupported there); arm64 has NEON kernels.
step "cross-builds: windows/amd64, darwin/arm64, linux/arm64"
for target in windows/amd64 darwin/arm64 linux/arm64; do
  echo "  $target"
  GOOS=${target%/*} GOARCH=${target#*/} go build ./...
done

# The arm64 kernels (engine/ml/*_arm64.*) against the generic Go: under
# qemu-user with FEAT_DotProd (-cpu max: the SDOT kernels) and without
# (cortex-a57: the SMULL/SADALP ones); TestARM64Features fails if qemu did
# not give the CPU model's features. Natively on an arm64 host. Then the
# kernels composed, under -cpu max only (the cortex-a57 kernels give the
# same bits, checked above): stories260K (F32) and the Q8_0
# and Q4_K_M llama32 goldens through the whole forward pass against
# llama.cpp's logits, and a forward pass on an f16 KV pool (about 15 s);
# the tiny oracle shapes too, whose GGUF bytes (SHA-256 in the oracle
# data) must not depend on the architecture.
arm64_golden='TestGoldenGGUF$|TestBF16MatchesLlamaCpp$|TestGoldenArchQuant$/^(Q8_0|Q4_K_M)$|TestForwardF16KV$|TestTinyOracle$|TestTinyBuildDeterministic$'
arm64_tests='TestARM64Features|TestNEONKernelsRun|TestNEONHalfRowsMatchF32|TestBF16MatMulMatchesRef|TestBF16Subnormals|TestBF16ReductionFlush|TestBF16TininessAfterRounding|TestRoundBF16|TestQuantizeActQ8|TestQ8Levels|TestKQuantKernelsMatchGeneric|TestMXFP4MatMulBits|TestF16MatMulMatchesF32|TestVectorKernels|TestSiLUMulLevels|TestAttnKernels|TestAttnF16|TestAttnQ8NEON|TestAttnQuantKV|TestNEONx4Rows|TestAddNEON'
case "$qemu_arm64" in
  skip) ;;
  "")
    step "arm64 kernels (native)"
    go test -count=1 -short -run "$arm64_tests" ./engine/ml
    go test -count=1 -short -run "$arm64_golden" ./engine/model ;;
  *)
    step "arm64 NEON kernels under qemu-aarch64 (with and without dotprod)"
    for cpu in max:1 cortex-a57:0; do
      echo "  -cpu ${cpu%:*}"
      KVWARDEN_EXPECT_DOTPROD=${cpu#*:} GOARCH=arm64 go test -count=1 -short \
        -exec "qemu-aarch64 -cpu ${cpu%:*}" -run "$arm64_tests" ./engine/ml
    done
    echo "  forward pass, -cpu max"
    GOARCH=arm64 go test -count=1 -short -exec "qemu-aarch64 -cpu max" -run "$arm64_golden" ./engine/model ;;
esac

# ---- Go tests --------------------------------------------------------------
# Packages with concurrency run under the race detector; the numeric kernels
# run without it (the detector slows SIMD-free fallbacks 20x and they share no state).
race_pkgs=$(go list ./... | grep -vE '/engine/ml$|/engine/model/gguf$|/engine/tokenizer$|/engine/sample$' || true)
plain_pkgs=$(go list ./... | grep -E '/engine/ml$|/engine/model/gguf$|/engine/tokenizer$|/engine/sample$' || true)

step "go test -race (concurrent packages)"
go test -race -count=1 -timeout 15m $race_pkgs

# The llama.cpp golden tests of every architecture and quantization, whose
# quantized files skip under the race detector (numerics only; the plain-Go
# K-quant products are ten times slower there).
step "go test (golden/arch numerics, without -race)"
go test -count=1 -timeout 10m -run 'TestGoldenArch' ./engine/model/ ./engine/

if [ -n "$plain_pkgs" ]; then
  step "go test (numeric and parsing packages)"
  go test -count=1 -timeout 10m $plain_pkgs
fi

if go list ./engine/model/gguf >/dev/null 2>&1 && grep -q 'func FuzzParse' engine/model/gguf/*_test.go 2>/dev/null; then
  step "fuzz the GGUF reader (short run)"
  # Budgets are execution counts, not durations: Go 1.26's fuzz coordinator
  # can fail a duration-bounded run with "context deadline exceeded" at the
  # deadline on a loaded machine (golang/go#75804), having found nothing.
  # The counts are about 15 s and 10 s of fuzzing on the loaded 2-core CI.
  go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 300000x ./engine/model/gguf
fi

if grep -q 'func FuzzRender' engine/chat/*_test.go 2>/dev/null; then
  step "fuzz the chat template guard with hostile templates (short run)"
  go test -run '^$' -fuzz '^FuzzRender$' -fuzztime 100000x ./engine/chat
fi

# ---- deployment manifests --------------------------------------------------
# Optional (KVWARDEN_TEST_DEPLOY=1): decoding the manifests strictly needs the
# Kubernetes API modules, whose download and compile cost minutes; the
# manifests change rarely, so the main suite leaves them out.
if [ -n "${KVWARDEN_TEST_DEPLOY:-}" ] && [ -f "$root/deploy/check/go.mod" ]; then
  step "deploy/: Kubernetes manifests and Dockerfile (strict decoding, cross-checks)"
  (cd "$root/deploy/check" && gofmt -l . | (! grep .) && go vet ./... && go test -count=1 ./...)
fi

# ---- CUDA without a GPU ------------------------------------------------------
# The host side of every TestGPU* through the driver stand-in (a host-only
# libcuda/cuBLAS built by the tests: launches checked against the PTX, sm_90
# limits, live pointers, current context, pinned async copies), and the PTX
# assembled by NVIDIA's ptxas where it can be fetched.
step "CUDA stand-in: TestGPU* without a GPU"
KVWARDEN_CUDA_STANDIN=1 go test -count=1 -timeout 5m -run 'TestGPU|TestStandIn' \
  ./internal/device/cuda ./engine/model/gpu ./engine

step "PTX: current and assembled by ptxas"
bash "$root/scripts/check-ptx.sh"

# ---- embedding surfaces ----------------------------------------------------
if [ -f "$root/scripts/test-embed.sh" ]; then
  step "C API, ctest and Python bindings"
  bash "$root/scripts/test-embed.sh"
fi

end_step
printf '\n==> all tests passed\n'
