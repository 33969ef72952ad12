#!/usr/bin/env bash
# count.sh: guest instructions per weight (per multiply-add) of each
# BenchmarkNEONLevels and BenchmarkNEONAttn case (engine/ml, arm64) under qemu-aarch64 -cpu max
# (for the attention cases, per multiply-add of scores and sums together),
# as the difference of a long run (1001 products, 100001 SiLUMul/Dot calls)
# and a 1x run, with the insn.c plugin (GOMAXPROCS=1 and GOGC=off: no
# idle-thread spinning or collections in the count). The runtime's own work
# varies by a few million instructions from run to run, hence the long
# runs (about 1% here). Needs qemu-user and clang-16. From the repository root:
#
#	bash bench/qemu-insn/count.sh [benchmark regexp]
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clang-16 -O2 -shared -fPIC -o "$tmp/libinsn.so" bench/qemu-insn/insn.c
GOARCH=arm64 go test -c -o "$tmp/ml.test" ./engine/ml
insns() {
  GOMAXPROCS=1 GOGC=off qemu-aarch64 -plugin "$tmp/libinsn.so" -d plugin -cpu max "$tmp/ml.test" \
    -test.run '^$' -test.bench "^BenchmarkNEON(Levels|Attn)/$1\$" -test.benchtime "$2" 2>&1 | awk '/^insns/ {print $2}'
}
cases=$(for ty in F32 F16 BF16 Q8_0 Q8_0x4 Q4_0 Q5_0 Q4_1 Q5_1 IQ4_NL MXFP4 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS; do for l in generic neon dotprod; do echo "$ty/$l"; done; done; \
  for op in SiLUMul Dot AttnF16 AttnQ8_0; do for l in generic neon dotprod; do echo "$op/$l"; done; done)
printf '%-18s %8s %14s %10s\n' case runs insns "per value"
for c in $cases; do
  [[ $c =~ ${1:-.} ]] || continue
  runs=1000 per=$((64 * 2048))
  if [[ $c == SiLUMul/* || $c == Dot/* ]]; then runs=100000 per=2048; fi
  if [[ $c == *x4/* ]]; then per=$((4 * 64 * 2048)); fi
  a=$(insns "$c" 1x) b=$(insns "$c" $((runs + 1))x)
  printf '%-18s %8d %14d %10.3f\n' "$c" $runs $((b - a)) "$(echo "($b - $a) / $runs / $per" | bc -l)"
done
