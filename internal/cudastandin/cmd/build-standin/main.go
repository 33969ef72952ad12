// Command build-standin builds the GPU-free CUDA driver stand-in and prints
// the path of the shared library (for bench/gpu/rehearse.sh).
package main

import (
	"fmt"
	"os"

	"github.com/kvwarden/kvwarden/internal/cudastandin"
)

func main() {
	lib, err := cudastandin.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(lib)
}
