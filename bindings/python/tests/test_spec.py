"""Speculative decoding from Python (kvw_engine_params v6, kvw_request_params
v7, kvw_stats v3): greedy output identical with and without n-gram
speculation, set on the Engine, per request, or through Llama's
llama-cpp-python-style draft_model=LlamaPromptLookupDecoding(...); drafts
were verified (stats); a draft model (spec_type="draft") gives the same
output; bad values raise naming the field; Python draft-model objects
other than prompt lookup raise NotImplementedError. Runs on the built-in stories260K model.
"""
import unittest

import kvwarden

PROMPTS = [
    "Lily and Tom went to the park. Lily and Tom went to the park. Lily and",
    "The cat sat on the mat. The dog sat on the log. The cat sat on",
    "Once upon a time",
    "zq xv kj pw",
]
N = 96


def engine(**kw):
    return kvwarden.Engine(kvwarden.BUILTIN_STORIES, kv_memory_bytes=8 << 20, zero_on_release=True, **kw)


def spec_counts(e):
    s = e.stats()
    return s["spec_steps"], s["spec_drafted"], s["spec_accepted"]


class TestSpeculative(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with engine() as e:
            cls.want = [e.generate(p, max_tokens=N) for p in PROMPTS]
            assert spec_counts(e) == (0, 0, 0), "off by default"

    def test_engine_setting_greedy_identical(self):
        with engine(spec_type="ngram", spec_draft_max=6) as e:
            for p, want in zip(PROMPTS, self.want):
                self.assertEqual(e.generate(p, max_tokens=N), want, p)
            steps, drafted, accepted = spec_counts(e)
            self.assertGreater(accepted, 0)
            self.assertLess(accepted, drafted, "some drafts rejected too")
            self.assertLessEqual(drafted, 6 * steps)
            # "none" turns it off for one request.
            self.assertEqual(e.generate(PROMPTS[0], max_tokens=N, spec_type="none"), self.want[0])
            self.assertEqual(spec_counts(e)[0], steps)

    def test_request_setting_greedy_identical(self):
        with engine() as e:
            for p, want in zip(PROMPTS, self.want):
                got = e.generate(p, max_tokens=N, spec_type="ngram", spec_draft_max=4,
                                 spec_ngram_min=1, spec_ngram_max=3)
                self.assertEqual(got, want, p)
            steps, drafted, accepted = spec_counts(e)
            self.assertGreater(accepted, 0)
            self.assertLessEqual(drafted, 4 * steps)

    def test_draft_model_greedy_identical(self):
        # The built-in model drafting for itself.
        with engine(spec_type="draft", spec_draft_model=kvwarden.BUILTIN_STORIES, spec_draft_max=4) as e:
            for p, want in zip(PROMPTS, self.want):
                self.assertEqual(e.generate(p, max_tokens=N), want, p)
            steps, drafted, accepted = spec_counts(e)
            self.assertGreater(accepted, 0)
            self.assertLessEqual(drafted, 4 * steps)
        llm = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=8 << 20,
                             spec_type="draft", spec_draft_model=kvwarden.BUILTIN_STORIES)
        try:
            self.assertEqual(llm(PROMPTS[0], max_tokens=N, temperature=0)["choices"][0]["text"], self.want[0])
        finally:
            llm.close()

    def test_llama_draft_model(self):
        plain = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=8 << 20)
        spec = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=8 << 20,
                              draft_model=kvwarden.LlamaPromptLookupDecoding(num_pred_tokens=10))
        try:
            for p in PROMPTS:
                a = plain(p, max_tokens=N, temperature=0)["choices"][0]["text"]
                b = spec(p, max_tokens=N, temperature=0)["choices"][0]["text"]
                self.assertEqual(a, b, p)
            self.assertGreater(spec._engine.stats()["spec_accepted"], 0)
            self.assertEqual(plain._engine.stats()["spec_steps"], 0)
        finally:
            plain.close()
            spec.close()

    def test_llama_cpp_pythons_class_is_accepted(self):
        # llama_cpp.llama_speculative.LlamaPromptLookupDecoding, by name and
        # attributes (llama-cpp-python need not be installed).
        class LlamaPromptLookupDecoding:
            def __init__(self):
                self.max_ngram_size, self.num_pred_tokens = 3, 5

        llm = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=8 << 20,
                             draft_model=LlamaPromptLookupDecoding())
        try:
            self.assertEqual(llm(PROMPTS[0], max_tokens=N, temperature=0)["choices"][0]["text"],
                             self.want[0])
            s = llm._engine.stats()
            self.assertGreater(s["spec_steps"], 0)
            self.assertLessEqual(s["spec_drafted"], 5 * s["spec_steps"])
        finally:
            llm.close()

    def test_errors(self):
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            engine(spec_type="eagle")
        self.assertIn("spec_type", str(cm.exception))
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            engine(spec_type="draft")
        self.assertIn("draft model", str(cm.exception))
        with engine() as e:
            with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                e.generate("hi", spec_type="ngram", spec_draft_max=65)
            self.assertIn("draft max 65", str(cm.exception))
            with self.assertRaises(ValueError):
                e.generate("hi", spec_type="ngram", spec_ngram_max=1 << 40)
        with self.assertRaises(NotImplementedError) as cm:
            kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, draft_model=object())
        self.assertIn("draft_model", str(cm.exception))
        for bad in ({"num_pred_tokens": 0}, {"max_ngram_size": 17}, {"num_pred_tokens": 2.5}):
            with self.assertRaises(ValueError, msg=bad):
                kvwarden.LlamaPromptLookupDecoding(**bad)


if __name__ == "__main__":
    unittest.main()
