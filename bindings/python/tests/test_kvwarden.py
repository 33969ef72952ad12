"""unittest suite of the kvwarden Python bindings.

Needs KVWARDEN_LIB (or a bundled library). Model tests read stories260K from
$KVWARDEN_TEST_MODELS (default ../shared/models beside the repository); they
skip when it is absent, and fail when CI is set.
"""
import ctypes
import gc
import json
import multiprocessing
import os
import signal
import struct
import tempfile
import threading
import unittest

import kvwarden
from kvwarden import _lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS = os.environ.get("KVWARDEN_TEST_MODELS") or os.path.join(ROOT, "..", "shared", "models")
MODEL = os.path.join(MODELS, "stories260K.bin")
TOKENIZER = os.path.join(MODELS, "tok512.bin")
GOLDEN = os.path.join(MODELS, "..", "golden", "stories260K_greedy.json")


def need_model(tc):
    for p in (MODEL, TOKENIZER, GOLDEN):
        if not os.path.exists(p):
            if os.environ.get("CI"):
                tc.fail(f"{p} not found and CI is set (set KVWARDEN_TEST_MODELS)")
            tc.skipTest(f"{p} not found; set KVWARDEN_TEST_MODELS to run this test")


class TestABI(unittest.TestCase):
    def test_struct_sizes_match_library(self):
        self.assertEqual(lib_default("kvw_engine_default_params").struct_size,
                         ctypes.sizeof(_lib.kvw_engine_params))
        self.assertEqual(lib_default("kvw_request_default_params").struct_size,
                         ctypes.sizeof(_lib.kvw_request_params))
        self.assertEqual(lib_default("kvw_embed_default_params").struct_size,
                         ctypes.sizeof(_lib.kvw_embed_params))
        self.assertEqual(ctypes.sizeof(_lib.kvw_embed_params), 32)
        for cls, init in ((_lib.kvw_result, "kvw_result_init"), (_lib.kvw_stats, "kvw_stats_init")):
            buf = (ctypes.c_uint8 * 4096)()
            getattr(_lib.lib, init)(ctypes.cast(buf, ctypes.POINTER(cls)))
            self.assertEqual(ctypes.c_uint32.from_buffer(buf).value, ctypes.sizeof(cls), cls.__name__)
        self.assertEqual(ctypes.sizeof(_lib.kvw_error_info), 40)

    def test_sized_init_writes_only_the_given_size(self):
        # A binding built for an older, smaller struct passes its own size:
        # the library must not write a byte past it.
        for cls, fill in _lib.SIZED_INIT.items():
            full = ctypes.sizeof(cls)
            for size in (8, full - 8 if full > 8 else 8, full, full + 64):
                with self.subTest(cls=cls.__name__, size=size):
                    buf = (ctypes.c_uint8 * (full + 256))(*([0xA5] * (full + 256)))
                    self.assertEqual(fill(ctypes.cast(buf, ctypes.POINTER(cls)), size), _lib.OK)
                    # A parameter struct keeps a bigger caller's size (the
                    # library refuses it where it is used); an output
                    # struct says how much the library filled.
                    want = size if cls.__name__.endswith("_params") else min(size, full)
                    self.assertEqual(ctypes.c_uint32.from_buffer(buf).value, want)
                    self.assertEqual(bytes(buf[size:]), b"\xa5" * (full + 256 - size))
            for size in (0, 4, 12):
                with self.subTest(cls=cls.__name__, bad=size):
                    buf = (ctypes.c_uint8 * 64)(*([0xA5] * 64))
                    self.assertEqual(fill(ctypes.cast(buf, ctypes.POINTER(cls)), size), _lib.ERR_INVALID_ARGUMENT)
                    self.assertEqual(bytes(buf), b"\xa5" * 64)
                    self.assertIn(b"not a valid struct size", _lib.lib.kvw_last_error())

    def test_version(self):
        self.assertRegex(kvwarden.version(), r"^\d+\.\d+\.\d+$")


def lib_default(name):
    return getattr(_lib.lib, name)()


class TestStories260K(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.eng = None

    def setUp(self):
        need_model(self)
        if TestStories260K.eng is None:
            # CPU and f32 KV: the golden tokens are llama2.c run.c's.
            TestStories260K.eng = kvwarden.Engine(MODEL, tokenizer_path=TOKENIZER,
                                                  kv_memory_bytes=32 << 20, device="cpu",
                                                  kv_type="f32")
        with open(GOLDEN) as f:
            self.golden = json.load(f)

    @classmethod
    def tearDownClass(cls):
        if cls.eng is not None:
            cls.eng.close()

    def test_golden_greedy_tokens_and_text(self):
        for case in self.golden["cases"]:
            with self.subTest(prompt=case["prompt"]):
                self.assertEqual(self.eng.tokenize(case["prompt"]), case["prompt_token_ids"])
                n = len(case["generated_token_ids"])
                s = self.eng.stream(case["prompt"], max_tokens=n)
                text = "".join(s)
                self.assertEqual(s.prompt_tokens, case["prompt_token_ids"])
                self.assertEqual(s.tokens, case["generated_token_ids"])
                self.assertEqual(text, case["generated_text"])
                self.assertEqual(s.result["finish_reason"], "length")
                self.assertEqual(self.eng.generate(case["prompt"], max_tokens=n), case["generated_text"])
                self.assertEqual(self.eng.detokenize(case["prompt_token_ids"] + case["generated_token_ids"]),
                                 case["prompt"] + case["generated_text"])

    def test_stop_string(self):
        text = self.eng.generate("Once upon a time", max_tokens=64, stop=["."])
        self.assertEqual(text, ", there was a little girl named Lily")

    def test_seeded_sampling_is_reproducible(self):
        a = self.eng.generate("The cat", max_tokens=40, temperature=1.0, top_p=0.9, seed=7)
        b = self.eng.generate("The cat", max_tokens=40, temperature=1.0, top_p=0.9, seed=7)
        self.assertEqual(a, b)

    def test_threads_greedy_outputs_are_isolated(self):
        cases = self.golden["cases"]
        errors = []

        def work(i):
            try:
                for j in range(4):
                    c = cases[(i + j) % len(cases)]
                    n = len(c["generated_token_ids"])
                    if (i + j) % 2:
                        out = self.eng.generate(c["prompt"], max_tokens=n, tenant=f"t{i % 3}")
                    else:
                        out = "".join(self.eng.stream(c["prompt"], max_tokens=n, tenant=f"t{i % 3}"))
                    if out != c["generated_text"]:
                        errors.append((c["prompt"], out))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(self.eng.stats()["isolation_failures"], 0)

    def test_abort(self):
        s = self.eng.stream("Once upon a time", max_tokens=400)
        next(s)
        s.abort()
        with self.assertRaises(kvwarden.AbortedError):
            for _ in s:
                pass
        self.assertEqual(s.result["finish_reason"], "abort")

    def test_early_close_aborts(self):
        before = self.eng.stats()["aborted"]
        s = self.eng.stream("Once upon a time", max_tokens=400)
        self.assertTrue(next(s))
        s.close()
        self.assertEqual(list(s), [])
        with self.eng.stream("The cat", max_tokens=400) as s2:
            next(s2)
        for _ in range(100):
            if self.eng.stats()["aborted"] >= before + 2:
                break
            threading.Event().wait(0.01)
        self.assertGreaterEqual(self.eng.stats()["aborted"], before + 2)
        self.assertEqual(self.eng.stats()["running"], 0)

    def test_rejected_too_long(self):
        limit = self.eng.max_context
        with self.assertRaises(kvwarden.RejectedError) as cm:
            self.eng.generate("a " * (limit + 5))
        e = cm.exception
        self.assertEqual(e.reason, "too_long")
        self.assertEqual(e.limit, limit)
        self.assertGreater(e.requested, limit)
        self.assertIn(str(limit), str(e))
        with self.assertRaises(kvwarden.RejectedError):
            self.eng.stream("a " * (limit + 5))


class TestBuiltin(unittest.TestCase):
    """Bad input, close and use after close, on the built-in model."""

    def setUp(self):
        self.eng = kvwarden.Engine(None, kv_memory_bytes=8 << 20)

    def tearDown(self):
        self.eng.close()

    def test_bad_input(self):
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            self.eng.generate("")
        self.assertEqual(cm.exception.reason, "empty_prompt")
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            self.eng.generate("bad \udcff utf-8")  # a surrogate-escaped 0xff byte
        self.assertIn("UTF-8", str(cm.exception))
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.generate("hi", temperature=-1.0)
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.generate("hi", max_tokens=-2)  # -1 means "until the end" (test_llama_compat)
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.generate("hi", stop=["x"] * 100)
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.generate("nul\x00inside")
        with self.assertRaises(TypeError):
            self.eng.generate(b"bytes")
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.detokenize([10**6])
        with self.assertRaises(TypeError):
            kvwarden.Engine(None, no_such_param=1)
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            kvwarden.Engine(None, kv_type="q8")
        self.assertIn("KV type", str(cm.exception))
        with kvwarden.Engine(None, kv_memory_bytes=4 << 20, kv_type="f32") as e32:
            self.assertIsInstance(e32.generate("hi", max_tokens=3), str)
        for kt in ("q8_0", "q4_0"):
            with kvwarden.Engine(None, kv_memory_bytes=4 << 20, kv_type=kt, device="cpu") as eq:
                self.assertIsInstance(eq.generate("hi", max_tokens=3), str)
        with self.assertRaises(kvwarden.ModelLoadError):
            kvwarden.Engine("/nonexistent/model.gguf")
        # A readable GGUF of an architecture kvwarden does not run.
        key, val = b"general.architecture", b"mamba"
        gguf = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                + struct.pack("<IQ", 8, len(val)) + val)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mamba.gguf")
            with open(path, "wb") as f:
                f.write(gguf)
            with self.assertRaises(kvwarden.UnsupportedModelError) as cm:
                kvwarden.Engine(path)
            self.assertIn('"mamba"', str(cm.exception))
            self.assertIn("llama", str(cm.exception))
            self.assertEqual(cm.exception.status, -11)
        with self.assertRaises(kvwarden.InvalidArgumentError):
            kvwarden.Engine(None, kv_pages=2, page_size=16, max_context=4096)
        # the engine still works after all that
        self.assertIsInstance(self.eng.generate("hi", max_tokens=4), str)

    def test_apply_chat_template(self):
        msgs = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
        # The built-in model has no template of its own: ChatML.
        self.assertEqual(self.eng.apply_chat_template(msgs),
                         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\n")
        self.assertNotIn("assistant", self.eng.apply_chat_template(msgs, add_generation_prompt=False))
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            self.eng.apply_chat_template(msgs, template_name="tool_use")
        self.assertIn("tool_use", str(cm.exception))
        text = self.eng.apply_chat_template(msgs)
        self.assertIsInstance(self.eng.generate(text, max_tokens=2, parse_special=True), str)

    def test_chat_template_override_raises(self):
        tmpl = ("{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
                "{% endif %}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}")
        with kvwarden.Engine(None, kv_memory_bytes=4 << 20, chat_template=tmpl) as eng:
            with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                eng.apply_chat_template([{"role": "system", "content": "x"}])
            self.assertIn("System role not supported", str(cm.exception))
            self.assertEqual(eng.apply_chat_template([{"role": "user", "content": "y"}]), "[user]y")
        with self.assertRaises(kvwarden.InvalidArgumentError):
            kvwarden.Engine(None, chat_template="{% for %}")

    def test_hostile_chat_template_raises(self):
        # 34 nested tojson and an 8 MiB string concatenated 400 times: each
        # used to abort the interpreter with a Go "fatal error: out of
        # memory". Now the render raises and the engine keeps working.
        tmpl = ("{% set s = 'ab' %}" + "{% set s = s ~ s %}" * 22 +
                "{% if messages[0].content == 'json' %}{{ messages" + "|tojson" * 34 + " }}"
                "{% elif messages[0].content == 'concat' %}{{ s" + " ~ s" * 400 + " }}"
                "{% else %}ok{% endif %}")
        with kvwarden.Engine(None, kv_memory_bytes=4 << 20, chat_template=tmpl) as eng:
            for attack in ("json", "concat"):
                with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                    eng.apply_chat_template([{"role": "user", "content": attack}])
                self.assertIn("memory budget", str(cm.exception))
                self.assertEqual(eng.apply_chat_template([{"role": "user", "content": "hi"}]), "ok")

    def test_tokenize_roundtrip(self):
        ids = self.eng.tokenize("hello, wörld ✓")
        self.assertEqual(self.eng.detokenize(ids), "hello, wörld ✓")
        self.assertEqual(self.eng.tokenize("x", add_bos=False)[0] != self.eng.vocab["bos"], True)

    def test_close_with_open_stream_and_use_after_close(self):
        # Close while a reader waits: max_seqs 1 keeps the read request
        # queued behind a long one. The reader gets ClosedError (or
        # AbortedError), never NotFoundError.
        self.eng.close()
        self.eng = kvwarden.Engine(None, kv_memory_bytes=16 << 20, max_seqs=1)
        long = self.eng.stream("long", max_tokens=2000)
        s = self.eng.stream("hello", max_tokens=2000)
        errs, started = [], threading.Event()

        def reader():
            started.set()
            try:
                for _ in s:
                    pass
            except kvwarden.KvwardenError as e:
                errs.append(e)

        t = threading.Thread(target=reader)
        t.start()
        started.wait()
        threading.Event().wait(0.02)  # let it block (checked either way)
        self.eng.close()
        t.join(10)
        self.assertFalse(t.is_alive())
        if errs or s.result is None or s.result["finish_reason"] != "length":
            self.assertEqual(len(errs), 1)
            self.assertIsInstance(errs[0], (kvwarden.ClosedError, kvwarden.AbortedError))
        long.close()
        self.eng.close()  # idempotent
        for call in (lambda: self.eng.generate("hi"), lambda: self.eng.stream("hi"),
                     lambda: self.eng.tokenize("hi"), lambda: self.eng.detokenize([1]),
                     self.eng.stats, lambda: self.eng.max_context):
            with self.assertRaises(kvwarden.ClosedError):
                call()
        s.close()  # closing a stream of a closed engine is harmless
        del s
        gc.collect()

    def test_log_callback_and_stats(self):
        msgs = []
        with kvwarden.Engine(None, kv_memory_bytes=4 << 20, log=lambda lvl, m: msgs.append((lvl, m)),
                             log_level=_lib.LOG_DEBUG) as e:
            # delivered: opening on device auto logs the backend it chose
            self.assertTrue(any(lvl == _lib.LOG_INFO and "device auto" in m for lvl, m in msgs), msgs)
            e.generate("hi", max_tokens=3)
            st = e.stats()
        self.assertGreaterEqual(st["finished"], 1)
        self.assertGreater(st["pool_pages"], 0)
        n = len(msgs)
        gc.collect()
        self.assertEqual(len(msgs), n)  # nothing after close

    def test_disk_tier_stats(self):
        # kvw_stats v2: the disk tier's counters. A prompt written to disk by
        # one engine's close is read back by the next one with the same key.
        with tempfile.TemporaryDirectory() as d:
            key = os.path.join(d, "kv.key")
            with open(key, "wb") as f:
                f.write(bytes(range(1, 33)))
            kw = dict(kv_memory_bytes=8 << 20, page_size=4, host_tier_bytes=1 << 20, kv_key_file=key,
                      kv_disk_dir=os.path.join(d, "kv"), kv_disk_budget_bytes=16 << 20)
            prompt = "Once upon a time there was a little girl who lived in a village near the forest."
            with kvwarden.Engine(None, **kw) as e:
                first = e.generate(prompt, max_tokens=4, tenant="alice")
                self.assertEqual(e.stats()["disk_hits"], 0)
            with kvwarden.Engine(None, **kw) as e:
                self.assertEqual(e.generate(prompt, max_tokens=4, tenant="alice"), first)
                st = e.stats()
                er = e.erase_tenant_kv("alice")
                self.assertGreater(er["disk_files"], 0)
                self.assertGreater(er["disk_bytes"], 0)
                self.assertEqual(e.stats()["disk_erased"], er["disk_files"])
        self.assertGreater(st["disk_hits"], 0)
        self.assertGreater(st["disk_files"], 0)
        self.assertEqual(st["disk_budget_bytes"], 16 << 20)
        self.assertLessEqual(st["disk_used_bytes"], st["disk_budget_bytes"])
        self.assertEqual(st["disk_seal_failures"], 0)
        self.assertEqual(st["host_seal_failures"], 0)


    def test_seed_zero_is_fixed(self):
        kw = dict(max_tokens=16, temperature=1.5)
        self.assertEqual(self.eng.generate("seeded", seed=0, **kw), self.eng.generate("seeded", seed=0, **kw))
        self.assertEqual(self.eng.generate("seeded", seed=2**64 - 2, **kw),
                         self.eng.generate("seeded", seed=2**64 - 2, **kw))
        for bad in (-1, 2**64 - 1):
            with self.assertRaises(kvwarden.InvalidArgumentError):
                self.eng.generate("x", seed=bad)
        with self.assertRaises(TypeError):
            self.eng.generate("x", seed=1.5)
        self.assertIsInstance(self.eng.generate("x", seed=None, **kw), str)

    def test_n_threads(self):
        with kvwarden.Engine(None, kv_memory_bytes=4 << 20, n_threads=1) as e:
            self.assertIsInstance(e.generate("hi", max_tokens=2), str)
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            kvwarden.Engine(None, n_threads=-1)
        self.assertIn("n_threads", str(cm.exception))
        with self.assertRaises(TypeError):
            kvwarden.Engine(None, reserved0=1)

    def test_ctrl_c_during_generate_aborts_and_raises(self):
        # SIGINT arrives while generate() waits for its first piece of text
        # (sent from inside the library call wrapper, so deterministic).
        # It must reach the caller as KeyboardInterrupt, with the request
        # aborted and freed.
        # The engine keeps decoding on its own threads until the abort
        # lands, so on a loaded machine the request can reach its length
        # limit first; what the binding must do either way is abort and
        # free that request, which the wrappers below record.
        real_next = _lib.lib.kvw_next
        real_abort = _lib.lib.kvw_abort
        real_free = _lib.lib.kvw_request_free
        sent = []
        aborted_ids, freed_ids = [], []

        def record_abort(h, rid):
            aborted_ids.append(rid)
            return real_abort(h, rid)

        def record_free(h, rid):
            freed_ids.append(rid)
            return real_free(h, rid)

        def check_ended(before, st):
            self.assertEqual(st["running"] + st["waiting"], 0)
            self.assertEqual(st["finished"], before["finished"] + 1)
            n_aborted = st["aborted"] - before["aborted"]
            self.assertIn(n_aborted, (0, 1))
            if n_aborted == 0:
                # Ended by itself before the abort landed: only possible if
                # it decoded to its limit (EOS, context or max_tokens).
                self.assertGreater(st["generated_tokens"] - before["generated_tokens"], 0)
            self.assertEqual(len(aborted_ids), 1, "the interrupted request is aborted once")
            self.assertIn(aborted_ids[0], freed_ids, "and freed")

        def next_then_interrupt(*args):
            st = real_next(*args)
            if not sent:
                sent.append(st)
                os.kill(os.getpid(), signal.SIGINT)
            return st

        before = self.eng.stats()
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        _lib.lib.kvw_next = next_then_interrupt
        _lib.lib.kvw_abort, _lib.lib.kvw_request_free = record_abort, record_free
        try:
            with self.assertRaises(KeyboardInterrupt):
                self.eng.generate("interrupt me", max_tokens=2000)
        finally:
            _lib.lib.kvw_next = real_next
            _lib.lib.kvw_abort, _lib.lib.kvw_request_free = real_abort, real_free
            signal.signal(signal.SIGINT, old)
        self.assertEqual(len(sent), 1)
        for _ in range(6000):  # the abort lands at the next step boundary (a deadline, not a timing)
            st = self.eng.stats()
            if st["running"] == 0 and st["waiting"] == 0:
                break
            threading.Event().wait(0.01)
        check_ended(before, st)
        self.assertLess(st["generated_tokens"] - before["generated_tokens"], 2000)
        self.assertIsInstance(self.eng.generate("after", max_tokens=2), str)

        # The same for a stream that is iterated without a with block: the
        # interrupt aborts its request at once, not at garbage collection.
        sent.clear()
        aborted_ids.clear()
        freed_ids.clear()
        before = self.eng.stats()
        s = self.eng.stream("interrupt me too", max_tokens=2000)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _lib.lib.kvw_next = next_then_interrupt
        _lib.lib.kvw_abort, _lib.lib.kvw_request_free = record_abort, record_free
        try:
            with self.assertRaises(KeyboardInterrupt):
                for _ in s:
                    pass
        finally:
            _lib.lib.kvw_next = real_next
            _lib.lib.kvw_abort, _lib.lib.kvw_request_free = real_abort, real_free
            signal.signal(signal.SIGINT, old)
        self.assertEqual(list(s), [], "the stream is closed")
        for _ in range(6000):
            st = self.eng.stats()
            if st["running"] == 0 and st["waiting"] == 0:
                break
            threading.Event().wait(0.01)
        check_ended(before, st)
        del s


def _child_uses_parent_engine(eng, q):
    try:
        eng.generate("in the child", max_tokens=2)
        q.put("no error")
    except kvwarden.ForkedError as e:
        q.put("ForkedError: " + str(e))
    except BaseException as e:  # pragma: no cover - reported by the parent
        q.put(f"{type(e).__name__}: {e}")


def _child_opens_engine(q):
    try:
        kvwarden.Engine(None, kv_memory_bytes=4 << 20)
        q.put("no error")
    except kvwarden.ForkedError as e:
        q.put("ForkedError: " + str(e))
    except BaseException as e:  # pragma: no cover
        q.put(f"{type(e).__name__}: {e}")


class TestFork(unittest.TestCase):
    """multiprocessing with the fork start method (gunicorn --preload,
    Celery): the child gets ForkedError at once instead of hanging."""

    def test_fork_child_raises(self):
        ctx = multiprocessing.get_context("fork")
        with kvwarden.Engine(None, kv_memory_bytes=4 << 20) as eng:
            for target, args in ((_child_uses_parent_engine, (eng,)), (_child_opens_engine, ())):
                q = ctx.Queue()
                p = ctx.Process(target=target, args=args + (q,))
                p.start()
                p.join(30)
                if p.is_alive():
                    p.kill()
                    p.join()
                    self.fail(f"{target.__name__}: the forked child hung")
                self.assertEqual(p.exitcode, 0)
                msg = q.get(timeout=5)
                self.assertTrue(msg.startswith("ForkedError"), msg)
                self.assertIn("spawn", msg)
            # the parent is unaffected
            self.assertIsInstance(eng.generate("parent", max_tokens=2), str)


if __name__ == "__main__":
    unittest.main()
