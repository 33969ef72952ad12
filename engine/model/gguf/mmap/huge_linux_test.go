package mmap

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

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

func TestMapModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w")
	want := make([]byte, 3<<20+5) // not a whole number of 2 MiB pages
	for i := range want {
		want[i] = byte(i * 13)
	}
	require.NoError(t, os.WriteFile(path, want, 0o644))
	for _, tc := range []struct {
		mode, err string
	}{
		{"", ""},
		{"auto", ""},
		{"mmap", ""},
		{"map", ""},
		{"recache", ""},
		{"copy", ""},
		{"hugetlb", `KVWARDEN_WEIGHTS: mmap: weight placement "hugetlb": want auto, map, recache or copy`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv(ModeEnv, tc.mode)
			r, err := Map(path)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, r.Data)
			require.Equal(t, len(want), cap(r.Data), "the region ends where the file does")
			require.Zero(t, uintptr(unsafe.Pointer(&r.Data[0]))%hugeSize, "2 MiB-aligned, so that 2 MiB pages can map it")
			huge, resident, err := HugeMapped(r.Data)
			require.NoError(t, err)
			require.LessOrEqual(t, huge, resident)
			t.Logf("%s: %d of %d resident bytes on 2 MiB pages", tc.mode, huge, resident)
			require.NoError(t, r.Close())
		})
	}
}
