// Package cudastandin builds kvwarden's GPU-free CUDA driver stand-in
// (internal/device/cuda/testdata/standin/standin.cc) and points the CUDA
// backend at it, so the host side of the TestGPU* tests runs on machines
// without a GPU. The stand-in checks launches, pointers, contexts and
// pinned memory; it computes no kernel (see cuda.StandIn).
package cudastandin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Env turns the stand-in on for a test binary when set to 1.
const Env = "KVWARDEN_CUDA_STANDIN"

// source is standin.cc, found beside this package's source in the module.
func source() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cudastandin: cannot locate the module source")
	}
	src := filepath.Join(filepath.Dir(file), "..", "..", "internal", "device", "cuda", "testdata", "standin", "standin.cc")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("cudastandin: stand-in source: %w", err)
	}
	return src, nil
}

// Build compiles the stand-in (once per source version; it is cached in
// the temporary directory) and returns the path of the shared library.
func Build() (string, error) {
	src, err := source()
	if err != nil {
		return "", err
	}
	inc := filepath.Join(filepath.Dir(src), "..", "..", "..", "..", "..", "kernels")
	h := sha256.New()
	for _, f := range []string{src, filepath.Join(inc, "xxh3.h"), filepath.Join(inc, "common.h")} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	sum := h.Sum(nil)
	dir := filepath.Join(os.TempDir(), "kvwarden-standin-"+hex.EncodeToString(sum[:8]))
	lib := filepath.Join(dir, "libcuda.so.1")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cxx := ""
	for _, c := range []string{os.Getenv("CXX"), "c++", "g++", "clang++-16", "clang++"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		return "", fmt.Errorf("cudastandin: no C++ compiler (c++, g++ or clang++) to build the stand-in")
	}
	tmp, err := os.CreateTemp(dir, "build-*.so")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	out, err := exec.Command(cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-Wall", "-I", inc, "-o", tmp.Name(), src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cudastandin: %s: %w\n%s", cxx, err, out)
	}
	// Rename is atomic: test binaries of several packages may build at once.
	if err := os.Rename(tmp.Name(), lib); err != nil {
		return "", err
	}
	return lib, nil
}

// Main runs a package's tests; with KVWARDEN_CUDA_STANDIN=1 it first builds
// the stand-in and makes it the CUDA driver and cuBLAS, and afterwards fails
// the run if the stand-in counted any violation. violations is
// cuda.StandInViolations (passed in so package cuda itself can use Main).
func Main(m *testing.M, violations func() int) int {
	if os.Getenv(Env) != "1" {
		return m.Run()
	}
	lib, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("KVWARDEN_CUDA_LIB", lib)
	os.Setenv("KVWARDEN_CUBLAS_LIB", lib)
	code := m.Run()
	if n := violations(); n > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the CUDA stand-in counted %d violation(s); see the VIOLATION lines above\n", n)
		return 1
	}
	return code
}
