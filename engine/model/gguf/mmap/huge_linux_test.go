package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRecacheAndHugeMapped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w")
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(path, want, 0o644))
	require.NoError(t, Recache(path))

	r, err := Map(path)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, want, r.Data, "the file reads back unchanged after its cache was dropped")
	huge, resident, err := HugeMapped(r.Data[1<<20:])
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), resident, "every page was just read through the mapping")
	// Whether the filesystem caches in 2 MiB folios varies; never more
	// than what is resident.
	require.LessOrEqual(t, huge, resident)
	t.Logf("%d of %d bytes mapped with 2 MiB pages", huge, resident)

	require.ErrorIs(t, Recache(filepath.Join(dir, "missing")), os.ErrNotExist)
	require.ErrorContains(t, Recache(dir), "is not a regular file")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	require.NoError(t, Recache(empty))
}
