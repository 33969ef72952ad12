package tokenizer

// TokenBytes returns the bytes token id stands for in generated text and
// whether it is a special token that text never contains (control,
// unknown and unused tokens). Byte-fallback pieces (<0xNN>) give their
// byte, SentencePiece's U+2581 gives a space, byte-level BPE pieces their
// unmapped bytes. Unlike Decode, the leading space of a SentencePiece token
// is kept: this is the token's contribution in the middle of an output,
// which is what a constrained decoder must check. Out-of-range ids are
// special. The returned slice is shared and must not be modified.
func TokenBytes(t Tokenizer, id int) (b []byte, special bool) {
	if id < 0 || id >= t.VocabSize() {
		return nil, true
	}
	var typ int32
	switch t := t.(type) {
	case *SentencePiece:
		b, typ = t.decoded[id], t.types[id]
	case *GPT2:
		b, typ = t.decoded[id], t.types[id]
	case Bytes:
		b = t.Decode(-1, id)
		if b == nil {
			typ = TypeControl
		}
	default:
		// Implementations outside this package keep no leading-space rule.
		b = t.Decode(-1, id)
	}
	switch typ {
	case TypeControl, TypeUnknown, TypeUnused:
		return nil, true
	}
	return b[:len(b):len(b)], false
}
