#!/usr/bin/env bash
# Builds, on a machine with Go (no GPU needed), everything bench/gpu/check.sh
# runs on the GPU machine (which has no Go): static test binaries with the
# PTX embedded, the PTX itself (for ptxas), sm_80 and sm_90 cubins assembled
# with NVIDIA's ptxas (the loader's fallback when the driver cannot compile
# PTX; see scripts/fetch-ptxas.sh), and the small test models and golden
# data. Output: bench/gpu/bin/ (build output, not tracked; carry it, it must
# stay under the device tool's 64 MiB).
#
# The cubins are carried, not embedded: each is about 0.5 MB (1 MB more in
# every binary for a fallback most drivers never need), they are specific to
# the ptxas that made them, and the repository stays free of binaries made
# by a non-free tool. KVWARDEN_CUDA_CUBIN_DIR tells the loader where they are.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=bench/gpu/bin
rm -rf "$bin"
mkdir -p "$bin/ptx" "$bin/shared/models" "$bin/shared/golden"
export CGO_ENABLED=0 # purego needs no cgo; no libc version coupling to the GPU machine
# Stripped (-s -w): the carried folder must stay under 64 MiB.
go test -c -ldflags='-s -w' -o "$bin/cuda.test" ./internal/device/cuda
go test -c -ldflags='-s -w' -o "$bin/gpu.test" ./engine/model/gpu
go test -c -ldflags='-s -w' -o "$bin/engine.test" ./engine
cp internal/device/cuda/ptx/*.ptx "$bin/ptx/"
mkdir -p "$bin/cubin"
if ptxas=$(bash scripts/fetch-ptxas.sh); then
  for arch in 80 90; do
    "$ptxas" -arch=sm_$arch -O3 "$bin/ptx/kvwarden_sm$arch.ptx" -o "$bin/cubin/kvwarden_sm$arch.cubin"
  done
  "$ptxas" --version | tail -1 > "$bin/cubin/PTXAS_VERSION"
else
  echo "build: WARNING: no ptxas, so no cubins: the GPU run depends on the driver's PTX JIT" >&2
fi
models=${KVWARDEN_TEST_MODELS:-$root/../shared/models}
for f in stories260K.bin tok512.bin; do
  if [ -f "$models/$f" ]; then cp "$models/$f" "$bin/shared/models/"; else echo "build: $models/$f not found; the golden GPU test will skip" >&2; fi
done
golden=$models/../golden
for f in stories260K_greedy.json; do
  if [ -f "$golden/$f" ]; then cp "$golden/$f" "$bin/shared/golden/"; fi
done
# The architecture golden files: all of them are 119 MB, and the binaries
# leave about 30 MB, so a subset that covers the kernels. Quantized files
# are dequantized on upload and compared with llama.cpp on the dequantized
# weights (the same math as F32, at a fifth of the size): plain Llama
# (llama32.Q4_K_M); soft-caps, GeGLU, post-norms and a sliding window
# (gemma2); LongRoPE and its context switch (phi3-longrope, which
# TestGPULongRoPEContext needs); the mixture-of-experts FFN: qwen3moe
# (softmax gating, normalised top-k, Q/K norm) and gpt-oss (router and
# expert biases, top-k softmax, clamped SwiGLU, attention sinks, Q/K/V/O
# biases, alternating sliding window, YaRN; MXFP4 experts). qwen2's biases
# and NeoX RoPE are covered by gpt-oss. check.sh runs exactly what is here.
mkdir -p "$bin/shared/golden/arch"
carried=()
for f in ${KVWARDEN_GPU_GOLDEN_ARCH:-llama32.Q4_K_M gemma2 phi3-longrope qwen3moe.Q4_K_M gptoss.MXFP4_MOE}; do
  if [ -f "$golden/arch/$f.gguf" ] && [ -f "$golden/arch/$f.json" ]; then
    cp "$golden/arch/$f.gguf" "$golden/arch/$f.json" "$bin/shared/golden/arch/"
    carried+=("$f")
  else
    echo "build: $golden/arch/$f.{gguf,json} not found; not carried" >&2
  fi
done
(IFS=,; echo "${carried[*]}") > "$bin/shared/golden/arch/CARRIED"
git rev-parse HEAD > "$bin/REVISION" 2>/dev/null || true
size=$(du -sm "$bin" | cut -f1)
echo "build: $bin is ${size} MiB"
if [ "$size" -gt 63 ]; then
  echo "build: ERROR: ${size} MiB is more than the device tool carries (64 MiB); carry fewer golden files (KVWARDEN_GPU_GOLDEN_ARCH)" >&2
  exit 1
fi
echo "built $bin; on the GPU machine run: bash bench/gpu/check.sh (carry bench/gpu/bin)"
