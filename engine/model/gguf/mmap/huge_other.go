//go:build !linux

package mmap

import (
	"fmt"
	"os"
)

func adviseHuge([]byte) {}

// Recache is implemented on Linux only.
func Recache(path string) error {
	return fmt.Errorf("recache %s: %w", path, ErrUnsupported)
}

// HugeMapped is implemented on Linux only.
func HugeMapped([]byte) (huge, resident int64, err error) {
	return 0, 0, fmt.Errorf("huge-page accounting: %w", ErrUnsupported)
}

// copyHuge is implemented on Linux only.
func copyHuge(*os.File, int) ([]byte, func([]byte) error, error) {
	return nil, nil, fmt.Errorf("%s=copy: %w", ModeEnv, ErrUnsupported)
}
