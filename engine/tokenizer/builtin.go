package tokenizer

import "fmt"

// Bytes is the byte-level vocabulary of the built-in synthetic model, laid
// out like llama2.c's byte fallback: 0 is <unk>, 1 BOS, 2 EOS, and byte b is
// ID b+3. Every string encodes and decodes exactly, with no merges.
type Bytes struct{}

const (
	bytesUnk    = 0
	bytesBOS    = 1
	bytesEOS    = 2
	bytesOffset = 3
	bytesVocab  = bytesOffset + 256
)

// NewBytes returns the built-in byte-level tokenizer.
func NewBytes() Bytes { return Bytes{} }

func (Bytes) Encode(text string, opt Options) ([]int, error) {
	ids := make([]int, 0, len(text)+2)
	if opt.BOS {
		ids = append(ids, bytesBOS)
	}
	for i := 0; i < len(text); i++ {
		ids = append(ids, int(text[i])+bytesOffset)
	}
	if opt.EOS {
		ids = append(ids, bytesEOS)
	}
	return ids, nil
}

// EncodeLimit is Encode that refuses, without encoding, a text of more than
// limit tokens (each byte is one token; see LimitEncoder).
func (b Bytes) EncodeLimit(text string, opt Options, limit int) ([]int, error) {
	n := len(text)
	if opt.BOS {
		n++
	}
	if opt.EOS {
		n++
	}
	if n > limit {
		return nil, &LimitError{AtLeast: n, Limit: limit}
	}
	return b.Encode(text, opt)
}

// MinTokens is len(text): every byte is a token.
func (Bytes) MinTokens(text string) int { return len(text) }

func (Bytes) Decode(prev, id int) []byte {
	if id < bytesOffset || id >= bytesVocab {
		return nil
	}
	return []byte{byte(id - bytesOffset)}
}

func (Bytes) Piece(id int) string {
	switch {
	case id == bytesUnk:
		return "<unk>"
	case id == bytesBOS:
		return "<s>"
	case id == bytesEOS:
		return "</s>"
	case id >= bytesOffset && id < bytesVocab:
		return fmt.Sprintf("<0x%02X>", id-bytesOffset)
	}
	return ""
}

func (Bytes) VocabSize() int { return bytesVocab }
func (Bytes) BOS() int       { return bytesBOS }
func (Bytes) EOS() int       { return bytesEOS }

func (Bytes) IsEOG(id int) bool { return id == bytesEOS }
func (Bytes) EOG() []int        { return []int{bytesEOS} }
func (Bytes) AddBOS() bool      { return true }
func (Bytes) AddEOS() bool      { return false }

// DroppedBytes is always 0: every byte has a token.
func (Bytes) DroppedBytes() uint64 { return 0 }

// Lookup returns the id of "<unk>", "<s>", "</s>" or "<0xNN>".
func (b Bytes) Lookup(piece string) (int, bool) {
	switch piece {
	case "<unk>":
		return bytesUnk, true
	case "<s>":
		return bytesBOS, true
	case "</s>":
		return bytesEOS, true
	}
	if v, ok := parseBytePiece(piece); ok && piece == b.Piece(int(v)+bytesOffset) {
		return int(v) + bytesOffset, true
	}
	return 0, false
}

var (
	_ Tokenizer    = Bytes{}
	_ LimitEncoder = Bytes{}
)
