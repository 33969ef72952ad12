//go:build !unix

package cpu

import "unsafe"

// allocHost allocates n bytes of zeroed Go memory (no anonymous mappings
// here); release drops the reference for the garbage collector.
func allocHost(n int) ([]byte, func([]byte) error, error) {
	f := make([]float32, (n+3)/4)
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), n), func([]byte) error { return nil }, nil
}
