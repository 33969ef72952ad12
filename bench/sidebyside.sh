#!/usr/bin/env bash
# Side-by-side benchmark against llama.cpp (issue 11): the same GGUF file,
# the same threads and shapes, llama.cpp and kvwarden alternating in one
# run so that a noisy machine affects both alike.
#
#   bench/sidebyside.sh LLAMA_BUILD_DIR MODEL.gguf [ROUNDS]
#
# llama.cpp (built from its public source in a scratch directory, never in
# this repository) runs `llama-bench -t 2 -p 128 -n 128` (prefill and decode
# of one sequence) and `llama-batched-bench -npp 128 -ntg 128 -npl 1,32 -t 2`;
# kvwarden runs bench/sidebyside (its public Go API: B requests of 128 random
# prompt tokens, 128 generated greedily). Each figure is the best of ROUNDS
# (default 2) alternating rounds. To make the model files:
#
#   go run ./bench/sidebyside mkgguf -o /tmp/m/f32.gguf
#   LLAMA_BUILD_DIR/bin/llama-quantize /tmp/m/f32.gguf /tmp/m/q4km.gguf Q4_K_M
#
# CI does not run this script.
set -euo pipefail
if [ $# -lt 2 ]; then
	echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf [ROUNDS]" >&2
	exit 2
fi
llama=$1 model=$2 rounds=${3:-2}
threads=${THREADS:-2}
# NTG_BATCH shortens the generation of the 32-sequence runs (both sides
# alike) where a loaded machine makes 32 x 128 decode steps too slow.
ntgb=${NTG_BATCH:-128}
# BATCH=0 skips the 32-sequence runs (decode and prefill of one sequence only).
batch=${BATCH:-1}
bin=$llama/bin
[ -x "$bin/llama-bench" ] || { echo "$0: no $bin/llama-bench" >&2; exit 1; }
[ -f "$model" ] || { echo "$0: no model $model" >&2; exit 1; }
cd "$(dirname "$0")/.."
kvw=$(mktemp -d)/sidebyside
trap 'rm -rf "$(dirname "$kvw")"' EXIT
go build -o "$kvw" ./bench/sidebyside

best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b > a) print b; else print a }'; }
l_pp1= l_tg1= l_btg1= l_tg32= l_pp32= k_pp1= k_tg1= k_tg32= k_pp32=
for r in $(seq "$rounds"); do
	# llama.cpp: llama-bench for one sequence (JSON lines: avg_ts per test).
	out=$("$bin/llama-bench" -m "$model" -t "$threads" -p 128 -n 128 -r 1 -o jsonl 2>/dev/null)
	read -r pp tg < <(echo "$out" | python3 -c '
import json, sys
pp = tg = 0
for line in sys.stdin:
    r = json.loads(line)
    if r["n_gen"] == 0: pp = r["avg_ts"]
    else: tg = r["avg_ts"]
print(pp, tg)')
	l_pp1=$(best "$l_pp1" "$pp"); l_tg1=$(best "$l_tg1" "$tg")
	# kvwarden, one sequence.
	read -r kpp1 ktg1 < <("$kvw" run -model "$model" -t "$threads" -b 1 -npp 128 -ntg 128 | sed 's/[a-z_]*=//g')
	k_pp1=$(best "$k_pp1" "$kpp1"); k_tg1=$(best "$k_tg1" "$ktg1")
	if [ "$batch" = 0 ]; then
		echo "round $r: llama.cpp pp1=$pp tg1=$tg; kvwarden pp1=$kpp1 tg1=$ktg1" >&2
		continue
	fi
	# llama.cpp: batched-bench at 32 sequences (columns: PP TG B N_KV T_PP S_PP T_TG S_TG T S).
	out=$("$bin/llama-batched-bench" -m "$model" -t "$threads" -c 8704 -b 4096 -ub 512 -npp 128 -ntg "$ntgb" -npl 1,32 2>/dev/null)
	read -r _ btg1 < <(echo "$out" | awk -F'|' '$4 ~ /^ *1 *$/ { print $7, $9 }' | tail -1)
	read -r bpp32 btg32 < <(echo "$out" | awk -F'|' '$4 ~ /^ *32 *$/ { print $7, $9 }' | tail -1)
	l_btg1=$(best "$l_btg1" "$btg1"); l_pp32=$(best "$l_pp32" "$bpp32"); l_tg32=$(best "$l_tg32" "$btg32")
	# kvwarden, 32 sequences.
	read -r kpp ktg < <("$kvw" run -model "$model" -t "$threads" -b 32 -npp 128 -ntg "$ntgb" | sed 's/[a-z_]*=//g')
	k_pp32=$(best "$k_pp32" "$kpp"); k_tg32=$(best "$k_tg32" "$ktg")
	echo "round $r: llama.cpp pp1=$pp tg1=$tg batched tg1=$btg1 pp32=$bpp32 tg32=$btg32; kvwarden pp1=$kpp1 tg1=$ktg1 pp32=$kpp tg32=$ktg" >&2
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }'; }
echo
echo "model: $model, threads $threads, best of $rounds alternating rounds, $ntgb tokens generated per sequence at B=32"
echo
echo "| case | llama.cpp t/s | kvwarden t/s | ratio |"
echo "|---|---:|---:|---:|"
printf "| decode B=1 | %.1f | %.1f | %s |\n" "$l_tg1" "$k_tg1" "$(ratio "$l_tg1" "$k_tg1")"
printf "| prefill 1x128 | %.1f | %.1f | %s |\n" "$l_pp1" "$k_pp1" "$(ratio "$l_pp1" "$k_pp1")"
[ "$batch" = 0 ] && exit 0
printf "| decode B=1 (llama-batched-bench) | %.1f | %.1f | %s |\n" "$l_btg1" "$k_tg1" "$(ratio "$l_btg1" "$k_tg1")"
printf "| decode B=32 | %.1f | %.1f | %s |\n" "$l_tg32" "$k_tg32" "$(ratio "$l_tg32" "$k_tg32")"
printf "| prefill 32x128 | %.1f | %.1f | %s |\n" "$l_pp32" "$k_pp32" "$(ratio "$l_pp32" "$k_pp32")"
