package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

func TestWeightPagesChoice(t *testing.T) {
	for _, tc := range []struct {
		field, env, device string
		want               mmap.Mode
	}{
		{"", "", "cpu", mmap.ModeAuto},
		{"", "", "cuda", mmap.ModeMap}, // the runner uploads the weights
		{"", "copy", "cpu", mmap.ModeCopy},
		{"", "copy", "cuda", mmap.ModeCopy}, // asked for: honoured
		{"auto", "copy", "cpu", mmap.ModeAuto},
		{"mmap", "", "cpu", mmap.ModeMap},
		{"recache", "", "cuda", mmap.ModeRecache},
		{"", "bogus", "cpu", ""}, // the loader reports the variable
	} {
		t.Run(tc.field+"/"+tc.env+"/"+tc.device, func(t *testing.T) {
			t.Setenv(mmap.ModeEnv, tc.env)
			require.Equal(t, tc.want, weightPages(Config{WeightPages: tc.field}, tc.device))
		})
	}
}

func TestWeightPagesConfig(t *testing.T) {
	err := Config{WeightPages: "huge"}.Validate()
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "WeightPages", ce.Field)
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, `weight placement "huge": want auto, map, recache or copy`)
	for _, ok := range []string{"", "auto", "map", "mmap", "recache", "copy"} {
		require.NoError(t, Config{WeightPages: ok}.Validate(), ok)
	}

	t.Setenv(mmap.ModeEnv, "bogus")
	dir := modelsDir(t)
	_, err = New(Config{ModelPath: filepath.Join(dir, "stories260K.gguf"), Device: "cpu"})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, mmap.ModeEnv+`: mmap: weight placement "bogus"`, "a bad environment variable fails the open")
}

// TestWeightPagesLogged: the load logs one line saying which page size
// the weights got, how and why.
func TestWeightPagesLogged(t *testing.T) {
	dir := modelsDir(t)
	var buf bytes.Buffer
	e, err := New(Config{
		ModelPath: filepath.Join(dir, "stories260K.gguf"), Device: "cpu", WeightPages: "map",
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
	})
	require.NoError(t, err)
	defer e.Close()
	require.Contains(t, buf.String(), `msg="engine: weights on 4 KiB pages" model=stories260K.gguf placement=map asked=map why="asked for"`,
		"a 1 MB file is too small for a 2 MiB page")
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte("engine: weights on")))
}
