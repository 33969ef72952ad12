"""unittest suite of kvwarden.Llama, the llama-cpp-python-style API.

It runs on the built-in stories260K model (compiled into the library), so it
needs no model files. Greedy (temperature 0) stories260K continues
"Once upon a time" with ", there was a little girl named Lily. She loved to
play outside in the park." (llama2.c's reference output).
"""
import os
import re
import subprocess
import sys
import threading
import unittest

import kvwarden
from kvwarden import llama as llama_mod

PROMPT = "Once upon a time"
GREEDY = ", there was a little girl named Lily. She loved to play outside in the park."


class TestLlama(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=16 << 20,
                                 n_gpu_layers=0)  # CPU: the expected text is run.c's

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def check_meta(self, d, obj, prefix):
        self.assertEqual(d["object"], obj)
        self.assertTrue(d["id"].startswith(prefix), d["id"])
        self.assertIsInstance(d["created"], int)
        self.assertEqual(d["model"], kvwarden.BUILTIN_STORIES)

    def test_create_completion_shape_and_text(self):
        out = self.llm.create_completion(PROMPT, max_tokens=12, temperature=0)
        self.check_meta(out, "text_completion", "cmpl-")
        self.assertEqual(len(out["choices"]), 1)
        ch = out["choices"][0]
        self.assertEqual(ch["index"], 0)
        self.assertIsNone(ch["logprobs"])
        self.assertEqual(ch["text"], ", there was a little girl named Lily. She")
        self.assertEqual(ch["finish_reason"], "length")
        n_prompt = len(self.llm.tokenize(PROMPT.encode()))
        self.assertEqual(out["usage"], {"prompt_tokens": n_prompt, "completion_tokens": 12,
                                        "total_tokens": n_prompt + 12})
        # __call__ is create_completion; model overrides the reported name.
        again = self.llm(PROMPT, max_tokens=12, temperature=0, model="stories")
        self.assertEqual(again["choices"][0]["text"], ch["text"])
        self.assertEqual(again["model"], "stories")
        self.assertNotEqual(again["id"], out["id"])

    def test_stop_echo_and_unbounded_max_tokens(self):
        out = self.llm(PROMPT, max_tokens=64, temperature=0, stop=["."])
        self.assertEqual(out["choices"][0]["text"], ", there was a little girl named Lily")
        self.assertEqual(out["choices"][0]["finish_reason"], "stop")
        out = self.llm(PROMPT, max_tokens=3, temperature=0, echo=True, stop=".")
        self.assertEqual(out["choices"][0]["text"], PROMPT + ", there was")
        # max_tokens None or <= 0 runs up to the context (or a stop).
        for mt in (None, 0, -1):
            out = self.llm(PROMPT, max_tokens=mt, temperature=0, stop=["park"])
            self.assertEqual(out["choices"][0]["text"], GREEDY[: GREEDY.index("park")])

    def test_stream_chunks(self):
        chunks = list(self.llm.create_completion(PROMPT, max_tokens=20, temperature=0, stream=True))
        # One chunk per token (the story model's tokens are whole
        # characters), then the one with the finish reason.
        self.assertEqual(len(chunks), 20 + 1)
        self.assertTrue(all(c["choices"][0]["text"] for c in chunks[:-1]))
        ids = {c["id"] for c in chunks}
        self.assertEqual(len(ids), 1)
        for c in chunks:
            self.check_meta(c, "text_completion", "cmpl-")
            self.assertEqual(len(c["choices"]), 1)
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]))
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 20)
        text = "".join(c["choices"][0]["text"] for c in chunks)
        whole = self.llm(PROMPT, max_tokens=20, temperature=0)["choices"][0]["text"]
        self.assertEqual(text, whole)

    def test_stream_closed_early_aborts(self):
        before = self.llm.engine.stats()["aborted"]
        it = self.llm(PROMPT, max_tokens=400, temperature=0, stream=True)
        next(it)
        it.close()
        # The abort lands at the engine's next step boundary.
        for _ in range(1000):
            if self.llm.engine.stats()["aborted"] >= before + 1:
                break
            threading.Event().wait(0.01)
        self.assertEqual(self.llm.engine.stats()["aborted"], before + 1)
        self.assertEqual(self.llm.engine.stats()["running"], 0)

    def test_chat_completion(self):
        msgs = [{"role": "system", "content": "You tell stories."},
                {"role": "user", "content": [{"type": "text", "text": "Tell me one."}]}]
        out = self.llm.create_chat_completion(messages=msgs, max_tokens=16, temperature=0)
        self.check_meta(out, "chat.completion", "chatcmpl-")
        ch = out["choices"][0]
        self.assertEqual(ch["message"]["role"], "assistant")
        self.assertIn(ch["finish_reason"], ("stop", "length"))
        # stories260K has no chat template of its own: the engine renders
        # ChatML (its vocabulary has no ChatML tokens, so they stay text).
        prompt = self.llm.engine.apply_chat_template(msgs)
        self.assertEqual(prompt, "<|im_start|>system\nYou tell stories.<|im_end|>\n"
                                 "<|im_start|>user\nTell me one.<|im_end|>\n<|im_start|>assistant\n")
        self.assertEqual(out["usage"]["prompt_tokens"], len(self.llm.tokenize(prompt)))
        # The reply is the greedy continuation of the rendered prompt.
        raw = self.llm(prompt, max_tokens=16, temperature=0)
        self.assertEqual(ch["message"]["content"], raw["choices"][0]["text"].lstrip(" "))

        chunks = list(self.llm.create_chat_completion(messages=msgs, max_tokens=16, temperature=0,
                                                      stream=True))
        for c in chunks:
            self.check_meta(c, "chat.completion.chunk", "chatcmpl-")
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant"})
        self.assertEqual(chunks[-1]["choices"][0]["delta"], {})
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], ch["finish_reason"])
        content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        self.assertEqual(content, ch["message"]["content"])

    def test_seeded_sampling(self):
        a = kvwarden.Llama(kvwarden.BUILTIN_STORIES, seed=7, verbose=False, kv_memory_bytes=4 << 20)
        b = kvwarden.Llama(kvwarden.BUILTIN_STORIES, seed=7, verbose=False, kv_memory_bytes=4 << 20)
        try:
            ta = [a(PROMPT, max_tokens=24)["choices"][0]["text"] for _ in range(3)]
            tb = [b(PROMPT, max_tokens=24)["choices"][0]["text"] for _ in range(3)]
            self.assertEqual(ta, tb)
            # A per-call seed is fixed whatever the instance's state.
            self.assertEqual(a(PROMPT, max_tokens=24, seed=99)["choices"],
                             b(PROMPT, max_tokens=24, seed=99)["choices"])
        finally:
            a.close()
            b.close()

    def test_model_facts(self):
        self.assertEqual(self.llm.n_vocab(), 512)
        self.assertEqual(self.llm.n_ctx(), 512)
        self.assertEqual(self.llm.token_bos(), 1)
        self.assertEqual(self.llm.token_eos(), 2)
        ids = self.llm.tokenize(b"Once upon a time")
        self.assertEqual(self.llm.detokenize(ids[1:]), b"Once upon a time")

    def test_unsupported_and_bad_parameters(self):
        for kw in ({"suffix": "x"}, {"typical_p": 0.5}, {"mirostat_mode": 2}):
            with self.assertRaises(NotImplementedError, msg=kw) as cm:
                self.llm(PROMPT, **kw)
            self.assertIn(next(iter(kw)), str(cm.exception))
        for kw in ({"tools": [{"type": "function"}]}, {"functions": [{}]}):
            with self.assertRaises(NotImplementedError, msg=kw):
                self.llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], **kw)
        with self.assertRaises(TypeError):
            self.llm(PROMPT, no_such_option=1)
        # Out-of-range integers are ValueErrors, not wrapped by ctypes.
        for kw in ({"max_tokens": 1 << 40}, {"top_k": 1 << 31}, {"seed": -5}, {"seed": 1 << 64}):
            with self.assertRaises(ValueError, msg=kw):
                self.llm(PROMPT, **kw)
        with self.assertRaises(ValueError):
            self.llm(PROMPT, temperature=-1.0)  # the library's own check
        with self.assertRaises(ValueError):
            self.llm.create_chat_completion(messages=[])
        with self.assertRaises(ValueError):
            self.llm.create_chat_completion(messages=[{"role": "wizard", "content": "x"}])
        with self.assertRaises(ValueError):
            kvwarden.Engine(None, max_context=1 << 40)
        with self.assertRaises(ValueError):
            kvwarden.Llama(kvwarden.BUILTIN_STORIES, n_ctx=-1, verbose=False)
        with self.assertRaises(NotImplementedError):
            kvwarden.Llama(kvwarden.BUILTIN_STORIES, chat_format="functionary", verbose=False)

    def test_missing_model_is_file_not_found(self):
        for make in (lambda: kvwarden.Llama("/nonexistent/model.gguf", verbose=False),
                     lambda: kvwarden.Engine("/nonexistent/model.gguf"),
                     lambda: kvwarden.Engine(kvwarden.BUILTIN_STORIES, tokenizer_path="/nonexistent/tok.bin")):
            with self.assertRaises(FileNotFoundError) as cm:
                make()
            self.assertIn("/nonexistent/", str(cm.exception))
            self.assertIsInstance(cm.exception, kvwarden.ModelLoadError)

    def test_messages_name_no_private_helpers(self):
        # Errors say what the caller passed, not how the binding works inside.
        cases = [lambda: self.llm(PROMPT, max_tokens=1 << 40), lambda: self.llm(PROMPT, temperature=-1.0),
                 lambda: self.llm(""), lambda: self.llm.engine.detokenize([10 ** 6]),
                 lambda: kvwarden.Engine(None, kv_pages=2, page_size=16, max_context=4096),
                 lambda: self.llm(b"bytes")]
        for call in cases:
            with self.assertRaises(Exception) as cm:
                call()
            msg = str(cm.exception)
            self.assertIsNone(re.search(r"\b_[a-z]|kvw_|ctypes|c_int", msg), msg)


class TestExample(unittest.TestCase):
    def test_llama_example_runs(self):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        r = subprocess.run([sys.executable, os.path.join(here, "example_llama.py")],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": here})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("there was a little girl named Lily", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("ok"), r.stdout)


if __name__ == "__main__":
    unittest.main()
