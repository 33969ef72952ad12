//go:build unix

package cpu

import "golang.org/x/sys/unix"

// allocHost maps n bytes of zeroed anonymous memory; release unmaps it.
func allocHost(n int) ([]byte, func([]byte) error, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	return b, unix.Munmap, nil
}
