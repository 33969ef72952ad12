// Package mmap maps files read-only into memory. It is what the GGUF and
// llama2.c loaders use so that weights are read in place, not copied.
//
// On Unix the file is mapped with mmap(2) (PROT_READ, MAP_SHARED); elsewhere
// it is read into memory, which keeps the same API.
package mmap

import (
	"errors"
	"fmt"
	"os"
)

// ModeEnv names the environment variable that chooses how Map loads a
// file on Unix: "mmap" (the default) maps it; "copy" (Linux) reads it into
// anonymous memory advised for 2 MiB pages and made read-only, so the
// weights are on 2 MiB pages whatever state the file's page cache is in
// (decode streams every weight once per token, and with 4 KiB pages it
// runs 1.2-1.4x slower: bench/RESULTS.md, "Decode step overhead"). The
// copy costs a read of the file at load and is not shared with other
// processes mapping the same file; resident memory is about the same.
const ModeEnv = "KVWARDEN_WEIGHTS"

// ErrUnsupported is returned by the huge-page helpers (Recache,
// HugeMapped, ModeEnv=copy) where the platform has no transparent huge
// pages for them (everywhere but Linux).
var ErrUnsupported = errors.New("mmap: not supported on this platform")

// Region is a read-only view of a whole file. Data must not be written,
// and must not be used after Close.
type Region struct {
	Data   []byte
	unmap  func([]byte) error
	closed bool
}

// Map maps the file at path. An empty file gives an empty Region.
func Map(path string) (*Region, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("mmap: %s is not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return &Region{}, nil
	}
	if int64(int(size)) != size || size < 0 {
		return nil, fmt.Errorf("mmap: %s is %d bytes, too large for this platform", path, size)
	}
	data, unmap, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, err)
	}
	return &Region{Data: data, unmap: unmap}, nil
}

// Close releases the mapping. It is safe to call more than once.
func (r *Region) Close() error {
	if r == nil || r.closed {
		return nil
	}
	r.closed = true
	data := r.Data
	r.Data = nil
	if r.unmap == nil || data == nil {
		return nil
	}
	return r.unmap(data)
}
