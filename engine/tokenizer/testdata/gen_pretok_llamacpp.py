#!/usr/bin/env python3
"""Generates pretok_llamacpp.json: pre-token splits for every pre-tokenizer
kind, computed by an independent Python model of llama.cpp's
unicode_regex_split (src/unicode.cpp): expressions that use \\p{..} run with
Python's re over the "collapsed" text (ASCII kept, other code points replaced
by one placeholder per category, non-ASCII whitespace by \\v, \\s limited to
the six ASCII spaces); others over the code points with non-ASCII whitespace
as \\v; the GPT-2 and Llama 3 expressions, which llama.cpp special-cases with
real Unicode categories, with the `regex` module. Each expression splits the
pieces of the previous one; unmatched text between matches is a piece.

Run once from this directory: python3 gen_pretok_llamacpp.py > pretok_llamacpp.json
"""
import json, random, re, sys, unicodedata
import regex

sys.path.insert(0, '.')
RE_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
RE_LLAMA3 = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
RE_QWEN2 = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
RE_BLOOM = " ?[^(\\s|.,!?…。，、।۔،)]+"
RE_TEKKEN = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
RE_GPT4O = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"

KINDS = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", RE_GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "llama3": [RE_LLAMA3],
    "deepseek-llm": None,  # read from pretok_table.go
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥ࠀ-一가-\ud7ff]+", r"\p{N}"],
    "deepseek-v3": [r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
                    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", RE_GPT2, r"[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", RE_GPT2],
    "gpt-2": [RE_GPT2],
    "qwen2": [RE_QWEN2],
    "bloom": [RE_BLOOM],
    "viking": [RE_BLOOM, r"\p{N}"],
    "tekken": [RE_TEKKEN],
    "chameleon": [r"<sentinel:[0-9]+>", r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", r"([\t\n]|    |  )", r"\p{N}",
                  r"[\p{P}!-/:-@\[-`{-~]", RE_GPT2],
    "gpt-4o": [RE_GPT4O],
    "qwen35": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "seed-coder": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "ufakzeka": [r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "bailingmoe": [r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"],
    "laguna": [r"[^\n]+|[\n]+", RE_QWEN2],
    "exaone-moe": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+"],
    "minicpm5": [r"\p{N}{1,3}", r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "spark2_5": [r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
                 "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+", r"\p{N}"],
    "granite-embed-multi-97m": [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
}

WS = set([0x9, 0xa, 0xb, 0xc, 0xd, 0x20, 0x85, 0xa0, 0x1680] + list(range(0x2000, 0x200b)) + [0x2028, 0x2029, 0x202f, 0x205f, 0x3000])
CAT = {"N": "\xd1", "L": "\xd2", "P": "\xd3", "M": "\xd4", "S": "\xd5"}
ASCII = {"N": "0-9", "L": "A-Za-z", "P": "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}", "M": "", "S": "\\$\\+<-\\>\\^`\\|"}
NAMES = {"N": "N", "L": "L", "P": "P", "M": "M", "S": "S", "Lu": "L", "Ll": "L", "Lt": "L", "Lm": "L", "Lo": "L"}


def collapse(c):
    o = ord(c)
    if o < 128:
        return c
    if o in WS:
        return "\x0b"
    cat = unicodedata.category(c)[0]
    return CAT.get(cat, "\xd0")


def wide(c):
    return "\x0b" if ord(c) > 0x7f and ord(c) in WS else c


def translate(expr, collapsed):
    """Rewrites an ECMAScript expression for Python's re: \\p{..} as
    llama.cpp collapses it, \\s as the six ASCII spaces."""
    out, inside, i = "", False, 0
    while i < len(expr):
        c = expr[i]
        if c == "[" and (i == 0 or expr[i - 1] != "\\") and not inside:
            inside = True
            out += c
            i += 1
            continue
        if c == "]" and inside and expr[i - 1] != "\\":
            inside = False
            out += c
            i += 1
            continue
        if c == "\\" and i + 1 < len(expr):
            n = expr[i + 1]
            if n == "p" and collapsed:
                j = expr.index("}", i)
                name = NAMES[expr[i + 3:j]]
                body = CAT[name] + ASCII[name]
                out += body if inside else "[" + body + "]"
                i = j + 1
                continue
            if n == "s":
                out += "\t-\r " if inside else "[\t-\r ]"
                i += 2
                continue
            if n == "S":
                out += "[^\t-\r ]"
                i += 2
                continue
            out += expr[i:i + 2]
            i += 2
            continue
        if inside and c == "[":
            out += "\\["
            i += 1
            continue
        out += c
        i += 1
    return out


def split_with(pattern_search, text, pieces):
    out, start = [], 0
    for size in pieces:
        seg_end = start + size
        pos, last = start, start
        while pos < seg_end:
            m = pattern_search(text, pos, seg_end)
            if not m:
                break
            if m.start() > last:
                out.append(m.start() - last)
            out.append(m.end() - m.start())
            last = pos = m.end()
        if last < seg_end:
            out.append(seg_end - last)
        start = seg_end
    return out


def pretokenize(exprs, text):
    pieces = [len(text)] if text else []
    col = "".join(collapse(c) for c in text)
    wid = "".join(wide(c) for c in text)
    for e in exprs:
        if e in (RE_GPT2, RE_LLAMA3):
            p = regex.compile(e + ("|\\s+" if e == RE_GPT2 else ""))
            # Custom splitters: every char a regex does not match is a piece of its own.
            out, start = [], 0
            for size in pieces:
                end, pos = start + size, start
                while pos < end:
                    m = p.match(text, pos, end)
                    if m and m.end() > pos:
                        out.append(m.end() - pos)
                        pos = m.end()
                    else:
                        out.append(1)
                        pos += 1
                start = end
            pieces = out
            continue
        collapsed = any(("\\p{%s}" % n) in e for n in NAMES)
        p = re.compile(translate(e, collapsed))
        view = col if collapsed else wid
        pieces = split_with(lambda _t, s, en: p.search(view, s, en), view, pieces)
    res, pos = [], 0
    for size in pieces:
        res.append(text[pos:pos + size])
        pos += size
    return res


ATOMS = ["a", "Hello", " world", "I'M", "'s", "'ll", "they'RE", "ABCdef", "abcDEF", "McDonald", "HTTPServer", "é", "Ünïcödé",
         "ß", "Σίσυφος", "Москва", "日本語", "ひらがな", "カタカナ", "한국어", "中文字", "العربية", "हिन्दी", "e\u0301", "😀", "👍🏽", "1", "12", "1234567",
         "٣٤", "１２", "½", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", "\u00a0", "\u3000", "\u2009", "!", "...", "…", "。", "，", "?!", ",", "(",
         ")", "|", "~", "$", "+", "<", ">", "=", "^", "`", "/", "//", "\\", "{", "}", "[", "]", "-", "_", "@", "#", "%", "&", "*", ":", ";",
         "\"", "'", "«", "»", "€", "©", "<sentinel:12>", "IMGIMGABZ", "x", "y", "z", "Q", "0x1F", "3.14", "ﬁ", "ǅ"]


def main():
    src = open("../pretok_table.go", encoding="utf-8").read()
    blk = src[src.index('"deepseek-llm": {exprs: []string{'):]
    blk = blk[:blk.index("}},")]
    lits = re.findall(r'"((?:[^"\\]|\\.)*)"', blk.split("{", 2)[2])
    KINDS["deepseek-llm"] = [l.encode("utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8") for l in lits]
    rng = random.Random(10)
    texts = ["", " ", "a", "  leading", "trailing  ", "\n\n\n", "a\n\nb", "x \n y", "Hello World! It's 2024...",
             "    indented code\n\treturn x+1;", "ÀÉÎõü", "ABCdefGHI jklMNO", "Hello, 世界! 123456789", "~~tilde~~ a~b",
             "IMGIMGABCDZ <sentinel:3>", "'S 'Ll 'rE", "  \u00a0\u3000x", "ΑΒΓαβγ Ωmega", "e\u0301e\u0301 a\u0300", "١٢٣ ٤٥"]
    for _ in range(300):
        texts.append("".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 12))))
    out = []
    for name in KINDS:
        for t in texts:
            out.append({"pre": name, "text": t, "pieces": pretokenize(KINDS[name], t)})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
