//go:build unix && !linux

package mmap

import (
	"fmt"
	"os"
)

func adviseHuge([]byte) {}

// copyHuge is implemented on Linux only.
func copyHuge(*os.File, int) ([]byte, func([]byte) error, error) {
	return nil, nil, fmt.Errorf("%s=copy: %w", ModeEnv, ErrUnsupported)
}
