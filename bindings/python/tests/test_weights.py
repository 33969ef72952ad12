"""KVWARDEN_WEIGHTS (weight placement) through the C API: read at each
engine open, so that setting it from Python after import works."""
import os
import unittest
from unittest import mock

import kvwarden
from kvwarden import _lib

from .test_kvwarden import MODEL, TOKENIZER, need_model


class TestWeights(unittest.TestCase):
    def test_bad_value_is_invalid_argument(self):
        need_model(self)
        with mock.patch.dict(os.environ, {"KVWARDEN_WEIGHTS": "bogus"}):
            with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                kvwarden.Engine(MODEL, TOKENIZER)
        self.assertIn('KVWARDEN_WEIGHTS: mmap: weight placement "bogus"', str(cm.exception))

    def test_placement_is_logged(self):
        need_model(self)
        for mode in ("copy", "map"):
            with self.subTest(mode=mode), mock.patch.dict(os.environ, {"KVWARDEN_WEIGHTS": mode}):
                logs = []
                with kvwarden.Engine(MODEL, TOKENIZER, log=lambda level, msg: logs.append(msg),
                                     log_level=_lib.LOG_INFO) as e:
                    self.assertTrue(e.generate("Once", max_tokens=4, temperature=0))
                lines = [m for m in logs if "engine: weights on" in m]
                self.assertEqual(len(lines), 1, logs)
                self.assertIn("placement=" + mode, lines[0])


if __name__ == "__main__":
    unittest.main()
