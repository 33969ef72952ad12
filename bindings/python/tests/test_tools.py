"""Tool calls from Python, as llama-cpp-python's create_chat_completion
takes them: tools, tool_choice (named and "required" enforced with a
grammar) and parallel_tool_calls; the reply's tool_calls in OpenAI's shape;
a tool loop (call, tool result, answer); bad input raising. Runs on the
built-in stories260K model, sampled (temperature > 0)."""
import json
import unittest

import kvwarden

try:  # the reference validator, when installed; the checks below do not need it
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 10},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"],
        "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "parameters": TIME}},
]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_args(test, call):
    args = json.loads(call["function"]["arguments"])
    schema = {"get_weather": WEATHER, "get_time": TIME}[call["function"]["name"]]
    test.assertEqual(set(args), set(schema["required"]), args)
    if "city" in args:
        test.assertLessEqual(len(args["city"]), 10)
        test.assertIn(args["unit"], ("celsius", "fahrenheit"))
    else:
        test.assertIn(args["zone"], ("UTC", "CET"))
    if jsonschema is not None:
        jsonschema.validate(args, schema)


class TestTools(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, n_ctx=2048, kv_memory_bytes=32 << 20)

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def test_named_tool_choice_loop(self):
        messages = list(MESSAGES)
        out = self.llm.create_chat_completion(
            messages, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
            temperature=0.7, seed=7, max_tokens=200)
        choice = out["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls")
        calls = choice["message"]["tool_calls"]
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0]["type"], "function")
        self.assertEqual(calls[0]["function"]["name"], "get_weather")
        self.assertTrue(calls[0]["id"].startswith("call_"))
        self.assertIsNone(choice["message"]["content"])
        check_args(self, calls[0])
        # The result goes back as a tool message; the model answers.
        messages.append(choice["message"])
        messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": '{"temperature": 21}'})
        answer = self.llm.create_chat_completion(messages, tools=TOOLS, tool_choice="none",
                                                 temperature=0, max_tokens=12)
        self.assertIsInstance(answer["choices"][0]["message"]["content"], str)
        self.assertNotIn("tool_calls", answer["choices"][0]["message"])
        self.assertIn(answer["choices"][0]["finish_reason"], ("stop", "length"))

    def test_required_streamed(self):
        for seed in (1, 2):
            chunks = list(self.llm.create_chat_completion(
                MESSAGES, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                temperature=0.8, seed=seed, max_tokens=300, stream=True))
            self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant"})
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "tool_calls")
            deltas = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
            self.assertEqual({d["index"] for d in deltas}, {0})
            # The first delta names the call; the arguments come in fragments.
            self.assertTrue(deltas[0]["id"].startswith("call_"))
            self.assertEqual(deltas[0]["type"], "function")
            self.assertGreater(len(deltas), 1)
            for d in deltas[1:]:
                self.assertEqual(set(d), {"index", "function"})
            call = {"function": {"name": deltas[0]["function"]["name"],
                                 "arguments": "".join(d["function"]["arguments"] for d in deltas)}}
            check_args(self, call)
            self.assertFalse(any(c["choices"][0]["delta"].get("content") for c in chunks))

    def test_bad_input(self):
        bad = [
            ([{"type": "function", "function": {"name": "f"}}] * 2, None, "unique"),
            (TOOLS, {"type": "function", "function": {"name": "book_flight"}}, "book_flight"),
            ([{"type": "function"}], None, "tools[0].function"),
            (TOOLS, "sometimes", "tool_choice"),
        ]
        for tools, choice, needle in bad:
            with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
                self.llm.create_chat_completion(MESSAGES, tools=tools, tool_choice=choice, max_tokens=4)
            self.assertIn(needle, str(cm.exception))
        with self.assertRaises(NotImplementedError):
            self.llm.create_chat_completion(MESSAGES, functions=[{"name": "f"}])


class TestChatParse(unittest.TestCase):
    def test_parse_hermes(self):
        parser = {"options": {"Format": {"Family": "hermes"}, "Tools": True}, "single": False}
        out = '<think>hm</think>Sure.<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
        msg = kvwarden.chat_parse(parser, out)
        self.assertEqual(msg["content"], "Sure.")
        self.assertEqual(msg["reasoning_content"], "hm")
        self.assertEqual(msg["tool_calls"][0]["function"], {"name": "f", "arguments": '{"a": 1}'})
        # A prefix read as a stream: the markup being written is held back.
        part = kvwarden.chat_parse({**parser, "partial": True}, out[:len("<think>hm</think>Sure.<tool_")])
        self.assertEqual(part["content"], "Sure.")
        self.assertNotIn("tool_calls", part)
        part = kvwarden.chat_parse({**parser, "partial": True}, out[:-len('1}}</tool_call>')])
        self.assertEqual(part["tool_calls"][0]["function"], {"name": "f", "arguments": '{"a": '})


if __name__ == "__main__":
    unittest.main()
