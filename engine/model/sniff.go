package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// ErrNotModelFile: the file is neither a GGUF file nor a legacy llama2.c
// checkpoint, the two formats kvwarden reads (Load). The error says what
// the file looks like when its first bytes tell (safetensors, a PyTorch
// zip, pre-GGUF GGML, text such as a Git LFS pointer).
var ErrNotModelFile = errors.New("not a GGUF or llama2.c file")

// llama2cFormatError is a llama2.c checkpoint that does not parse: a
// header that makes no sense, or a size that does not match it. A file in
// another format fails this way, which Load reports as ErrNotModelFile.
type llama2cFormatError struct{ err error }

func (e *llama2cFormatError) Error() string { return e.err.Error() }
func (e *llama2cFormatError) Unwrap() error { return e.err }

// notModelFile builds Load's error for path, which is not GGUF and failed
// as a llama2.c checkpoint with cause.
func notModelFile(path string, cause error) error {
	hint := ""
	if head, err := readHead(path, 64); err == nil {
		hint = sniff(head)
	}
	if hint != "" {
		hint = "; it looks like " + hint
	}
	return fmt.Errorf("%w: %s: it does not start with the GGUF magic %q, and it is not a legacy llama2.c checkpoint either (%v)%s",
		ErrNotModelFile, path, "GGUF", cause, hint)
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:k], nil
}

// sniff names the format of a file from its first bytes, with what to do
// about it ("" when it cannot tell).
func sniff(head []byte) string {
	const convert = "convert the model to GGUF (llama.cpp's convert_hf_to_gguf.py) or download a GGUF build of it"
	switch {
	case len(head) == 0:
		return "an empty file"
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return "a zip archive (a PyTorch checkpoint?): " + convert
	case len(head) >= 9 && head[8] == '{' && binary.LittleEndian.Uint64(head) < 1<<30:
		return "a safetensors file: " + convert
	case bytes.HasPrefix(head, []byte("lmgg")), bytes.HasPrefix(head, []byte("fmgg")), bytes.HasPrefix(head, []byte("tjgg")):
		return "a GGML file from before GGUF: convert it with llama.cpp's convert_llama_ggml_to_gguf.py"
	case bytes.HasPrefix(head, []byte("version https://git-lfs")):
		return "a Git LFS pointer, not the file it points to (run git lfs pull, or download the file itself)"
	case isText(head):
		return "a text file (an HTML page or a JSON file saved instead of the model?)"
	}
	return ""
}

func isText(b []byte) bool {
	// A multibyte character may be cut at the end of the sample.
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 && len(b) >= utf8.UTFMax {
			return false
		}
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
		b = b[n:]
	}
	return true
}
