#!/usr/bin/env bash
# Builds, on a machine with Go (no GPU needed), everything bench/gpu/check.sh
# runs on the GPU machine (which has no Go): static test binaries with the
# PTX embedded, the PTX itself (for ptxas), and the small test model and
# golden data. Output: bench/gpu/bin/ (build output, not tracked).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=bench/gpu/bin
rm -rf "$bin"
mkdir -p "$bin/ptx" "$bin/shared/models" "$bin/shared/golden"
export CGO_ENABLED=0 # purego needs no cgo; no libc version coupling to the GPU machine
go test -c -o "$bin/cuda.test" ./engine/device/cuda
go test -c -o "$bin/gpu.test" ./engine/model/gpu
go test -c -o "$bin/engine.test" ./engine
cp engine/device/cuda/ptx/*.ptx "$bin/ptx/"
models=${KVWARDEN_TEST_MODELS:-$root/../shared/models}
for f in stories260K.bin tok512.bin; do
  if [ -f "$models/$f" ]; then cp "$models/$f" "$bin/shared/models/"; else echo "build: $models/$f not found; the golden GPU test will skip" >&2; fi
done
golden=$models/../golden
for f in stories260K_greedy.json; do
  if [ -f "$golden/$f" ]; then cp "$golden/$f" "$bin/shared/golden/"; fi
done
git rev-parse HEAD > "$bin/REVISION" 2>/dev/null || true
du -sh "$bin"
echo "built $bin; on the GPU machine run: bash bench/gpu/check.sh (carry bench/gpu/bin)"
