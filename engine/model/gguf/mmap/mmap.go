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

// ErrUnsupported is returned by the huge-page helpers (Recache,
// HugeMapped, ModeCopy, ModeRecache) where the platform has no transparent huge
// pages for them (everywhere but Linux).
var ErrUnsupported = errors.New("mmap: not supported on this platform")

// Region is a read-only view of a whole file. Data must not be written,
// and must not be used after Close.
type Region struct {
	Data []byte
	// Placement says how the bytes were placed (mapped, recached or
	// copied) and on which page size, for the loader's log line.
	Placement Placement

	unmap  func([]byte) error
	closed bool
}

// Map maps the file at path with the default Options (the ModeEnv
// environment variable, else ModeAuto). An empty file gives an empty
// Region.
func Map(path string) (*Region, error) { return MapWith(path, Options{}) }

// MapWith maps the file at path as o says.
func MapWith(path string, o Options) (*Region, error) {
	mode, err := o.mode()
	if err != nil {
		return nil, err
	}
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
		return &Region{Placement: Placement{Mode: ModeMap, Asked: mode, Reason: "empty file"}}, nil
	}
	if int64(int(size)) != size || size < 0 {
		return nil, fmt.Errorf("mmap: %s is %d bytes, too large for this platform", path, size)
	}
	data, unmap, pl, err := mapFile(f, int(size), mode)
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, err)
	}
	return &Region{Data: data, unmap: unmap, Placement: pl}, nil
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
