"""OpenAI's presence/frequency penalties and logit_bias, and the prompt's
log-probabilities (echo with logprobs), through kvwarden.Llama and
kvwarden.Engine (kvw_request_params v5), on the built-in stories260K model.
"""
import unittest

import kvwarden

PROMPT = "Once upon a time"


class TestPenalties(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=8 << 20,
                                 n_gpu_layers=0)

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def greedy_tokens(self, n, **kw):
        with self.llm.engine.stream(PROMPT, max_tokens=n, **kw) as s:
            "".join(s)
        return s.tokens

    def test_logit_bias_bans_and_forces(self):
        first = self.greedy_tokens(1)[0]
        self.assertNotEqual(self.greedy_tokens(1, logit_bias={first: -100})[0], first)
        # OpenAI sends the keys as strings.
        self.assertNotEqual(self.greedy_tokens(1, logit_bias={str(first): -100})[0], first)
        out = self.llm(PROMPT, max_tokens=6, temperature=1.5, seed=3, logit_bias={100: 100})
        self.assertEqual(out["usage"]["completion_tokens"], 6)
        self.assertEqual(self.llm.input_ids[-6:], [100] * 6)  # the last completion's tokens

    def test_frequency_penalty_breaks_repetition(self):
        plain = self.greedy_tokens(40)
        pen = self.greedy_tokens(40, frequency_penalty=2.0, presence_penalty=2.0)
        self.assertNotEqual(plain, pen)
        # Repeats make no more of the output than without the penalties.
        self.assertGreaterEqual(len(set(pen)), len(set(plain)))
        chat = self.llm.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=20,
                                               temperature=0, frequency_penalty=1.5)
        self.assertEqual(chat["choices"][0]["finish_reason"] in ("stop", "length"), True)

    def test_bad_values(self):
        for kw, name in (({"presence_penalty": 2.5}, "presence_penalty"),
                         ({"frequency_penalty": -3}, "frequency_penalty"),
                         ({"logit_bias": {5: 150}}, "logit_bias"),
                         ({"logit_bias": {10 ** 6: 1}}, "logit_bias")):
            with self.assertRaises(ValueError, msg=kw) as cm:
                self.llm(PROMPT, max_tokens=2, **kw)
            self.assertIn(name, str(cm.exception))
        with self.assertRaises(TypeError):
            self.llm(PROMPT, logit_bias=[1, 2])
        with self.assertRaises(TypeError):
            self.llm(PROMPT, logit_bias={"x": 1})

    def test_echo_logprobs(self):
        out = self.llm(PROMPT, max_tokens=4, temperature=0, logprobs=2, echo=True)
        ch = out["choices"][0]
        lp = ch["logprobs"]
        n_prompt = out["usage"]["prompt_tokens"]
        self.assertEqual(len(lp["tokens"]), n_prompt + 4)
        self.assertIsNone(lp["token_logprobs"][0])
        self.assertIsNone(lp["top_logprobs"][0])
        for i in range(1, n_prompt + 4):
            self.assertLessEqual(lp["token_logprobs"][i], 0.0)
            self.assertIn(lp["tokens"][i], lp["top_logprobs"][i])
        self.assertTrue(ch["text"].startswith(PROMPT))
        self.assertEqual("".join(lp["tokens"][:n_prompt]), PROMPT)

    def test_engine_prompt_logprobs(self):
        with self.llm.engine.stream(PROMPT, max_tokens=1, prompt_logprobs=True, top_logprobs=3) as s:
            "".join(s)
        self.assertEqual(len(s.prompt_logprobs), len(s.prompt_tokens) - 1)
        for (tok, lp), want in zip(s.prompt_logprobs, s.prompt_tokens[1:]):
            self.assertEqual(tok, want)
            self.assertLessEqual(lp, 0.0)
        self.assertEqual([len(t) for t in s.prompt_top_logprobs], [3] * len(s.prompt_logprobs))


if __name__ == "__main__":
    unittest.main()
