package tokenizer

import (
	"slices"
	"sync/atomic"
)

// Option configures NewSentencePiece and NewGPT2 with vocabulary facts that
// GGUF records outside the token list (tokenizer.ggml.eot_token_id,
// add_bos_token, ...). FromMetadata sets them all from a GGUF file.
type Option func(*config)

type config struct {
	noPrefix  bool
	eot, eom  int
	addBOS    *bool
	addEOS    *bool
	modelName string
	extraEOG  []int
}

func newConfig(opts []Option) config {
	c := config{eot: -1, eom: -1}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithoutDummyPrefix disables the dummy-prefix space of SentencePiece
// (GGUF tokenizer.ggml.add_space_prefix = false).
func WithoutDummyPrefix() Option { return func(c *config) { c.noPrefix = true } }

// WithEOT names the end-of-turn token (tokenizer.ggml.eot_token_id).
func WithEOT(id int) Option { return func(c *config) { c.eot = id } }

// WithEOM names the end-of-message token (tokenizer.ggml.eom_token_id).
func WithEOM(id int) Option { return func(c *config) { c.eom = id } }

// WithAddBOS overrides the tokenizer model's default for adding BOS
// (tokenizer.ggml.add_bos_token).
func WithAddBOS(v bool) Option { return func(c *config) { c.addBOS = &v } }

// WithAddEOS overrides the default for adding EOS (tokenizer.ggml.add_eos_token).
func WithAddEOS(v bool) Option { return func(c *config) { c.addEOS = &v } }

// WithEOG adds ids to the end-of-generation set (llama.cpp adds the FIM
// pad, repo and file-separator tokens named in metadata).
func WithEOG(ids ...int) Option { return func(c *config) { c.extraEOG = append(c.extraEOG, ids...) } }

// WithModelName passes general.name, which llama.cpp uses to give some
// models' special tokens strip attributes (Phi-3's rstrip).
func WithModelName(name string) Option { return func(c *config) { c.modelName = name } }

// eogTexts are the token texts llama.cpp treats as ending a generation
// whatever the metadata says (llama-vocab.cpp, special_eog_ids).
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
	"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<｜end▁of▁sentence｜>", "[e~[",
}

// fimEOGTexts are the FIM pad, repo and separator texts llama.cpp detects
// and puts in the end-of-generation set.
var fimEOGTexts = [][]string{
	{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
	{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
	{"<|file_sep|>"},
}

// eotTexts are the texts llama.cpp takes as the EOT token when the metadata
// names none.
var eotTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
	"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
}

// vocab holds what every GGUF-style tokenizer shares: the token texts and
// types, the end-of-generation set, BOS/EOS policy and statistics.
type vocab struct {
	texts  []string
	types  []int32 // resolved, never 0
	byText map[string]int32
	bos    int
	eos    int
	eot    int
	eom    int
	eog    []int // sorted
	isEOG  map[int]struct{}
	addBOS bool
	addEOS bool
	// dropped counts input bytes that had no token and were left out, as
	// llama.cpp does.
	dropped atomic.Uint64
	bound   tokenBound
	special specialMatcher // the user-defined (and control) texts cut out first
}

// initVocab fills the shared fields. types must be resolved already.
func (v *vocab) initVocab(texts []string, types []int32, bos, eos int, cfg config, defBOS, defEOS bool) {
	v.texts, v.types, v.bos, v.eos = texts, types, bos, eos
	v.byText = make(map[string]int32, len(texts))
	for i, s := range texts {
		if _, dup := v.byText[s]; !dup {
			v.byText[s] = int32(i)
		}
	}
	n := len(texts)
	valid := func(id int) int {
		if id < 0 || id >= n {
			return -1
		}
		return id
	}
	v.eot, v.eom = valid(cfg.eot), valid(cfg.eom)
	if v.eot < 0 {
		v.eot = v.firstOf(eotTexts)
	}
	if v.eom < 0 {
		v.eom = v.firstOf([]string{"<|eom_id|>"})
	}
	set := map[int]struct{}{}
	// Tokens found by their text are control tokens whatever their stored
	// type says (llama.cpp overrides it the same way).
	control := func(id int) {
		if id >= 0 {
			set[id] = struct{}{}
			v.types[id] = TypeControl
		}
	}
	if cfg.eot < 0 || cfg.eot >= n {
		control(v.eot)
	}
	if cfg.eom < 0 || cfg.eom >= n {
		control(v.eom)
	}
	for _, s := range eogTexts {
		if id, ok := v.byText[s]; ok {
			control(int(id))
		}
	}
	for _, texts := range fimEOGTexts {
		control(v.firstOf(texts))
	}
	for _, id := range append([]int{v.eos, v.eot, v.eom}, cfg.extraEOG...) {
		if valid(id) >= 0 {
			set[id] = struct{}{}
		}
	}
	// llama.cpp: o200k_harmony and solar-open use <|end|> inside a turn.
	_, ret := v.byText["<|return|>"]
	_, call := v.byText["<|call|>"]
	_, calls := v.byText["<|calls|>"]
	_, flush := v.byText["<|flush|>"]
	if end, ok := v.byText["<|end|>"]; ok && ((ret && (call || calls)) || ((call || calls) && flush)) {
		delete(set, int(end))
		v.types[end] = TypeUserDefined
	}
	if _, ok := v.byText["<|tool_response>"]; ok {
		if s, ok := v.byText["</s>"]; ok {
			delete(set, int(s))
			v.types[s] = TypeNormal
		}
	}
	v.isEOG = set
	v.eog = make([]int, 0, len(set))
	for id := range set {
		v.eog = append(v.eog, id)
	}
	slices.Sort(v.eog)
	v.addBOS, v.addEOS = defBOS, defEOS
	if cfg.addBOS != nil {
		v.addBOS = *cfg.addBOS
	}
	if cfg.addEOS != nil {
		v.addEOS = *cfg.addEOS
	}
	if v.bos < 0 {
		v.addBOS = false
	}
	if v.eos < 0 {
		v.addEOS = false
	}
}

// firstOf returns the lowest id whose text is in texts, or -1.
func (v *vocab) firstOf(texts []string) int {
	best := -1
	for _, s := range texts {
		if id, ok := v.byText[s]; ok && (best < 0 || int(id) < best) {
			best = int(id)
		}
	}
	return best
}

// VocabSize returns the number of tokens.
func (v *vocab) VocabSize() int { return len(v.texts) }

// BOS returns the beginning-of-sequence id, or -1.
func (v *vocab) BOS() int { return v.bos }

// EOS returns the end-of-sequence id, or -1.
func (v *vocab) EOS() int { return v.eos }

// Piece returns the vocabulary entry of id as the model stores it (GPT-2's
// byte-mapped characters, SentencePiece's U+2581 spaces), or "" when out
// of range.
func (v *vocab) Piece(id int) string {
	if id < 0 || id >= len(v.texts) {
		return ""
	}
	return v.texts[id]
}

// TokenType returns the resolved type of id (TypeNormal, TypeControl, ...),
// or 0 when out of range.
func (v *vocab) TokenType(id int) int32 {
	if id < 0 || id >= len(v.types) {
		return 0
	}
	return v.types[id]
}

// MinTokens is a lower bound on the tokens of text (see LimitEncoder).
func (v *vocab) MinTokens(text string) int { return v.bound.minTokens(text) }

// IsEOG reports whether id ends a generation (EOS, EOT, EOM and the
// control tokens that end a turn, as llama.cpp computes them).
func (v *vocab) IsEOG(id int) bool { _, ok := v.isEOG[id]; return ok }

// EOG returns the end-of-generation ids in ascending order (a copy).
func (v *vocab) EOG() []int { return slices.Clone(v.eog) }

// EOT returns the end-of-turn id, or -1.
func (v *vocab) EOT() int { return v.eot }

// AddBOS reports whether prompts get BOS (tokenizer.ggml.add_bos_token, or
// llama.cpp's default for the tokenizer model).
func (v *vocab) AddBOS() bool { return v.addBOS }

// AddEOS reports whether prompts get EOS.
func (v *vocab) AddEOS() bool { return v.addEOS }

// Lookup returns the id of the vocabulary entry spelled exactly piece (as
// Piece returns it), of any token type.
func (v *vocab) Lookup(piece string) (int, bool) {
	id, ok := v.byText[piece]
	return int(id), ok
}

// DroppedBytes returns how many input bytes had no token and were left out
// since the tokenizer was built.
func (v *vocab) DroppedBytes() uint64 { return v.dropped.Load() }

// encodeFrags is the encoding loop the BPE tokenizers share: BOS, the text
// cut at special tokens with each other fragment encoded by raw, then EOS.
// With limit >= 0 it stops with a *LimitError once the result is known to
// hold more than limit tokens: before a fragment whose length bound alone
// goes past it, when raw reports it stopped (raw may stop early only with
// limit >= 0), or after a fragment that went past it. size is the
// capacity to start with.
func (v *vocab) encodeFrags(text string, opt Options, limit, size int, raw func(out []int, frag string, limit int) ([]int, bool)) ([]int, error) {
	if limit >= 0 {
		size = min(size, limit+2)
	}
	out := make([]int, 0, size)
	if opt.BOS && v.bos >= 0 {
		out = append(out, v.bos)
	}
	frags := v.special.split(text, opt.Special)
	for i, f := range frags {
		if f.id >= 0 {
			out = append(out, f.id)
		} else {
			if n := len(out) + v.bound.atLeast(f.text); limit >= 0 && n > limit {
				return nil, &LimitError{AtLeast: n, Limit: limit}
			}
			var stopped bool
			if out, stopped = raw(out, f.text, limit); stopped {
				return nil, &LimitError{AtLeast: len(out), Limit: limit}
			}
		}
		if limit >= 0 && len(out) > limit && i < len(frags)-1 {
			return nil, &LimitError{AtLeast: len(out), Limit: limit}
		}
	}
	if opt.EOS && v.eos >= 0 {
		out = append(out, v.eos)
	}
	return out, nil
}

// tokenBound bounds how many input bytes one token can stand for, which
// gives a lower bound on the tokens of a text from its bytes alone: the way
// a prompt that cannot fit a context is refused without tokenizing it.
type tokenBound struct {
	// longest is the most input bytes one token of a text fragment covers:
	// the longest piece or special-token text (a piece is never shorter
	// than the input it covers: U+2581 stands for one space, a byte-mapped
	// character for one byte, and every other symbol covers one byte).
	longest int
	// drop marks the bytes that may produce no token (no byte piece and no
	// unknown token; DroppedBytes); lossy says whether there is any.
	drop  [256]bool
	lossy bool
	// strips: a special token removes the ASCII whitespace beside it
	// (lstrip or rstrip), so whitespace may produce no token either.
	strips bool
}

// newTokenBound: longest is the longest piece a merge or lookup can give;
// drop(b) says whether byte b may produce no token.
func newTokenBound(longest int, specials []specialText, drop func(b byte) bool) tokenBound {
	b := tokenBound{longest: max(longest, 1)}
	for c := range 256 {
		b.drop[c] = drop(byte(c))
		b.lossy = b.lossy || b.drop[c]
	}
	for _, s := range specials {
		b.longest = max(b.longest, len(s.text))
		b.strips = b.strips || s.lstrip || s.rstrip
	}
	return b
}

// minTokens is a lower bound on the tokens of text, whatever the options:
// a pass over its bytes, without allocating.
func (b *tokenBound) minTokens(text string) int { return b.count(text, b.strips) }

// atLeast is a lower bound on the tokens of a raw text fragment (between
// special tokens, where nothing is stripped).
func (b *tokenBound) atLeast(frag string) int { return b.count(frag, false) }

func (b *tokenBound) count(text string, strip bool) int {
	n := len(text)
	if b.lossy || strip {
		for i := 0; i < len(text); i++ {
			if c := text[i]; b.drop[c] || (strip && isCSpace(c)) {
				n--
			}
		}
	}
	return (n + b.longest - 1) / b.longest
}
