"""A llama-cpp-python program, run on kvwarden.

Only two lines differ from llama-cpp-python: the import and the model path
(kvwarden's built-in story model needs no download; pass a .gguf path to use
a real model). Run: python example_llama.py [model.gguf]
"""
import sys

from kvwarden import Llama  # llama-cpp-python: from llama_cpp import Llama

llm = Llama(model_path=sys.argv[1] if len(sys.argv) > 1 else "builtin:stories260K",
            n_ctx=512, n_batch=512, seed=1337, verbose=False)
print("architecture:", llm.metadata.get("general.architecture"), "n_embd:", llm.n_embd(),
      "n_vocab:", llm.n_vocab())

# Completion (greedy).
out = llm("Once upon a time", max_tokens=32, temperature=0, stop=["\n"], echo=True)
print(out["choices"][0]["text"])
print("finish_reason:", out["choices"][0]["finish_reason"], "usage:", out["usage"])

# Chat.
chat = llm.create_chat_completion(
    messages=[
        {"role": "system", "content": "You are a storyteller."},
        {"role": "user", "content": "Tell me about a cat."},
    ],
    max_tokens=48,
)
print("assistant:", chat["choices"][0]["message"]["content"])

# Streaming.
for chunk in llm("The little dog", max_tokens=32, stream=True):
    print(chunk["choices"][0]["text"], end="", flush=True)
print()
for chunk in llm.create_chat_completion(
        messages=[{"role": "user", "content": "Say hello."}], max_tokens=16, stream=True):
    delta = chunk["choices"][0]["delta"]
    print(delta.get("content", ""), end="", flush=True)
print()

# Token prompts, logprobs, and saving the state after a completion.
tokens = llm.tokenize(b"Once upon a time")
out = llm(tokens, max_tokens=4, temperature=0, logprobs=2)
lp = out["choices"][0]["logprobs"]
print("tokens:", lp["tokens"], "logprobs:", [round(x, 3) for x in lp["token_logprobs"]])
state = llm.save_state()
llm.reset()
llm.load_state(state)
print("restored", state.n_tokens, "tokens:", llm.detokenize(llm.input_ids).decode())
print("ok")
