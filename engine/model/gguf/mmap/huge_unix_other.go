//go:build unix && !linux

package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func adviseHuge([]byte) {}

func mapShared(f *os.File, size int) ([]byte, func([]byte) error, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, unix.Munmap, nil
}

// copyHuge is implemented on Linux only.
func copyHuge(*os.File, int) ([]byte, func([]byte) error, error) {
	return nil, nil, fmt.Errorf("%s: %w", ModeCopy, ErrUnsupported)
}

// place maps: 2 MiB pages for file mappings are requested on Linux only.
func place(_ *os.File, _ int, mode Mode) (Placement, error) {
	pl := Placement{Mode: ModeMap, Asked: mode, Reason: "2 MiB pages are requested on Linux only"}
	if mode == ModeCopy || mode == ModeRecache {
		return pl, fmt.Errorf("%s: %w", mode, ErrUnsupported)
	}
	return pl, nil
}

func placed(pl Placement, _ []byte) Placement { return pl }
