"""A tiny in-tree PEP 517 build backend (standard library only).

kvwarden's Python package is pure Python plus a bundled libkvwarden.so.
Building it needs nothing from a package index, so that
`pip install ./bindings/python` works offline (no setuptools/wheel download).

The library in the wheel is, in order:
  1. a libkvwarden.so copied into kvwarden/ before installing;
  2. otherwise one built here with the Go toolchain from the repository
     around this directory (`go build -buildmode=c-shared ./capi`), as
     llama-cpp-python builds llama.cpp; this needs `go` (>= 1.26) and a C
     compiler for cgo, and says so clearly when either is missing;
  3. none, when KVWARDEN_BUILD_LIB=0: a py3-none-any wheel that finds the
     library through $KVWARDEN_LIB at run time.
A wheel that bundles the library is tagged for this platform.
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

NAME = "kvwarden"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(HERE, NAME)
LIBS = ("libkvwarden.so", "libkvwarden.dylib", "kvwarden.dll")

METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: Python bindings (ctypes) for kvwarden, an embeddable LLM inference engine
Requires-Python: >=3.9
"""


class BuildError(RuntimeError):
    """The library could not be built; the message says what to install."""


def _files():
    for name in sorted(os.listdir(PKG)):
        path = os.path.join(PKG, name)
        if os.path.isfile(path) and (name.endswith(".py") or name == "py.typed" or name in LIBS):
            yield f"{NAME}/{name}", path


def _bundled():
    return any(os.path.exists(os.path.join(PKG, lib)) for lib in LIBS)


def _plat_tag():
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _repo_root():
    """The kvwarden source tree this package sits in (bindings/python), or None."""
    root = os.path.dirname(os.path.dirname(HERE))
    try:
        with open(os.path.join(root, "go.mod")) as f:
            if "module github.com/kvwarden/kvwarden" in f.read():
                return root
    except OSError:
        pass
    return None


ALTERNATIVES = (
    "Alternatives: build it yourself (`cmake -S . -B build && cmake --build build`, or "
    "`go build -buildmode=c-shared -o libkvwarden.so ./capi`) and copy libkvwarden.so into "
    "bindings/python/kvwarden/ before `pip install`; or install with KVWARDEN_BUILD_LIB=0 "
    "and point KVWARDEN_LIB at a libkvwarden.so at run time.")


def build_library(out_dir, go=None, log=sys.stderr):
    """Builds libkvwarden.so into out_dir with the Go toolchain and returns
    its path. Raises BuildError with instructions when Go, a C compiler or
    the kvwarden sources are missing."""
    root = _repo_root()
    if root is None:
        raise BuildError(
            "kvwarden: no libkvwarden.so is bundled and the kvwarden Go sources are not around "
            f"this package ({HERE}), so the library cannot be built. Install from a kvwarden "
            "checkout (`pip install ./bindings/python`). " + ALTERNATIVES)
    go = go or os.environ.get("GO") or shutil.which("go")
    if not go or not os.path.exists(go):
        raise BuildError(
            "kvwarden: building libkvwarden.so needs the Go toolchain (go >= 1.26) on PATH, "
            "and a C compiler (gcc or clang) for cgo. Install Go from https://go.dev/dl/ or your "
            "distribution (Debian/Ubuntu: `sudo apt-get install golang-go`, if new enough), "
            "then rerun `pip install ./bindings/python`. " + ALTERNATIVES)
    out = os.path.join(out_dir, "libkvwarden.so")
    ldflags = ("-extldflags=-Wl,-soname,libkvwarden.so.0,--version-script="
               + os.path.join(root, "capi", "exports.map"))
    cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=" + ldflags, "-o", out, "./capi"]
    print("kvwarden: building libkvwarden.so with the Go toolchain: " + " ".join(cmd), file=log,
          flush=True)
    env = dict(os.environ, CGO_ENABLED="1")
    r = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        hint = ""
        if "C compiler" in r.stdout or "gcc" in r.stdout or "cc:" in r.stdout:
            hint = " cgo needs a C compiler: install gcc or clang (Debian: `sudo apt-get install gcc`)."
        raise BuildError(f"kvwarden: `go build` of libkvwarden.so failed (exit {r.returncode}).{hint}\n"
                         + r.stdout.strip() + "\n" + ALTERNATIVES)
    return out


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="kvwarden-build-") as tmp:
        extra = []
        if _bundled():
            tag, pure = _plat_tag(), False
        elif os.environ.get("KVWARDEN_BUILD_LIB", "1") == "0":
            tag, pure = "py3-none-any", True
        else:
            extra.append((f"{NAME}/libkvwarden.so", build_library(tmp)))
            tag, pure = _plat_tag(), False
        return _write_wheel(wheel_directory, tag, pure, extra)


def _write_wheel(wheel_directory, tag, pure, extra):
    wheel_name = f"{NAME}-{VERSION}-{tag}.whl"
    dist_info = f"{NAME}-{VERSION}.dist-info"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc, data, mode=0o644):
            info = zipfile.ZipInfo(arc, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = (mode | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            records.append(_record_line(arc, data))

        for arc, path in list(_files()) + extra:
            with open(path, "rb") as f:
                add(arc, f.read(), 0o755 if arc.endswith(LIBS) else 0o644)
        add(f"{dist_info}/METADATA", METADATA.encode())
        wheel_meta = (f"Wheel-Version: 1.0\nGenerator: kvw_backend\n"
                      f"Root-Is-Purelib: {'true' if pure else 'false'}\nTag: {tag}\n")
        add(f"{dist_info}/WHEEL", wheel_meta.encode())
        add(f"{dist_info}/top_level.txt", f"{NAME}\n".encode())
        record = "\n".join(records + [f"{dist_info}/RECORD,,"]) + "\n"
        z.writestr(f"{dist_info}/RECORD", record)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_build/kvw_backend.py"):
            t.add(os.path.join(HERE, rel), f"{base}/{rel}")
        for arc, path in _files():
            t.add(path, f"{base}/{arc}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return name
