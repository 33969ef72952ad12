# Regenerates harmony_renders.json: what transformers' apply_chat_template
# would render (jinja2 sandbox, trim_blocks, lstrip_blocks, loopcontrols,
# raise_exception, tojson(ensure_ascii=False), strftime_now pinned to
# 2026-12-02) for the gpt-oss template (openai-gpt-oss-120b.jinja, as
# llama.cpp's models/templates ships it and gpt-oss GGUFs carry it).
# Usage: python3 harmony_renders.py > harmony_renders.json
import datetime
import json

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(m):
    raise jinja2.exceptions.TemplateError(m)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.datetime(2026, 12, 2, 10, 0, 0).strftime(f)
tmpl = env.from_string(open("openai-gpt-oss-120b.jinja").read())

weather = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                           "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}}
cases = [
    {"name": "system", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "What is 2+2?"}]},
    {"name": "no_system", "messages": [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Thanks  \n  bye"}]},
    {"name": "tools_reasoning", "vars": {"reasoning_effort": "high"}, "tools": [weather], "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "thinking": "Need the weather tool.",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "{\"temp\": 18}"},
        {"role": "assistant", "content": "18 degrees.", "thinking": "Report it."},
        {"role": "user", "content": "And tomorrow?"}]},
]
for c in cases:
    kw = dict(c.get("vars", {}))
    if "tools" in c:
        kw["tools"] = c["tools"]
    c["out"] = tmpl.render(messages=c["messages"], add_generation_prompt=True,
                           bos_token="<|startoftext|>", eos_token="<|return|>", **kw)
print(json.dumps(cases, indent=1, ensure_ascii=False))
