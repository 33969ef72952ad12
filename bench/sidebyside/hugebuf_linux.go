package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeFloats returns n float32s of anonymous memory advised onto 2 MiB
// pages, as kvwarden maps its weights (MADV_HUGEPAGE): the read bandwidth
// on 4 KiB pages is bounded by page walks, not by the memory.
func hugeFloats(n int) ([]float32, bool) {
	m, err := unix.Mmap(-1, 0, n*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, false
	}
	if unix.Madvise(m, unix.MADV_HUGEPAGE) != nil {
		_ = unix.Munmap(m)
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), n), true
}
