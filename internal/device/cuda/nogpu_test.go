package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"

	"github.com/kvwarden/kvwarden/internal/device"
)

// repoRoot is the directory holding go.mod above the package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		p := filepath.Dir(dir)
		require.NotEqual(t, p, dir, "no go.mod above the test")
		dir = p
	}
}

// clangOrSkip returns clang++-16, skipping when it is missing unless CI is
// set (CI must run the PTX checks).
func clangOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("clang++-16")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("clang++-16 is required under CI (apt-get install -y clang-16): %v", err)
		}
		t.Skipf("clang++-16 not installed: %v", err)
	}
	return p
}

func TestAvailableReportsMissingDriverCleanly(t *testing.T) {
	err := Available()
	if err == nil {
		t.Logf("CUDA driver found at %s", DriverPath())
		return
	}
	require.ErrorIs(t, err, device.ErrUnavailable)
	msg := err.Error()
	t.Logf("Available: %v", msg)
	if os.Getenv("KVWARDEN_CUDA_LIB") == "" && !strings.Contains(msg, "cuInit") && !strings.Contains(msg, "no devices") {
		require.Contains(t, msg, "libcuda.so.1")
		require.Contains(t, msg, "/usr/lib/x86_64-linux-gnu/libcuda.so.1")
		require.Contains(t, msg, "KVWARDEN_CUDA_LIB")
	}
	_, err = NewBackend()
	require.ErrorIs(t, err, device.ErrUnavailable)
	_, err = Open(0)
	require.ErrorIs(t, err, device.ErrUnavailable)
}

func TestDriverSearchHonoursEnv(t *testing.T) {
	t.Setenv("KVWARDEN_CUDA_LIB", "/nonexistent/libcuda-test.so.1")
	c := driverCandidates()
	require.Equal(t, []string{"/nonexistent/libcuda-test.so.1"}, c)
	_, err := openFirst("CUDA driver at $KVWARDEN_CUDA_LIB", c, func(uintptr) error { return nil })
	require.ErrorIs(t, err, device.ErrUnavailable)
	require.Contains(t, err.Error(), "/nonexistent/libcuda-test.so.1: not found")

	t.Setenv("KVWARDEN_CUDA_LIB", "")
	c = driverCandidates()
	require.Equal(t, "libcuda.so.1", c[0])
	require.Greater(t, len(c), 4)

	t.Setenv("KVWARDEN_CUBLAS_LIB", "/x/libcublas.so.13")
	require.Equal(t, []string{"/x/libcublas.so.13"}, cublasCandidates())
	t.Setenv("KVWARDEN_CUBLAS_LIB", "")
	bc := cublasCandidates()
	require.Equal(t, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, bc[:3])
	require.Contains(t, bc, "/usr/local/cuda/lib64/libcublas.so.13")
}

func TestDriverSearchRejectsLibraryWithoutSymbols(t *testing.T) {
	// libc loads but has no cuInit: the search must say so rather than crash.
	_, err := openFirst("CUDA driver", []string{"libc.so.6"}, func(h uintptr) error {
		var api driverAPI
		return bindAll(h, api.symbols())
	})
	require.ErrorIs(t, err, device.ErrUnavailable)
	require.Contains(t, err.Error(), "libc.so.6: symbol")
}

func TestArgsEncode(t *testing.T) {
	var a Args
	a.Ptr(0x1122334455667788).I32(-2).F32(1.5).U32(7).I64(-3).U64(9).I32(5)
	require.Equal(t, 7, a.Len())
	vals := make([]byte, 64)
	ptrs := make([]uint64, 8)
	used, err := a.encode(vals, ptrs, 0x1000)
	require.NoError(t, err)
	// ptr@0, i32@8, f32@12, u32@16, (pad) i64@24, u64@32, i32@40
	require.Equal(t, []uint64{0x1000, 0x1008, 0x100c, 0x1010, 0x1018, 0x1020, 0x1028, 0}, ptrs)
	require.Equal(t, 44, used)
	require.Equal(t, uint64(0x1122334455667788), binary.LittleEndian.Uint64(vals[0:]))
	require.Equal(t, uint32(0xfffffffe), binary.LittleEndian.Uint32(vals[8:]))
	require.Equal(t, uint32(0x3fc00000), binary.LittleEndian.Uint32(vals[12:]))
	require.Equal(t, uint32(7), binary.LittleEndian.Uint32(vals[16:]))
	require.Equal(t, uint64(0xfffffffffffffffd), binary.LittleEndian.Uint64(vals[24:]))
	require.Equal(t, uint64(9), binary.LittleEndian.Uint64(vals[32:]))
	require.Equal(t, uint32(5), binary.LittleEndian.Uint32(vals[40:]))

	_, err = a.encode(make([]byte, 16), ptrs, 0)
	require.Error(t, err)
	_, err = a.encode(vals, make([]uint64, 3), 0)
	require.Error(t, err)
	require.Panics(t, func() { new(Args).I32(1 << 40) })
	a.Reset()
	require.Equal(t, 0, a.Len())
}

func TestGridSizing(t *testing.T) {
	require.Equal(t, Dim3{1, 1, 1}, Grid1D(0, 256, 100))
	require.Equal(t, Dim3{1, 1, 1}, Grid1D(256, 256, 100))
	require.Equal(t, Dim3{2, 1, 1}, Grid1D(257, 256, 100))
	require.Equal(t, Dim3{100, 1, 1}, Grid1D(1<<40, 256, 100))
	require.Panics(t, func() { Grid1D(1, 0, 1) })
	require.Equal(t, 3, CeilDiv(33, 16))
	require.Equal(t, 2, CeilDiv(32, 16))
	for n, want := range map[int]int{1: 32, 32: 32, 33: 64, 64: 64, 2048: 1024, 100000: 1024} {
		require.Equal(t, want, BlockFor(n), "BlockFor(%d)", n)
	}
}

func TestPTXHasEveryKernel(t *testing.T) {
	sm80, sm90 := PTX()
	for _, p := range [][]byte{sm80, sm90} {
		require.NotEmpty(t, p)
		for _, k := range kernelNames {
			require.Contains(t, string(p), ".visible .entry "+k+"(", "kernel %s missing from the embedded PTX", k)
		}
	}
	require.Contains(t, string(sm80), ".target sm_80")
	require.Contains(t, string(sm90), ".target sm_90")
}

// TestPTXCurrent regenerates the PTX with clang-16 and compares it with
// the committed, embedded files (what scripts/check-ptx.sh does in CI).
func TestPTXCurrent(t *testing.T) {
	clangOrSkip(t)
	root := repoRoot(t)
	dir := t.TempDir()
	out, err := exec.Command("bash", filepath.Join(root, "kernels", "build-ptx.sh"), dir).CombinedOutput()
	require.NoError(t, err, "build-ptx.sh: %s", out)
	sm80, sm90 := PTX()
	for name, want := range map[string][]byte{"kvwarden_sm80.ptx": sm80, "kvwarden_sm90.ptx": sm90} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s is stale: run `go generate ./internal/device/cuda` and commit the result", name)
	}
}

// TestChecksumHostC compiles the checksum code the kernel uses
// (kernels/xxh3.h) for the host and checks it against device.Checksum and
// xxh3.Hash on random inputs of every length class.
func TestChecksumHostC(t *testing.T) {
	clang := clangOrSkip(t)
	root := repoRoot(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "checksum_host")
	out, err := exec.Command(clang, "-O2", "-std=c++17", "-I", filepath.Join(root, "kernels"),
		filepath.Join(root, "internal", "device", "cuda", "testdata", "checksum_host.cc"), "-o", bin).CombinedOutput()
	require.NoError(t, err, "compiling the host checksum: %s", out)

	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 96, 97, 127, 128, 129, 200, 239, 240, 241,
		255, 256, 257, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 12345, 65536, 2 << 20, 2<<20 + 3}
	for range 20 {
		lengths = append(lengths, rng.IntN(40000))
	}
	var files []string
	var data [][]byte
	for i, n := range lengths {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		// An offset slice exercises the unaligned loads.
		if i%3 == 1 && n > 0 {
			b = append([]byte{0}, b...)[1:]
		}
		f := filepath.Join(dir, fmt.Sprintf("in%d", i))
		require.NoError(t, os.WriteFile(f, b, 0o644))
		files, data = append(files, f), append(data, b)
	}
	res, err := exec.Command(bin, files...).Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(res)), "\n")
	require.Len(t, lines, len(files))
	for i, l := range lines {
		want := fmt.Sprintf("%016x %016x", xxh3.Hash(data[i]), device.Checksum(data[i]))
		require.Equal(t, want, l, "length %d", len(data[i]))
	}
}
