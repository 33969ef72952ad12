//go:build !linux

package mmap

import (
	"fmt"
)

// Recache is implemented on Linux only.
func Recache(path string) error {
	return fmt.Errorf("recache %s: %w", path, ErrUnsupported)
}

// HugeMapped is implemented on Linux only.
func HugeMapped([]byte) (huge, resident int64, err error) {
	return 0, 0, fmt.Errorf("huge-page accounting: %w", ErrUnsupported)
}
