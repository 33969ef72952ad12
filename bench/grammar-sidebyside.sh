#!/usr/bin/env bash
# Constrained against free decode, kvwarden and llama.cpp's grammar sampler
# side by side (issue 23): the same GGUF file, one sequence (B=1), greedy,
# the same JSON Schema (llama-completion --json-schema-file, kvwarden's
# CompileJSONSchema through bench/sidebyside -json-schema), all four runs
# alternating within each round so that a noisy machine affects them alike.
#
#   bench/grammar-sidebyside.sh LLAMA_BUILD_DIR MODEL.gguf [ROUNDS] [SCHEMA...]
#
# LLAMA_BUILD_DIR needs bin/llama-completion (built from llama.cpp's public
# source in a scratch directory, never in this repository). The model is
# the stories110M-shaped Q4_K_M of bench/sidebyside.sh. Schemas default to
# bench/sidebyside/schemas/*.json (flat object, nested with arrays,
# enum-heavy: the shapes of BenchmarkGrammarSampling).
#
# llama.cpp's decode rate is its eval runs over eval time plus sampling
# time (the grammar is applied in sampling); kvwarden's is the generated
# tokens after the first over the wall time after the first (the mask runs
# in the scheduler, partly while the forward pass runs). Each figure is the
# best of ROUNDS (default 3). THREADS (default 1: on a machine shared with
# other work, 2-thread barriers stall both engines) and NTG (default 96,
# tokens generated; a constrained run ends earlier when its grammar is
# complete) can be set. CI does not run this script.
set -euo pipefail
if [ $# -lt 2 ]; then
	echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf [ROUNDS] [SCHEMA...]" >&2
	exit 2
fi
llama=$1 model=$2 rounds=${3:-3}
shift 2
[ $# -gt 0 ] && shift
threads=${THREADS:-1} ntg=${NTG:-96}
bin=$llama/bin
[ -x "$bin/llama-completion" ] || { echo "$0: no $bin/llama-completion" >&2; exit 1; }
[ -f "$model" ] || { echo "$0: no model $model" >&2; exit 1; }
cd "$(dirname "$0")/.."
schemas=("$@")
[ ${#schemas[@]} -gt 0 ] || schemas=(bench/sidebyside/schemas/*.json)
kvw=$(mktemp -d)/sidebyside
trap 'rm -rf "$(dirname "$kvw")"' EXIT
go build -o "$kvw" ./bench/sidebyside

best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b > a) print b; else print a }'; }
least() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b < a) print b; else print a }'; }
# llamarun [SCHEMA]: decode tokens/s of one llama-completion run, and its
# sampling time per token in ms (the grammar's cost, with a schema).
llamarun() {
	local extra=(--ignore-eos)
	[ -n "${1:-}" ] && extra=(--json-schema-file "$1")
	LD_LIBRARY_PATH=$bin "$bin/llama-completion" -m "$model" -p "Tom" -n "$ntg" -t "$threads" --temp 0 -s 1 \
		-no-cnv --perf --no-display-prompt "${extra[@]}" </dev/null 2>&1 >/dev/null | awk '
		/sampling time =/ { for (i = 1; i <= NF; i++) if ($i == "=") s = $(i + 1) }
		/ eval time =/ && !/prompt/ { for (i = 1; i <= NF; i++) { if ($i == "=") e = $(i + 1); if ($i == "runs") n = $(i - 1) } }
		END { if (n > 0) printf "%.2f %.3f\n", n * 1000 / (e + s), s / (n + 1); else print 0, 0 }'
}
kvwrun() {
	local extra=()
	[ -n "${1:-}" ] && extra=(-json-schema "$1")
	"$kvw" run -model "$model" -t "$threads" -b 1 -npp 8 -ntg "$ntg" "${extra[@]}" 2>/dev/null | sed -n 's/.*tg_tps=\([0-9.]*\).*/\1/p'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }'; }
echo "model: $model, threads $threads, B=1, greedy, $ntg tokens at most, best of $rounds alternating rounds"
echo
echo "| schema | llama.cpp free t/s | llama.cpp schema t/s | llama.cpp ratio | kvwarden free t/s | kvwarden schema t/s | kvwarden ratio | schema: kvwarden / llama.cpp | llama.cpp sampling ms/token free / schema |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for sc in "${schemas[@]}"; do
	lf= ls= kf= ks= lfs= lss=
	for r in $(seq "$rounds"); do
		# Rotate the order of the four runs from round to round.
		for k in 0 1 2 3; do
			case $(((k + r) % 4)) in
			0) read -r x y < <(llamarun) && lf=$(best "$lf" "$x") && lfs=$(least "$lfs" "$y") ;;
			1) read -r x y < <(llamarun "$sc") && ls=$(best "$ls" "$x") && lss=$(least "$lss" "$y") ;;
			2) x=$(kvwrun) && kf=$(best "$kf" "$x") ;;
			3) x=$(kvwrun "$sc") && ks=$(best "$ks" "$x") ;;
			esac
		done
		echo "$(basename "$sc") round $r: llama.cpp free=$lf schema=$ls (sampling ms/token free=$lfs schema=$lss); kvwarden free=$kf schema=$ks (best so far)" >&2
	done
	printf "| %s | %.1f | %.1f | %s | %.1f | %.1f | %s | %s | %.3f / %.3f |\n" "$(basename "$sc" .json)" "$lf" "$ls" "$(ratio "$lf" "$ls")" \
		"$kf" "$ks" "$(ratio "$kf" "$ks")" "$(ratio "$ls" "$ks")" "$lfs" "$lss"
done
