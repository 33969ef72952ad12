#!/usr/bin/env python3
"""Regenerates pretok_vectors.json: pre-tokenizer splits of mixed strings by
the Llama 3 and GPT-2 regexes, run by the `regex` module (which, unlike Go's
regexp, has lookahead and Unicode \\s). Run from this directory."""
import json
import random

import regex

L3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
G2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
random.seed(7)
atoms = ["a", "b", "Z", "é", "ß", "Ω", "日", "本", "😀", "👍🏽", "1", "2", "9", "٣", "²", "Ⅻ", " ", "  ", "\t", "\n", "\r\n", "\r",
         "\u00a0", "\u3000", "\u2009", "'", "'s", "'S", "'re", "'LL", "'ve", "'d", "'m", "'t", "!", "?", ".", ",", "-", "\"", "(", ")",
         "$", "\u0301", "_", "/", "don't", "I'M", "hello", "World", "12345", "  \n ", "\n\n"]
fixed = ["", "Hello world", "hello  world", " leading", "trailing ", "a\n\nb", "x \n y", "  \t\n  z", "I'm here, they'RE gone.",
         "1234567", "  !!!\n\nabc", "café naïve 日本語 😀", "tab\there", "'''", "  ", "\n", " \n", " a", "a  b   c"]
cases = fixed + ["".join(random.choice(atoms) for _ in range(random.randint(1, 14))) for _ in range(400)]
out = []
for s in cases:
    l3 = [m.group(0) for m in regex.finditer(L3, s)]
    g2 = [m.group(0) for m in regex.finditer(G2, s)]
    assert "".join(l3) == s and "".join(g2) == s, s
    out.append({"text": s, "llama3": l3, "gpt2": g2})
with open("pretok_vectors.json", "w") as f:
    json.dump(out, f, ensure_ascii=False, indent=0)
