#!/bin/bash
# asmcmp.sh [REV]: compares the machine code and relocations of every
# symbol (functions and data) that engine/ml's *_amd64.s files assemble to,
# between git revision REV (default HEAD) and the working tree. A change to
# a generator or a hand-written file that is meant to leave the kernels as
# they are (moving code between files, macros for repeated text) must
# print "same"; any difference is listed by symbol.
#
#	bash engine/ml/internal/gen/asmcmp.sh main
set -euo pipefail
rev=${1:-HEAD}
ml=$(cd "$(dirname "$0")/../.." && pwd)
root=$(git -C "$ml" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$root" archive "$rev" engine/ml | tar -x -C "$tmp"

# dump DIR: one line per symbol: name, kind, size, then its bytes and
# relocations as go tool asm -S prints them (no source positions).
dump() {
  local inc f
  inc=$(go env GOROOT)/pkg/include
  cd "$1"
  for f in *_amd64.s; do
    go tool asm -S -p ml -I "$inc" -I . -D GOOS_linux -D GOARCH_amd64 -o "$tmp/o" "$f"
  done | awk '
    /^[^\t ]/ { if (blk != "") print blk; blk = $1 " " $2 " " $4; next }
    /^\t0x[0-9a-f]+ [0-9a-f][0-9a-f] / { blk = blk "|" $0; next }
    /^\trel / { blk = blk "|" $0; next }
    END { if (blk != "") print blk }' | sort
}
dump "$tmp/engine/ml" >"$tmp/old"
dump "$ml" >"$tmp/new"
if cmp -s "$tmp/old" "$tmp/new"; then
  echo "same: $(wc -l <"$tmp/new") symbols, machine code and relocations unchanged from $rev"
  exit 0
fi
echo "machine code or relocations differ from $rev in:"
comm -3 "$tmp/old" "$tmp/new" | sed 's/^\t//' | cut -d' ' -f1 | sort -u
exit 1
