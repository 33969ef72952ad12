//go:build !amd64 || windows

package cuda

import "fmt"

// callN needs the x86-64 System V trampoline; elsewhere cublasGemmEx is not used and
// f16 GEMMs fall back to the kernel.
func callN(fn uintptr, args ...uint64) (uint64, error) {
	return 0, fmt.Errorf("cuda: calls with more than 15 arguments are only implemented on amd64")
}
