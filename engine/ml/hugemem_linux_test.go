package ml

import "golang.org/x/sys/unix"

// hugeAlloc maps size bytes of anonymous memory advised for 2 MiB pages.
func hugeAlloc(size int) ([]byte, error) {
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	if err := unix.Madvise(m, unix.MADV_HUGEPAGE); err != nil {
		return nil, err
	}
	return m, nil
}
