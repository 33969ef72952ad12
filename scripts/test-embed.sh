#!/usr/bin/env bash
# Embedding surfaces: builds libkvwarden.so through CMake (the Go toolchain
# does the compiling), then runs ctest: the header/link tests (C and C++),
# the misuse and multi-threaded C tests, their AddressSanitizer builds, the
# C example (built-in model and stories260K golden text), the install +
# find_package/pkg-config consumer test, the Python unittest suite and the
# Python example. Finally it checks `pip install ./bindings/python` in
# scratch virtual environments, with the library bundled and without (the
# build backend then builds it with the Go toolchain).
# Called by scripts/test.sh; runs on its own too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${KVWARDEN_EMBED_BUILD:-$root/build/embed}
export KVWARDEN_TEST_MODELS=${KVWARDEN_TEST_MODELS:-$root/../shared/models}

echo "--> cmake configure + build ($build)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2

echo "--> ctest"
ctest --test-dir "$build" --output-on-failure -j2

echo "--> pip install ./bindings/python (library bundled), scratch venv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/bindings/python" "$tmp/src"
cp "$build/lib/libkvwarden.so" "$tmp/src/kvwarden/"
python3 -m venv "$tmp/venv"
# the in-tree build backend needs nothing from an index (works offline)
"$tmp/venv/bin/pip" install -q --no-deps --no-index "$tmp/src"
(cd "$tmp" && env -u KVWARDEN_LIB "$tmp/venv/bin/python" -c '
import kvwarden, os
assert os.path.dirname(kvwarden.library_path) == os.path.dirname(kvwarden.__file__), kvwarden.library_path
with kvwarden.Engine(kv_memory_bytes=4 << 20) as e:
    e.generate("hi", max_tokens=2)
print("pip-installed kvwarden", kvwarden.version(), "uses", kvwarden.library_path)
')
echo "--> pip install ./bindings/python with no bundled library: the backend builds it with Go"
rm -f "$tmp/src/kvwarden/libkvwarden.so"
python3 -m venv "$tmp/venv2"
# build in the checkout itself (the backend finds the Go sources around bindings/python)
"$tmp/venv2/bin/pip" install -q --no-deps --no-index "$root/bindings/python"
(cd "$tmp" && env -u KVWARDEN_LIB "$tmp/venv2/bin/python" -c '
import kvwarden, os
assert os.path.dirname(kvwarden.library_path) == os.path.dirname(kvwarden.__file__), kvwarden.library_path
out = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False)("Once upon a time", max_tokens=8, temperature=0)
assert out["choices"][0]["text"] == ", there was a little girl", out  # 8 tokens
print("pip-built kvwarden", kvwarden.version(), "uses", kvwarden.library_path)
')
echo "--> embedding tests passed"
