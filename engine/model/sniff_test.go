package model

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadNotModelFile(t *testing.T) {
	st := binary.LittleEndian.AppendUint64(nil, 40)
	st = append(st, `{"model.embed_tokens.weight":{"dtype":"F16"}}`...)
	for _, c := range []struct {
		name, hint string
		data       []byte
	}{
		{"empty", "an empty file", nil},
		{"safetensors", "a safetensors file", st},
		{"pytorch zip", "a zip archive", append([]byte("PK\x03\x04"), make([]byte, 60)...)},
		{"ggml", "a GGML file from before GGUF", append([]byte("tjgg"), make([]byte, 60)...)},
		{"git lfs pointer", "a Git LFS pointer", []byte("version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 99\n")},
		{"html", "a text file", []byte("<!DOCTYPE html><html><body>Not found</body></html>\n")},
		{"random bytes", "", []byte{0x01, 0x00, 0xff, 0x7f, 0x13, 0x37, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.bin")
			require.NoError(t, os.WriteFile(path, c.data, 0o600))
			_, _, err := Load(path)
			require.ErrorIs(t, err, ErrNotModelFile)
			require.ErrorContains(t, err, "not a GGUF or llama2.c file: "+path)
			if c.hint != "" {
				require.ErrorContains(t, err, "it looks like "+c.hint)
			} else {
				require.NotContains(t, err.Error(), "it looks like")
			}
		})
	}
}
