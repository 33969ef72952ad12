//go:build unix

package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(f *os.File, size int) ([]byte, func([]byte) error, error) {
	switch m := os.Getenv(ModeEnv); m {
	case "", "mmap":
	case "copy":
		return copyHuge(f, size)
	default:
		return nil, nil, fmt.Errorf("%s=%q: want mmap or copy", ModeEnv, m)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	adviseHuge(data)
	return data, unix.Munmap, nil
}
