"""kvwarden Python example (run by the test suite: ctest python_example).

    python example.py [model.bin tokenizer.bin]

Without arguments it uses the built-in synthetic model (random weights).
"""
import os
import sys

import kvwarden

model = tokenizer = None
if len(sys.argv) == 3:
    model, tokenizer = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        if os.environ.get("CI"):
            sys.exit(f"FAIL: {model} not found and CI is set")
        print(f"SKIP: {model} not found")
        sys.exit(77)

print("kvwarden", kvwarden.version())
with kvwarden.Engine(model, tokenizer_path=tokenizer, kv_memory_bytes=8 << 20) as eng:
    prompt = "Once upon a time"
    print("tokens:", eng.tokenize(prompt))

    # Blocking generation (greedy by default).
    text = eng.generate(prompt, max_tokens=32)
    print("generate:", prompt + text)

    # Streaming, with sampling, a stop string and a tenant.
    print("stream:  ", prompt, end="")
    for piece in eng.stream(prompt, max_tokens=64, temperature=0.8, top_p=0.9, seed=42,
                            stop=["."], tenant="alice"):
        print(piece, end="", flush=True)
    print()

    # Closing a stream early aborts the request.
    with eng.stream(prompt, max_tokens=200) as s:
        first = next(s)
    print("first piece before abort:", repr(first))

    # Rejections carry the numbers.
    try:
        eng.generate("a " * (eng.max_context + 10))
    except kvwarden.RejectedError as e:
        print(f"rejected: reason={e.reason} requested={e.requested} limit={e.limit}")

    st = eng.stats()
    print("stats: finished={finished} aborted={aborted} rejected={rejected} "
          "isolation_failures={isolation_failures}".format(**st))
    assert st["isolation_failures"] == 0
print("ok")
