//go:build unix

package mmap

import (
	"os"
)

func mapFile(f *os.File, size int, mode Mode) ([]byte, func([]byte) error, Placement, error) {
	pl, err := place(f, size, mode)
	if err != nil {
		return nil, nil, pl, err
	}
	if pl.Mode == ModeCopy {
		data, unmap, err := copyHuge(f, size)
		if err != nil {
			return nil, nil, pl, err
		}
		return data, unmap, placed(pl, data), nil
	}
	data, unmap, err := mapShared(f, size)
	if err != nil {
		return nil, nil, pl, err
	}
	adviseHuge(data)
	return data, unmap, pl, nil
}
