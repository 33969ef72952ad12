"""A tiny in-tree PEP 517 build backend (standard library only).

kvwarden's Python package is pure Python plus, optionally, a bundled
libkvwarden.so. Building it needs nothing from a package index, so that
`pip install ./bindings/python` works offline (no setuptools/wheel download).
A wheel that bundles the library is tagged for this platform; one without it
is py3-none-any and finds the library through $KVWARDEN_LIB.
"""

import base64
import hashlib
import os
import sysconfig
import tarfile
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


def _files():
    for name in sorted(os.listdir(PKG)):
        path = os.path.join(PKG, name)
        if os.path.isfile(path) and (name.endswith(".py") or name in LIBS):
            yield f"{NAME}/{name}", path


def _tag():
    if any(os.path.exists(os.path.join(PKG, lib)) for lib in LIBS):
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return f"py3-none-{plat}", False
    return "py3-none-any", True


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tag, pure = _tag()
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

        for arc, path in _files():
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
