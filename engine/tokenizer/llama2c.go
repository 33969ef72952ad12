package tokenizer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// maxLlama2CPieceLen bounds one piece of a llama2.c tokenizer file so that a
// corrupt length cannot cause a huge allocation.
const maxLlama2CPieceLen = 1 << 16

// maxVocab bounds vocabulary sizes accepted by the loaders.
const maxVocab = 1 << 24

// LoadLlama2C reads a llama2.c tokenizer file (tokenizer.bin, tok512.bin).
// The file does not record its size; vocabSize comes from the checkpoint
// header. BOS is 1, EOS is 2 and UNK is 0, as in run.c, and byte fallback
// uses id b+3 for byte b, as run.c does.
func LoadLlama2C(path string, vocabSize int) (*SentencePiece, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	t, err := ReadLlama2C(f, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

// ReadLlama2C reads a llama2.c tokenizer from r: int32 max_token_length,
// then vocabSize times (float32 score, int32 len, len bytes), little endian.
// Spaces are stored as ASCII spaces. Unlike run.c, which ignores trailing
// data, a file with more tokens than vocabSize is refused: it is a tokenizer
// for another model (tokenizer.bin's 32000 pieces read as stories260K's 512
// would tokenize without error, and wrongly).
func ReadLlama2C(r io.Reader, vocabSize int) (*SentencePiece, error) {
	if vocabSize <= 0 || vocabSize > maxVocab {
		return nil, fmt.Errorf("tokenizer: llama2.c vocab size %d outside [1, %d]", vocabSize, maxVocab)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	var off int64
	var hdr [8]byte
	readN := func(b []byte, what string, i int) error {
		if _, err := io.ReadFull(br, b); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("tokenizer: llama2.c file truncated reading %s of token %d at offset %d", what, i, off)
			}
			return fmt.Errorf("tokenizer: reading %s of token %d at offset %d: %w", what, i, off, err)
		}
		off += int64(len(b))
		return nil
	}
	if err := readN(hdr[:4], "max_token_length", -1); err != nil {
		return nil, err
	}
	maxLen := int32(binary.LittleEndian.Uint32(hdr[:4]))
	if maxLen <= 0 || maxLen > maxLlama2CPieceLen {
		return nil, fmt.Errorf("tokenizer: llama2.c max_token_length %d at offset 0 outside [1, %d]", maxLen, maxLlama2CPieceLen)
	}
	pieces := make([]string, vocabSize)
	scores := make([]float32, vocabSize)
	buf := make([]byte, maxLlama2CPieceLen)
	for i := 0; i < vocabSize; i++ {
		if err := readN(hdr[:8], "score and length", i); err != nil {
			return nil, err
		}
		scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(hdr[:4]))
		n := int32(binary.LittleEndian.Uint32(hdr[4:8]))
		if n < 0 || n > maxLlama2CPieceLen {
			return nil, fmt.Errorf("tokenizer: llama2.c token %d length %d at offset %d outside [0, %d]", i, n, off-4, maxLlama2CPieceLen)
		}
		if err := readN(buf[:n], "bytes", i); err != nil {
			return nil, err
		}
		pieces[i] = string(buf[:n])
	}
	if _, err := br.ReadByte(); err == nil {
		return nil, fmt.Errorf("tokenizer: llama2.c file has data after token %d at offset %d: it holds more tokens than the model's vocabulary of %d (a tokenizer for another model?)", vocabSize-1, off, vocabSize)
	}
	bos, eos, unk := 1, 2, 0
	if vocabSize < 3 {
		return nil, fmt.Errorf("tokenizer: llama2.c vocab size %d too small for <unk>, BOS and EOS", vocabSize)
	}
	t, err := NewSentencePiece(pieces, scores, nil, bos, eos, unk)
	if err != nil {
		return nil, err
	}
	// run.c's byte fallback is id b+3 regardless of the piece text.
	if vocabSize >= 259 {
		for b := range t.byteID {
			t.byteID[b] = int32(b + 3)
		}
	}
	t.setBound()
	return t, nil
}
