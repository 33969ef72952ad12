#!/usr/bin/env bash
# Prints the path of NVIDIA's ptxas, fetching it when needed from Debian
# bookworm's non-free nvidia-cuda-toolkit (11.8) with apt-get download and
# dpkg -x into a cache directory, without installing anything and without
# touching the system's apt sources (a private apt configuration is used).
# Order: $PTXAS, ptxas on PATH, the cache, a fresh download.
# Exit 0 with the path on stdout; exit 3 with the reason on stderr when it
# cannot be had (no apt-get, no network, package gone).
set -uo pipefail
if [ -n "${PTXAS:-}" ] && [ -x "$PTXAS" ]; then echo "$PTXAS"; exit 0; fi
if command -v ptxas >/dev/null; then command -v ptxas; exit 0; fi
cache=${KVWARDEN_PTXAS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvwarden/cudatk}
if [ -x "$cache/usr/bin/ptxas" ]; then echo "$cache/usr/bin/ptxas"; exit 0; fi
command -v apt-get >/dev/null || { echo "fetch-ptxas: no apt-get on this machine" >&2; exit 3; }
command -v dpkg >/dev/null || { echo "fetch-ptxas: no dpkg on this machine" >&2; exit 3; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb http://deb.debian.org/debian bookworm contrib non-free" > "$work/sources.list"
apt=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root -qq)
if ! timeout -k 5 120 apt-get "${apt[@]}" update >"$work/log" 2>&1; then
  echo "fetch-ptxas: apt-get update of bookworm contrib non-free failed (no network to deb.debian.org?):" >&2
  tail -3 "$work/log" >&2; exit 3
fi
if ! (cd "$work" && timeout -k 5 300 apt-get "${apt[@]}" download nvidia-cuda-toolkit >>"$work/log" 2>&1); then
  echo "fetch-ptxas: apt-get download nvidia-cuda-toolkit failed:" >&2
  tail -3 "$work/log" >&2; exit 3
fi
mkdir -p "$cache"
dpkg -x "$work"/nvidia-cuda-toolkit_*.deb "$work/x" || { echo "fetch-ptxas: dpkg -x failed" >&2; exit 3; }
for f in ptxas cuobjdump; do
  mkdir -p "$cache/usr/bin"
  [ -x "$work/x/usr/bin/$f" ] && cp "$work/x/usr/bin/$f" "$cache/usr/bin/"
done
[ -x "$cache/usr/bin/ptxas" ] || { echo "fetch-ptxas: the package has no usr/bin/ptxas" >&2; exit 3; }
echo "$cache/usr/bin/ptxas"
