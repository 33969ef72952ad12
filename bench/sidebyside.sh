#!/usr/bin/env bash
# Side-by-side benchmark against llama.cpp (issues 11 and 30): the same
# GGUF file and shapes, llama.cpp and kvwarden alternating round by round
# so that a noisy machine affects both alike.
#
#   bench/sidebyside.sh LLAMA_BUILD_DIR MODEL.gguf [ROUNDS]
#   bench/sidebyside.sh mkgguf -shape 110m|1b|8b|30b-a3b|phi4-mini|gptoss-20b -type q4_k_m|mxfp4_moe|... [-layers N] -o FILE
#   bench/sidebyside.sh bw [-t THREADS] [-mib 1024] [-r 5]
#   bench/sidebyside.sh recache FILE...   (page cache in 2 MiB folios, for
#       both sides' mappings; prints the share then mapped with 2 MiB pages)
#
# Each round:
# - the read bandwidth (bench/sidebyside bw: a 1 GiB buffer streamed with
#   kvwarden's thread count), the bound of one-sequence decode;
# - llama.cpp `llama-bench -p 128 -n 128` and kvwarden's prefill of 128
#   tokens and decode of 128 tokens after a 1-token prompt, so both sides
#   decode one sequence at KV depth 0..128;
# - unless BATCH=0, llama.cpp `llama-batched-bench -npp 128 -ntg N -npl 32`
#   and kvwarden with 32 requests of 128 prompt tokens, both decoding at
#   depth 128..128+N. kvwarden's B=32 decode rate counts only tokens
#   produced after every sequence had its first token (bench/sidebyside
#   run), as batched-bench times only its lock-step decode.
# The table gives the median and the best of the rounds for each side; the
# ratio is kvwarden / llama.cpp of the medians (of the bests in brackets).
# One-sequence decode is also given as a fraction of the bound: tokens/s x
# the weight bytes one token reads / the median bandwidth.
#
# Environment: THREADS (both sides, default 2), THREADS_LLAMA and
# THREADS_KVW (each side's own, default THREADS: llama.cpp's spinning
# thread pool collapses when the machine is oversubscribed, kvwarden's
# does not, and a fair table names the counts), NTG_BATCH (tokens per
# sequence at B=32, default 128), BATCH=0 (one sequence only), NPL=B (the
# batch of sequences instead of 32, e.g. 8 for an MoE model), LOAD=N
# (N busy-looping background processes for the whole run: both sides
# measured under the same fixed oversubscription; the table says so),
# DEPTH=N (KV depth, llama-bench's -d N: both sides prefill and decode
# with N tokens already in the context; kvwarden puts them there through
# its prefix cache, bench/sidebyside/depth.go; one sequence only),
# LLAMA_ARGS (extra llama-bench arguments, e.g. "--poll 0": its threads
# sleep instead of spinning between graph nodes; the table names them).
#
# The model files (random weights; quantized types written directly, no
# F16 intermediate, in llama-quantize's mix of types):
#
#   bench/sidebyside.sh mkgguf -shape 1b -type q4_k_m -o /tmp/m/1b-q4km.gguf
#   bench/sidebyside.sh mkgguf -shape 30b-a3b -layers 8 -type q4_k_m -o /tmp/m/30b-a3b-L8-q4km.gguf
#   bench/sidebyside.sh mkgguf -shape gptoss-20b -layers 8 -type mxfp4_moe -o /tmp/m/gptoss-L8-mxfp4.gguf
#
# Build llama.cpp from its public source in a scratch directory, never in
# this repository. CI does not run this script.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = mkgguf ] || [ "${1:-}" = bw ] || [ "${1:-}" = recache ]; then
	exec go run ./bench/sidebyside "$@"
fi
if [ $# -lt 2 ]; then
	echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf [ROUNDS] | mkgguf ... | bw ... | recache FILE..." >&2
	exit 2
fi
llama=$1 model=$2 rounds=${3:-2}
threads=${THREADS:-2}
tl=${THREADS_LLAMA:-$threads}
tk=${THREADS_KVW:-$threads}
ntgb=${NTG_BATCH:-128}
batch=${BATCH:-1}
depth=${DEPTH:-0}
ldepth=() kdepth=()
if [ "$depth" != 0 ]; then
	ldepth=(-d "$depth") kdepth=(-depth "$depth") batch=0
fi
npl=${NPL:-32}
bin=$llama/bin
[ -x "$bin/llama-bench" ] || { echo "$0: no $bin/llama-bench" >&2; exit 1; }
[ -f "$model" ] || { echo "$0: no model $model" >&2; exit 1; }
load=${LOAD:-0}
kvw=$(mktemp -d)/sidebyside
hogs=()
cleanup() {
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$(dirname "$kvw")"
}
trap cleanup EXIT
go build -o "$kvw" ./bench/sidebyside
for _ in $(seq "$load"); do
	sh -c 'while :; do :; done' &
	hogs+=($!)
done

field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p"; }
# Per-metric lists of the rounds' values, space-separated.
declare -A vals
add() { vals[$1]="${vals[$1]:-} $2"; }
wbytes=0
for r in $(seq "$rounds"); do
	bwout=$("$kvw" bw -t "$tk" -mib 1024 -r 3)
	bw=$(echo "$bwout" | field median_gbs)
	add bw "$bw"
	# llama.cpp: llama-bench for one sequence (JSON lines: avg_ts per test).
	out=$("$bin/llama-bench" -m "$model" -t "$tl" -p 128 -n 128 "${ldepth[@]}" -r 1 ${LLAMA_ARGS:-} -o jsonl 2>/dev/null)
	read -r pp tg < <(echo "$out" | python3 -c '
import json, sys
pp = tg = 0
for line in sys.stdin:
    r = json.loads(line)
    if r["n_gen"] == 0: pp = r["avg_ts"]
    else: tg = r["avg_ts"]
print(pp, tg)')
	add l_pp1 "$pp"; add l_tg1 "$tg"
	# kvwarden: prefill of 128 tokens; decode of 128 after a 1-token prompt.
	kpp1=$("$kvw" run -model "$model" -t "$tk" -b 1 -npp 128 -ntg 4 "${kdepth[@]}" | field pp_tps)
	kout=$("$kvw" run -model "$model" -t "$tk" -b 1 -npp 1 -ntg 128 "${kdepth[@]}")
	ktg1=$(echo "$kout" | field tg_tps)
	wbytes=$(echo "$kout" | field weight_bytes)
	kpages="$(echo "$kout" | sed -n 's/.*weight_pages="\(.*\)".*/\1/p'), $(echo "$kout" | field huge_frac) of the weights' mapping PMD-mapped after decode"
	add k_pp1 "$kpp1"; add k_tg1 "$ktg1"
	line="round $r: bw=${bw}GB/s llama.cpp pp1=$pp tg1=$tg; kvwarden pp1=$kpp1 tg1=$ktg1"
	if [ "$batch" != 0 ]; then
		# llama.cpp: batched-bench at 32 sequences (columns: PP TG B N_KV T_PP S_PP T_TG S_TG T S).
		out=$("$bin/llama-batched-bench" -m "$model" -t "$tl" -c $((npl * (128 + ntgb) + 256)) -b 4096 -ub 512 -npp 128 -ntg "$ntgb" -npl "$npl" 2>/dev/null)
		read -r bpp32 btg32 < <(echo "$out" | awk -F'|' -v b="$npl" '$4 + 0 == b { print $7, $9 }' | tail -1)
		add l_pp32 "$bpp32"; add l_tg32 "$btg32"
		kout=$("$kvw" run -model "$model" -t "$tk" -b "$npl" -npp 128 -ntg "$ntgb")
		kpp=$(echo "$kout" | field pp_tps) ktg=$(echo "$kout" | field tg_tps)
		add k_pp32 "$kpp"; add k_tg32 "$ktg"
		line="$line; llama.cpp pp$npl=$bpp32 tg$npl=$btg32; kvwarden pp$npl=$kpp tg$npl=$ktg"
	fi
	echo "$line" >&2
done

med() { echo "$1" | tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
top() { echo "$1" | tr ' ' '\n' | grep . | sort -g | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }'; }
row() {
	local name=$1 l=${vals[$2]} k=${vals[$3]}
	local lm lb km kb
	lm=$(med "$l") lb=$(top "$l") km=$(med "$k") kb=$(top "$k")
	printf "| %s | %.1f (%.1f) | %.1f (%.1f) | %s (%s) |\n" "$name" "$lm" "$lb" "$km" "$kb" "$(ratio "$lm" "$km")" "$(ratio "$lb" "$kb")"
}
bwm=$(med "${vals[bw]}")
echo
echo "model: $model; threads: llama.cpp $tl, kvwarden $tk; llama-bench extra arguments: ${LLAMA_ARGS:-none}; KV depth $depth; $rounds alternating rounds; $load background busy loops; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "kvwarden weights (last round, KVWARDEN_WEIGHTS=${KVWARDEN_WEIGHTS:-auto}): $kpages"
echo "read bandwidth (bench/sidebyside bw -t $tk): median $bwm GB/s, rounds:${vals[bw]}"
echo
echo "| case | llama.cpp t/s median (best) | kvwarden t/s median (best) | ratio of medians (of bests) |"
echo "|---|---:|---:|---:|"
row "decode B=1, KV depth $depth..$((depth + 128))" l_tg1 k_tg1
row "prefill 1x128 at KV depth $depth" l_pp1 k_pp1
if [ "$batch" != 0 ]; then
	row "decode B=$npl, depth 128..$((128 + ntgb)) (kvwarden: tokens after the timer only)" l_tg32 k_tg32
	row "prefill ${npl}x128" l_pp32 k_pp32
fi
echo
awk -v w="$wbytes" -v bw="$bwm" -v l="$(med "${vals[l_tg1]}")" -v k="$(med "${vals[k_tg1]}")" 'BEGIN {
	b = bw * 1e9 / w
	printf "decode B=1 bound: %.1f MB of weights per token at %.1f GB/s = %.1f t/s; llama.cpp %.0f%%, kvwarden %.0f%% of it (medians)\n", w / 1e6, bw, b, 100 * l / b, 100 * k / b
}'
