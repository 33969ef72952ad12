"""Tests of the in-tree build backend (_build/kvw_backend.py): the wheel's
contents, and the messages when the library cannot be built."""
import importlib.util
import io
import os
import tempfile
import unittest
import zipfile
from unittest import mock

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("kvw_backend", os.path.join(HERE, "_build", "kvw_backend.py"))
backend = importlib.util.module_from_spec(spec)
spec.loader.exec_module(backend)


class TestBackend(unittest.TestCase):
    def test_pure_wheel_has_the_api_and_py_typed(self):
        if backend._bundled():
            self.skipTest("a libkvwarden.so is bundled in the source tree")
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {"KVWARDEN_BUILD_LIB": "0"}):
            name = backend.build_wheel(d)
            self.assertTrue(name.endswith("-py3-none-any.whl"), name)
            names = zipfile.ZipFile(os.path.join(d, name)).namelist()
        for f in ("kvwarden/__init__.py", "kvwarden/llama.py", "kvwarden/_lib.py", "kvwarden/py.typed",
                  "kvwarden-0.1.0.dist-info/RECORD"):
            self.assertIn(f, names)
        self.assertFalse(any(n.startswith("tests/") for n in names))

    def test_missing_go_says_what_to_install(self):
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {"PATH": d}, clear=False):
            os.environ.pop("GO", None)
            with self.assertRaises(backend.BuildError) as cm:
                backend.build_library(d, log=io.StringIO())
        msg = str(cm.exception)
        self.assertIn("needs the Go toolchain", msg)
        self.assertIn("https://go.dev/dl/", msg)
        self.assertIn("KVWARDEN_LIB", msg)

    def test_failed_build_shows_go_output(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "go")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'cgo: C compiler \"gcc\" not found' >&2\nexit 1\n")
            os.chmod(fake, 0o755)
            with self.assertRaises(backend.BuildError) as cm:
                backend.build_library(d, go=fake, log=io.StringIO())
        msg = str(cm.exception)
        self.assertIn("exit 1", msg)
        self.assertIn("install gcc or clang", msg)
        self.assertIn('C compiler "gcc" not found', msg)

    def test_outside_a_checkout(self):
        with mock.patch.object(backend, "_repo_root", return_value=None):
            with self.assertRaises(backend.BuildError) as cm:
                backend.build_library(tempfile.gettempdir(), log=io.StringIO())
        self.assertIn("Go sources are not around", str(cm.exception))

    def test_repo_root(self):
        root = backend._repo_root()
        self.assertIsNotNone(root)
        self.assertTrue(os.path.exists(os.path.join(root, "capi", "exports.map")))


if __name__ == "__main__":
    unittest.main()
