"""Constrained output from Python: LlamaGrammar (from_string,
from_json_schema), grammar= on Llama's completion calls, response_format=
on chat (json_object, json_object with a schema, json_schema), and
Engine.stream(grammar=..., json_schema=...). Runs on the built-in
stories260K model, sampled (temperature > 0)."""
import json
import re
import unittest

import kvwarden
from kvwarden import LlamaGrammar

try:  # the reference validator, when installed; the checks below do not need it
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

PROMPT = "Once upon a time"
SCHEMA = {
    "type": "object",
    "properties": {
        "hero": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 1, "maximum": 99},
        "mood": {"enum": ["happy", "sad"]},
        "friends": {"type": "array", "items": {"$ref": "#/$defs/friend"}, "maxItems": 2},
    },
    "required": ["hero", "age", "mood", "friends"],
    "additionalProperties": False,
    "$defs": {"friend": {"type": "object", "properties": {"name": {"enum": ["Tom", "Sue"]}},
                         "required": ["name"], "additionalProperties": False}},
}


def check_person(test, text):
    obj = json.loads(text)
    test.assertEqual(set(obj), {"hero", "age", "mood", "friends"}, text)
    test.assertIsInstance(obj["hero"], str)
    test.assertLessEqual(len(obj["hero"]), 12)
    test.assertIsInstance(obj["age"], int)
    test.assertTrue(1 <= obj["age"] <= 99, text)
    test.assertIn(obj["mood"], ("happy", "sad"))
    test.assertLessEqual(len(obj["friends"]), 2)
    for f in obj["friends"]:
        test.assertEqual(set(f), {"name"})
        test.assertIn(f["name"], ("Tom", "Sue"))
    if jsonschema is not None:
        jsonschema.validate(obj, SCHEMA)


class TestGrammar(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, kv_memory_bytes=16 << 20)

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def test_from_string_on_completion_and_call(self):
        g = LlamaGrammar.from_string('root ::= ("yes" | "no") ", " [a-z]{2,5}')
        for seed in (1, 2, 3):
            out = self.llm.create_completion(PROMPT, max_tokens=50, temperature=0.8, seed=seed, grammar=g)
            self.assertRegex(out["choices"][0]["text"], r"^(yes|no), [a-z]{2,5}$")
            self.assertEqual(out["choices"][0]["finish_reason"], "stop")
        out = self.llm(PROMPT, max_tokens=50, temperature=0.8, seed=4, grammar=g)
        self.assertRegex(out["choices"][0]["text"], r"^(yes|no), [a-z]{2,5}$")
        chunks = list(self.llm(PROMPT, max_tokens=50, temperature=0.8, seed=5, grammar=g, stream=True))
        text = "".join(c["choices"][0]["text"] for c in chunks)
        self.assertRegex(text, r"^(yes|no), [a-z]{2,5}$")
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")

    def test_from_json_schema(self):
        for schema in (SCHEMA, json.dumps(SCHEMA)):  # a dict, or JSON text as llama-cpp-python takes
            g = LlamaGrammar.from_json_schema(schema)
            for seed in (1, 2):
                out = self.llm.create_completion(PROMPT, max_tokens=300, temperature=0.8, seed=seed, grammar=g)
                self.assertEqual(out["choices"][0]["finish_reason"], "stop")
                check_person(self, out["choices"][0]["text"])

    def test_response_format(self):
        msgs = [{"role": "user", "content": "Tell me about a hero."}]
        for rf in ({"type": "json_object", "schema": SCHEMA},
                   {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": SCHEMA}}):
            for seed in (1, 2):
                out = self.llm.create_chat_completion(msgs, max_tokens=300, temperature=0.8, seed=seed,
                                                      response_format=rf)
                self.assertEqual(out["choices"][0]["finish_reason"], "stop", rf)
                check_person(self, out["choices"][0]["message"]["content"])
        out = self.llm.create_chat_completion(msgs, max_tokens=200, temperature=0.8, seed=3,
                                              response_format={"type": "json_object"})
        content = out["choices"][0]["message"]["content"]
        self.assertTrue(content.startswith("{"), content)
        if out["choices"][0]["finish_reason"] == "stop":  # any object may also run to max_tokens
            self.assertIsInstance(json.loads(content), dict)
        # Streamed.
        chunks = list(self.llm.create_chat_completion(
            msgs, max_tokens=300, temperature=0.8, seed=4, stream=True,
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}))
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")
        check_person(self, text)
        # A grammar on chat.
        out = self.llm.create_chat_completion(msgs, max_tokens=50, temperature=0.8, seed=5,
                                              grammar=LlamaGrammar.from_string('root ::= "ok" [!.]'))
        self.assertRegex(out["choices"][0]["message"]["content"], r"^ok[!.]$")

    def test_engine_stream(self):
        eng = self.llm._engine
        with eng.stream(PROMPT, max_tokens=40, temperature=0.8, seed=9,
                        grammar='root ::= [0-9]{3} "-" [0-9]{2}') as s:
            text = "".join(s)
        self.assertRegex(text, r"^[0-9]{3}-[0-9]{2}$")
        self.assertEqual(s.result["finish_reason"], "stop")
        with eng.stream(PROMPT, max_tokens=40, temperature=0.8, seed=9,
                        json_schema='{"enum": ["left", "right"]}') as s:
            # JSON may end with whitespace (the schema grammar allows it, as llama.cpp's).
            self.assertIn("".join(s).rstrip(), ('"left"', '"right"'))

    def test_errors_name_the_problem(self):
        cases = [
            (LlamaGrammar.from_string('root ::= "a" missing'), "line 1, column 14"),
            (LlamaGrammar.from_string('root ::= [a-'), "grammar"),
            (LlamaGrammar.from_json_schema({"type": "number", "multipleOf": 2}), "multipleOf"),
            (LlamaGrammar.from_json_schema('{"type": '), "not JSON"),
        ]
        for g, want in cases:
            with self.assertRaises(kvwarden.InvalidArgumentError, msg=repr(g)) as cm:
                self.llm(PROMPT, grammar=g, max_tokens=4)
            self.assertIsInstance(cm.exception, ValueError)
            self.assertIn(want, str(cm.exception))
        msgs = [{"role": "user", "content": "hi"}]
        with self.assertRaises(ValueError):
            self.llm.create_chat_completion(msgs, response_format={"type": "yaml"})
        with self.assertRaises(ValueError):
            self.llm.create_chat_completion(msgs, response_format={"type": "json_schema"})
        with self.assertRaises(ValueError):
            self.llm.create_chat_completion(msgs, response_format={"type": "json_object"},
                                            grammar=LlamaGrammar.from_string('root ::= "a"'))
        with self.assertRaises(TypeError):
            self.llm(PROMPT, grammar='root ::= "a"')  # a LlamaGrammar, as llama-cpp-python
        with self.assertRaises(ValueError):
            LlamaGrammar.from_string("  ")
        self.assertTrue(re.search("gbnf", repr(LlamaGrammar.from_string('root ::= "a"'))))


if __name__ == "__main__":
    unittest.main()
