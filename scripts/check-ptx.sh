#!/usr/bin/env bash
# Checks that the committed PTX (internal/device/cuda/ptx) is what
# kernels/build-ptx.sh produces from kernels/*.cu today, then assembles both
# files with NVIDIA's ptxas (scripts/fetch-ptxas.sh fetches it from Debian's
# non-free nvidia-cuda-toolkit when it is not installed) and fails on any
# error, warning or register spill. Installs clang-16 with apt-get when it is
# missing and we are root. Exit 1 on a difference or a ptxas complaint; when
# ptxas cannot be had (no apt access) it says so and does not fail.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v clang++-16 >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "check-ptx: installing clang-16"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq clang-16 >/dev/null
  else
    echo "check-ptx: clang++-16 not found (Debian: apt-get install -y clang-16)" >&2
    exit 1
  fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$root/kernels/build-ptx.sh" "$tmp"
status=0
for f in kvwarden_sm80.ptx kvwarden_sm90.ptx; do
  if ! diff -q "$root/internal/device/cuda/ptx/$f" "$tmp/$f" >/dev/null; then
    echo "check-ptx: internal/device/cuda/ptx/$f is stale; run: go generate ./internal/device/cuda" >&2
    diff -u "$root/internal/device/cuda/ptx/$f" "$tmp/$f" | head -40 >&2 || true
    status=1
  fi
done
[ $status = 0 ] && echo "check-ptx: PTX is current"

if ptxas=$(bash "$root/scripts/fetch-ptxas.sh" 2>"$tmp/fetch.err"); then
  echo "check-ptx: assembling with $ptxas ($("$ptxas" --version | tail -1))"
  for arch in 80 90; do
    f=$root/internal/device/cuda/ptx/kvwarden_sm$arch.ptx
    if ! "$ptxas" -arch=sm_$arch -v "$f" -o "$tmp/sm$arch.cubin" > "$tmp/ptxas$arch.log" 2>&1; then
      echo "check-ptx: ptxas -arch=sm_$arch failed on $f:" >&2
      grep -iE 'error|fatal' "$tmp/ptxas$arch.log" | head -20 >&2
      status=1
      continue
    fi
    bad=$(grep -iE 'warning|error|[1-9][0-9]* bytes spill (stores|loads)' "$tmp/ptxas$arch.log" || true)
    if [ -n "$bad" ]; then
      echo "check-ptx: ptxas -arch=sm_$arch reports warnings or spills:" >&2
      # Name the kernel of each spill (ptxas prints it two lines above).
      grep -B3 -iE 'warning|[1-9][0-9]* bytes spill' "$tmp/ptxas$arch.log" | head -30 >&2
      status=1
    else
      echo "check-ptx: sm_$arch: $(grep -c 'Compiling entry' "$tmp/ptxas$arch.log") kernels assembled, no warnings, no spills, $(stat -c %s "$tmp/sm$arch.cubin") bytes of cubin"
    fi
  done
else
  echo "check-ptx: NOT CHECKED with ptxas: $(cat "$tmp/fetch.err" | tr '\n' ' ')(install nvidia-cuda-toolkit or set PTXAS to check the PTX assembles without spills)"
fi
exit $status
