"""Tool calls of the Llama 3.1 and Mistral families from Python: the
model's own template (../shared/templates) renders the tools, a named
tool_choice forces the call through the grammar, and the family's parser
reads it back, streamed and not. Their markup (<|python_tag|>,
[TOOL_CALLS]) is made of control tokens in the real vocabularies, which
decode to nothing unless the request keeps them (kvw_request_params v6
keep_tokens): the Llama passes chat_prepare's keep_tokens on, and
Engine.stream spells kept control tokens out."""
import os
import unittest

import kvwarden

from .test_tools import MESSAGES, TOOLS, check_args

TEMPLATES = os.path.join(os.environ.get("KVWARDEN_TEST_MODELS", os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "..", "shared", "models")), "..", "templates")
FAMILIES = [
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|python_tag|>"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS]"),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "[TOOL_CALLS]"),
]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def template(name):
    path = os.path.join(TEMPLATES, name)
    if not os.path.exists(path):
        if os.environ.get("CI"):
            raise AssertionError(f"{path} is missing (CI requires ../shared/templates)")
        raise unittest.SkipTest(f"{path} not found (../shared/templates)")
    with open(path, encoding="utf-8") as f:
        return f.read()


class TestToolFamilies(unittest.TestCase):
    def test_named_call(self):
        for name, marker in FAMILIES:
            with self.subTest(template=name), kvwarden.Llama(
                    kvwarden.BUILTIN_STORIES, verbose=False, n_ctx=4096, kv_memory_bytes=64 << 20,
                    chat_template=template(name)) as llm:
                # The request the Llama submits carries the family's markers.
                seen = []
                stream = llm._engine.stream

                def spy(*args, **kwargs):
                    seen.append(kwargs.get("keep_tokens"))
                    return stream(*args, **kwargs)
                llm._engine.stream = spy
                for seed, streamed in ((3, False), (4, True)):
                    out = llm.create_chat_completion(MESSAGES, tools=TOOLS, tool_choice=NAMED, temperature=0.7,
                                                     seed=seed, max_tokens=300, stream=streamed)
                    if streamed:
                        chunks = list(out)
                        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "tool_calls")
                        deltas = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
                        self.assertEqual({d["index"] for d in deltas}, {0})
                        self.assertFalse(any(c["choices"][0]["delta"].get("content") for c in chunks))
                        call = {"function": {"name": deltas[0]["function"]["name"],
                                             "arguments": "".join(d["function"]["arguments"] for d in deltas)}}
                    else:
                        choice = out["choices"][0]
                        self.assertEqual(choice["finish_reason"], "tool_calls", choice)
                        self.assertIsNone(choice["message"]["content"])
                        self.assertEqual(len(choice["message"]["tool_calls"]), 1)
                        call = choice["message"]["tool_calls"][0]
                    self.assertEqual(call["function"]["name"], "get_weather")
                    check_args(self, call)
                self.assertEqual(len(seen), 2)
                for keep in seen:
                    self.assertIn(marker, keep)

    def test_logprobs_with_tools(self):
        # One record per generated token, streamed (spread over the chunks,
        # markup's held for the next one) and not.
        with kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, n_ctx=2048, kv_memory_bytes=32 << 20) as llm:
            out = llm.create_chat_completion(MESSAGES, tools=TOOLS, tool_choice=NAMED, temperature=0.7, seed=5,
                                             max_tokens=300, logprobs=True, top_logprobs=2)
            choice = out["choices"][0]
            self.assertEqual(choice["finish_reason"], "tool_calls")
            content = choice["logprobs"]["content"]
            self.assertEqual(len(content), out["usage"]["completion_tokens"])
            self.assertTrue(all(len(c["top_logprobs"]) == 2 for c in content))
            chunks = list(llm.create_chat_completion(MESSAGES, tools=TOOLS, tool_choice=NAMED, temperature=0.7,
                                                     seed=5, max_tokens=300, logprobs=True, top_logprobs=2,
                                                     stream=True))
            got = [e for c in chunks if c["choices"][0]["logprobs"] for e in c["choices"][0]["logprobs"]["content"]]
            self.assertEqual(got, content)  # same seed, same tokens
            # the records come along the stream, not all at its end
            self.assertGreater(sum(1 for c in chunks[:-1] if c["choices"][0]["logprobs"]), 1)
            plain = llm.create_chat_completion(MESSAGES, tools=TOOLS, tool_choice=NAMED, max_tokens=300)
            self.assertIsNone(plain["choices"][0]["logprobs"])

    def test_keep_tokens_spell_out_control_tokens(self):
        # The built-in vocabulary's <s> decodes to nothing; a +100 bias makes
        # the model emit it. Kept, it comes out as its text.
        with kvwarden.Engine(None, kv_memory_bytes=8 << 20) as eng:
            bos = eng.vocab["bos"]
            for keep, want in ((None, ""), (["<s>"], "<s>" * 4), (["[TOOL_CALLS]", "<s>"], "<s>" * 4)):
                with eng.stream("Once upon a time", max_tokens=4, logit_bias={bos: 100.0}, keep_tokens=keep) as s:
                    self.assertEqual("".join(s), want)
                    self.assertEqual(s.tokens, [bos] * 4)

    def test_keep_tokens_bad(self):
        with kvwarden.Engine(None, kv_memory_bytes=8 << 20) as eng:
            with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                eng.generate("x", max_tokens=1, keep_tokens=["<s>"] * 65)
            self.assertIn("n_keep_tokens", str(cm.exception))
            with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                eng.generate("x", max_tokens=1, keep_tokens=[""])
            self.assertIn("keep_tokens[0]", str(cm.exception))
            with self.assertRaises(TypeError):
                eng.generate("x", max_tokens=1, keep_tokens="<s>")


if __name__ == "__main__":
    unittest.main()

