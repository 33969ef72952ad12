package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("hello"), 0o644))
	r, err := Map(path)
	require.NoError(t, err)
	require.Equal(t, []byte("hello"), r.Data)
	require.NoError(t, r.Close())
	require.Nil(t, r.Data)
	require.NoError(t, r.Close(), "Close is idempotent")

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	r, err = Map(empty)
	require.NoError(t, err)
	require.Empty(t, r.Data)
	require.NoError(t, r.Close())

	_, err = Map(dir)
	require.ErrorContains(t, err, "is not a regular file")
	_, err = Map(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
