package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// Pre-tokenizer expressions, as llama.cpp's llm_tokenizer_bpe lists them
// per tokenizer.ggml.pre (each is applied to the pieces of the previous).
const (
	reGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// Llama 3 with (?i:...) spelled out, as llama.cpp adapts it.
	reLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reBloom  = ` ?[^(\s|.,!?…。，、।۔،)]+`
	// Tekken and GPT-4o: llama.cpp writes the case classes \p{Lu}... with
	// lookaheads, which collapsed matching turns into "letter, not a-z" and
	// "letter, not A-Z".
	reTekken = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Han and kana, deepseek-v3's second expression.
	reCJKKana = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	reGPT4o   = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// preKind is one of llama.cpp's pre-tokenizer types: its expressions and
// the flags that come with it.
type preKind struct {
	exprs        []string
	ignoreMerges bool // a pre-token that is a token is emitted whole
	addBOS       bool // default for tokenizer.ggml.add_bos_token
}

var (
	preDefault    = preKind{exprs: []string{`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}}
	preLlama3     = preKind{exprs: []string{reLlama3}, ignoreMerges: true, addBOS: true}
	preGPT2       = preKind{exprs: []string{reGPT2}}
	preStar       = preKind{exprs: []string{`\p{N}`, reGPT2}}
	preQwen2      = preKind{exprs: []string{reQwen2}}
	preDBRX       = preKind{exprs: []string{reLlama3}}
	preBloom      = preKind{exprs: []string{reBloom}}
	preBailing    = preKind{exprs: []string{`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`}}
	preDeepseekV3 = preKind{exprs: []string{
		`\p{N}{1,3}`,
		reCJKKana,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	}}
)

// preKinds maps tokenizer.ggml.pre to its pre-tokenizer, with the names
// llama.cpp gives the same type.
var preKinds = map[string]preKind{
	"":        preDefault,
	"default": preDefault,

	"llama3": preLlama3, "llama-v3": preLlama3, "llama-bpe": preLlama3, "falcon3": preLlama3,
	"pixtral": preLlama3, "falcon-h1": preLlama3,

	"deepseek-llm": {exprs: []string{
		"[\r\n]",
		"\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
		"\\s?[!-/:-~！-／：-～‘-‟　-。]+",
		"\\s+$",
		"[一-龥ࠀ-一가-퟿]+",
		"\\p{N}+",
	}},
	"deepseek-coder": {exprs: []string{"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`}},
	"deepseek-v3":    preDeepseekV3,
	"falcon":         {exprs: []string{"[\\p{P}\\$\\+<=>\\^~\\|`]+", reGPT2, `[0-9][0-9][0-9]`}},

	"starcoder": preStar, "refact": preStar, "command-r": preStar, "smollm": preStar,
	"codeshell": preStar, "exaone": preStar, "minerva-7b": preStar,

	"gpt-2": preGPT2, "gpt2": preGPT2, "phi-2": preGPT2, "mpt": preGPT2, "olmo": preGPT2, "jais": preGPT2,
	"jina-es": preGPT2, "jina-de": preGPT2, "jina-v1-en": preGPT2, "jina-v2-es": preGPT2,
	"jina-v2-de": preGPT2, "jina-v2-code": preGPT2, "roberta-bpe": preGPT2, "gigachat": preGPT2,
	"exaone4": preGPT2,

	"qwen2": preQwen2, "deepseek-r1-qwen": preQwen2, "megrez": preQwen2, "stablelm2": preQwen2,

	"dbrx": preDBRX, "smaug-bpe": preDBRX,
	// ChatGLM-4: the Llama 3 split without ignore_merges (and no BOS id).
	"chatglm-bpe": preDBRX, "chatglm4": preDBRX, "glm4": preDBRX,

	"poro-chat": preBloom, "bloom": preBloom, "gpt3-finnish": preBloom,
	"viking": {exprs: []string{reBloom, `\p{N}`}},

	"tekken": {exprs: []string{reTekken}, ignoreMerges: true, addBOS: true},
	"chameleon": {exprs: []string{
		`<sentinel:[0-9]+>`,
		`(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`,
		`([\t\n]|    |  )`,
		`\p{N}`,
		"[\\p{P}!-/:-@\\[-`{-~]",
		reGPT2,
	}, addBOS: true},
	"gpt-4o": {exprs: []string{reGPT4o}}, "llama4": {exprs: []string{reGPT4o}},
	"kanana2": {exprs: []string{reGPT4o}}, "talkie": {exprs: []string{reGPT4o}}, "minimax-m2": {exprs: []string{reGPT4o}},

	// Names newer than the list (llama.cpp master), where the
	// expressions are plain ASCII.
	"midm-2.0": preLlama3, "lfm2": preLlama3, "jina-v5-nano": preLlama3,
	"a.x-4.0": preGPT2, "mellum": preGPT2, "modern-bert": preGPT2, "trillion": preGPT2, "granite-docling": preGPT2,
	"mellum2": preStar,
	"kormo":   preQwen2, "f2llmv2": preQwen2, "hunyuan": preQwen2, "solar-open": preQwen2, "grok-2": preQwen2,
	"hunyuan-dense": preDeepseekV3, "hy_v4": preDeepseekV3, "joyai-llm": preDeepseekV3,
	"qwen35":     {exprs: []string{`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"seed-coder": {exprs: []string{`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"ufakzeka":   {exprs: []string{`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
	"bailingmoe": preBailing, "bailingmoe2": preBailing, "llada-moe": preBailing,
	"laguna":     {exprs: []string{`[^\n]+|[\n]+`, reQwen2}},
	"exaone-moe": {exprs: []string{`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`}},
	"minicpm5":   {exprs: []string{`\p{N}{1,3}`, `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, ignoreMerges: true},
	"spark2_5": {exprs: []string{`\p{N}{1,3}`, reCJKKana,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
		`\p{N}`}},
	"granite-embed-multi-97m": {exprs: []string{`[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, ignoreMerges: true},
}

// PreTokenizers returns the tokenizer.ggml.pre names NewGPT2 accepts.
func PreTokenizers() []string {
	names := make([]string, 0, len(preKinds))
	for n := range preKinds {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// preStep is one expression: a hand-written splitter for the two that
// llama.cpp also special-cases (GPT-2 and Llama 3, which it matches with
// real Unicode categories), or a compiled expression.
type preStep struct {
	custom func(rt runeText) []int // piece lengths in code points
	prog   *reProg
}

// preTokenizer splits text into pre-tokens.
type preTokenizer struct {
	steps []preStep
	modes [2]bool // which transformed texts the steps need
}

// compiled pre-tokenizers, shared by all tokenizers of a kind.
func newPreTokenizer(name string) (*preTokenizer, preKind, error) {
	kind, ok := preKinds[name]
	if !ok {
		return nil, preKind{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownPreTokenizer, name, strings.Join(PreTokenizers(), ", "))
	}
	pt := &preTokenizer{}
	for _, e := range kind.exprs {
		switch e {
		case reGPT2:
			pt.steps = append(pt.steps, preStep{custom: gpt2Pieces})
			continue
		case reLlama3:
			pt.steps = append(pt.steps, preStep{custom: llama3Pieces})
			continue
		}
		prog, err := compileRegex(e)
		if err != nil {
			return nil, preKind{}, err
		}
		pt.modes[prog.mode] = true
		pt.steps = append(pt.steps, preStep{prog: prog})
	}
	return pt, kind, nil
}

// split returns the byte offsets where the pre-tokens of text end.
func (pt *preTokenizer) split(text string, ends []int) []int {
	rt := newRuneText(text)
	if len(rt.runes) == 0 {
		return ends
	}
	var views [2][]rune
	if pt.modes[reCollapsed] {
		views[reCollapsed] = make([]rune, len(rt.runes))
		for i, r := range rt.runes {
			views[reCollapsed][i] = collapse(r)
		}
	}
	if pt.modes[reWide] {
		views[reWide] = make([]rune, len(rt.runes))
		for i, r := range rt.runes {
			views[reWide][i] = wide(r)
		}
	}
	pieces := []int{len(rt.runes)}
	var m reMatcher
	for _, st := range pt.steps {
		if st.custom != nil {
			next := make([]int, 0, len(pieces)*2)
			start := 0
			for _, size := range pieces {
				next = append(next, st.custom(rt.slice(start, start+size))...)
				start += size
			}
			pieces = next
			continue
		}
		m.text = views[st.prog.mode]
		pieces = m.split(st.prog, pieces)
	}
	pos := 0
	for _, size := range pieces {
		pos += size
		ends = append(ends, rt.offs[pos])
	}
	return ends
}

// slice returns the code points [i, j) as a runeText of their own.
func (rt runeText) slice(i, j int) runeText {
	return runeText{runes: rt.runes[i:j], offs: rt.offs[i : j+1]}
}

func gpt2Pieces(rt runeText) []int {
	var out []int
	for i := 0; i < len(rt.runes); {
		j := gpt2Next(rt, i)
		out = append(out, j-i)
		i = j
	}
	return out
}

func llama3Pieces(rt runeText) []int {
	var out []int
	for i := 0; i < len(rt.runes); {
		j := llama3Next(rt, i)
		out = append(out, j-i)
		i = j
	}
	return out
}
