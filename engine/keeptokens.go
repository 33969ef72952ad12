package engine

// Tool-call and reasoning markup is often made of control tokens
// (<|python_tag|>, [TOOL_CALLS], DeepSeek's <｜tool▁calls▁begin｜>), which
// decode to nothing. A request names the ones it needs to see
// (Request.KeepTokens), as llama.cpp's preserved tokens; they then decode
// to their text.

// MaxKeepTokens bounds Request.KeepTokens: texts past it are ignored (the C
// API rejects them, KVW_MAX_KEEP_TOKENS).
const MaxKeepTokens = 64

// keepTokens maps the ids of the given vocabulary entries that decode to
// nothing to their text. Texts that are not one such entry are ignored:
// they already decode to text, or the vocabulary lacks them.
func (e *Engine) keepTokens(texts []string) map[int][]byte {
	var keep map[int][]byte
	for i, t := range texts {
		if i == MaxKeepTokens {
			break
		}
		id, ok := e.tok.Lookup(t)
		if !ok || len(e.tok.Decode(-1, id)) > 0 {
			continue
		}
		if keep == nil {
			keep = map[int][]byte{}
		}
		keep[id] = []byte(t)
	}
	return keep
}

// keepDecode is decode with the kept tokens spelled out.
func keepDecode(decode func(prev, id int) []byte, keep map[int][]byte) func(prev, id int) []byte {
	if len(keep) == 0 {
		return decode
	}
	return func(prev, id int) []byte {
		if b, ok := keep[id]; ok {
			return b
		}
		return decode(prev, id)
	}
}
