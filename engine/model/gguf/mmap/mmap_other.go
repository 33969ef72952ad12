//go:build !unix

package mmap

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the file into memory where mmap is not available.
func mapFile(f *os.File, size int, mode Mode) ([]byte, func([]byte) error, Placement, error) {
	pl := Placement{Mode: ModeCopy, Asked: mode, Reason: "read into memory: no mmap on this platform"}
	if mode == ModeRecache {
		return nil, nil, pl, fmt.Errorf("%s: %w", mode, ErrUnsupported)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, pl, err
	}
	return data, nil, pl, nil
}
