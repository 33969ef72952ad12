#!/usr/bin/env python3
"""Writes renders.json: what Hugging Face transformers' apply_chat_template
produces for conversations with tools, for the real chat templates in
../shared/templates (and testdata/*.jinja), rendered the way transformers
does (jinja2 sandbox, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, tojson with ensure_ascii=False, strftime_now pinned to
2026-12-02). The tools go in the `tools` variable; assistant tool_calls
carry their arguments as objects (transformers' convention) and an empty
content, except for DeepSeek R1's template, which concatenates the
arguments as text and tests "content is none": it gets the OpenAI string
and a null content. Phi-4-mini's template reads the tools from the system
message's "tools" field (a JSON string), as Microsoft documents.

Run from this directory: python3 gen_renders.py ../../../../shared/templates
"""
import datetime
import glob
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

TOOLS = json.loads("""[
 {"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
 {"type": "function", "function": {"name": "get_time", "description": "Current time",
  "parameters": {"type": "object", "properties": {}}}}
]""")

ARGS = '{"city": "Paris", "unit": "celsius"}'

CONVERSATIONS = {
    "ask": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ],
    "history": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a1b2c3d4e", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}]},
        {"role": "tool", "tool_call_id": "a1b2c3d4e", "content": '{"temperature": 21}'},
    ],
}

BOS_EOS = {
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
    "Mistral-Small-3.2-24B-Instruct-2506": ("<s>", "</s>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("<|begin_of_text|>", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "ibm-granite-granite-3.3-2B-Instruct": ("", "<|end_of_text|>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "microsoft-Phi-4-mini-instruct": ("<|endoftext|>", "<|endoftext|>"),
}


def render(src, messages, tools, bos, eos):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime(2026, 12, 2, 10, 0, 0).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    t = env.from_string(src)
    return t.render(messages=messages, tools=tools, documents=None, add_generation_prompt=True,
                    bos_token=bos, eos_token=eos)


def main():
    shared = sys.argv[1]
    files = sorted(glob.glob(os.path.join(shared, "*.jinja")) + glob.glob("*.jinja"))
    out = {"tools": TOOLS, "conversations": CONVERSATIONS, "renders": {}}
    for f in files:
        name = os.path.basename(f)[:-len(".jinja")]
        src = open(f, encoding="utf-8").read()
        bos, eos = BOS_EOS[name]
        for conv, msgs in CONVERSATIONS.items():
            msgs = json.loads(json.dumps(msgs))
            tools = TOOLS
            if "Phi-4-mini" in name:
                if conv != "ask":
                    continue  # the template has no tool_calls or tool role
                msgs[0]["tools"] = json.dumps([t["function"] for t in TOOLS], ensure_ascii=False)
                tools = None
            elif "DeepSeek-R1" not in name:
                # A null content is "" except for templates that test
                # "content is none" (DeepSeek R1); most concatenate it.
                for m in msgs:
                    if m["content"] is None:
                        m["content"] = ""
                    for c in m.get("tool_calls", []):
                        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
            try:
                text = render(src, msgs, tools, bos, eos)
            except jinja2.exceptions.TemplateError as e:
                text = "ERROR: " + str(e)
            except Exception as e:  # a template that fails on this input
                text = "ERROR: " + type(e).__name__ + ": " + str(e)
            out["renders"].setdefault(name, {})[conv] = {"bos": bos, "eos": eos, "out": text}
    with open("renders.json", "w", encoding="utf-8") as fh:
        json.dump(out, fh, ensure_ascii=False, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
