#!/usr/bin/env bash
# Checks that the committed PTX (engine/device/cuda/ptx) is what
# kernels/build-ptx.sh produces from kernels/*.cu today. Installs clang-16
# with apt-get when it is missing and we are root. Exit 1 on a difference.
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
  if ! diff -q "$root/engine/device/cuda/ptx/$f" "$tmp/$f" >/dev/null; then
    echo "check-ptx: engine/device/cuda/ptx/$f is stale; run: go generate ./engine/device/cuda" >&2
    diff -u "$root/engine/device/cuda/ptx/$f" "$tmp/$f" | head -40 >&2 || true
    status=1
  fi
done
[ $status = 0 ] && echo "check-ptx: PTX is current"
exit $status
