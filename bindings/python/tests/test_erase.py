"""Engine.erase_tenant_kv (kvw_tenant_erase_kv) on the built-in model."""
import ctypes
import os
import tempfile
import unittest

import kvwarden
from kvwarden import _lib

PROMPT = ("Once upon a time there was a little girl who lived in a village near the forest, "
          "and every day she walked to the river to watch the fish swim by.")


class TestEraseTenantKV(unittest.TestCase):
    def setUp(self):
        self.eng = kvwarden.Engine(kvwarden.BUILTIN_STORIES, kv_memory_bytes=8 << 20, page_size=4,
                                   host_tier_bytes=1 << 20)
        self.addCleanup(self.eng.close)

    def run_prompt(self, tenant):
        s = self.eng.stream(PROMPT, max_tokens=4, tenant=tenant)
        text = "".join(s)
        return text, s.result["cached_tokens"]

    def test_erase_makes_prompt_a_miss(self):
        first, _ = self.run_prompt("alice")
        again, cached = self.run_prompt("alice")
        self.assertGreater(cached, 0)
        self.assertEqual(first, again)
        self.run_prompt("bob")
        _, bob_cached = self.run_prompt("bob")
        self.assertGreater(bob_cached, 0)

        res = self.eng.erase_tenant_kv("alice")
        self.assertEqual(res["key_epoch"], 2)
        self.assertGreaterEqual(res["prefix_device_pages"] + res["prefix_host_pages"], cached // 4)

        text, cached = self.run_prompt("alice")
        self.assertEqual(cached, 0)
        self.assertEqual(text, first)
        _, cached = self.run_prompt("bob")
        self.assertEqual(cached, bob_cached)

    def test_struct_size_matches_library(self):
        buf = (ctypes.c_uint8 * 256)()
        _lib.lib.kvw_erase_result_init(ctypes.cast(buf, ctypes.POINTER(_lib.kvw_erase_result)))
        self.assertEqual(ctypes.c_uint32.from_buffer(buf).value, ctypes.sizeof(_lib.kvw_erase_result))

    def test_misuse(self):
        with self.assertRaises(TypeError):
            self.eng.erase_tenant_kv(None)
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.erase_tenant_kv("a\x00b")
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.erase_tenant_kv("x" * 2000)
        self.eng.close()
        with self.assertRaises(kvwarden.ClosedError):
            self.eng.erase_tenant_kv("alice")


class TestDiskTier(unittest.TestCase):
    def test_prefix_survives_engines_with_the_same_key(self):
        with tempfile.TemporaryDirectory() as d:
            key = os.path.join(d, "kv.key")
            with open(key, "wb") as f:
                f.write(bytes(range(32)))
            params = dict(kv_memory_bytes=8 << 20, page_size=4, kv_key_file=key,
                          kv_disk_dir=os.path.join(d, "kv"), kv_disk_budget_bytes=16 << 20)
            with kvwarden.Engine(kvwarden.BUILTIN_STORIES, **params) as eng:
                first = eng.generate(PROMPT, max_tokens=4, tenant="alice")
            with kvwarden.Engine(kvwarden.BUILTIN_STORIES, **params) as eng:
                s = eng.stream(PROMPT, max_tokens=4, tenant="alice")
                self.assertEqual("".join(s), first)
                self.assertGreater(s.result["cached_tokens"], 0)
                self.assertGreater(eng.erase_tenant_kv("alice")["prefix_device_pages"], 0)

    def test_budget_without_dir_is_refused(self):
        with self.assertRaises(kvwarden.InvalidArgumentError):
            kvwarden.Engine(kvwarden.BUILTIN_STORIES, kv_disk_budget_bytes=1 << 20)


if __name__ == "__main__":
    unittest.main()
