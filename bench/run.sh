#!/usr/bin/env bash
# Runs the benchmark suites whose figures bench/RESULTS.md quotes, one after
# the other (never concurrently: they share 2 cores), and keeps the raw
# output under bench/out/. Takes about 10 minutes on the 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out; mkdir -p "$out"
run() { local name=$1; shift; echo "==> $name: go test $*"; go test "$@" | tee "$out/$name.txt"; }
run kvcache   -run '^$' -bench . -benchtime 1s ./internal/kvcache/
run ml        -run '^$' -bench 'Bandwidth|MatVec$|GEMM$' -benchtime 10x ./engine/ml/
run model     -run '^$' -bench 'Decode|Prefill' -benchtime 20x ./bench/
run compress  -run '^$' -bench KVCompression -benchtime 3x ./bench/
run engine    -run '^$' -bench 'Engine(Concurrency|PrefixCache|Preemption)' -benchtime 1x ./bench/
run safety    -run '^$' -bench 'EngineSafety' -benchtime 8x ./bench/
