package cuda

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestStandInCatches provokes each mistake the stand-in exists to catch and
// checks that the call fails and a violation is counted. It runs only with
// KVWARDEN_CUDA_STANDIN=1 (scripts/test.sh does that).
func TestStandInCatches(t *testing.T) {
	if !StandIn() {
		t.Skip("runs against the CUDA stand-in only (KVWARDEN_CUDA_STANDIN=1)")
	}
	d, err := Default()
	require.NoError(t, err)
	buf, err := d.Alloc(4096)
	require.NoError(t, err)
	defer d.Free(buf)
	h, err := d.HostAlloc(4096)
	require.NoError(t, err)
	defer h.Free()

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"too few arguments", func() error {
			var a Args
			a.Ptr(buf.Ptr).Ptr(buf.Ptr)
			return d.Launch("kv_add", Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, &a)
		}},
		{"4-byte argument where the PTX has 8", func() error {
			var a Args
			a.Ptr(buf.Ptr).I32(16).U32(0)
			return d.Launch("kv_fill32", Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, &a)
		}},
		{"pointer outside every allocation", func() error {
			var a Args
			a.Ptr(0x1000).I64(16).U32(0) // never mapped
			return d.Launch("kv_fill32", Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, &a)
		}},
		{"block over 1024 threads", func() error {
			var a Args
			a.Ptr(buf.Ptr).I64(16).U32(0)
			return d.Launch("kv_fill32", Dim3{1, 1, 1}, Dim3{64, 32, 1}, 0, &a)
		}},
		{"grid.y over 65535", func() error {
			var a Args
			a.Ptr(buf.Ptr).I64(16).U32(0)
			return d.Launch("kv_fill32", Dim3{1, 70000, 1}, Dim3{32, 1, 1}, 0, &a)
		}},
		{"dynamic shared memory over 227 KiB", func() error {
			var a Args
			a.Ptr(buf.Ptr).I64(16).U32(0)
			return d.Launch("kv_fill32", Dim3{1, 1, 1}, Dim3{32, 1, 1}, 228<<10, &a)
		}},
		{"asynchronous copy from pageable memory", func() error {
			src := make([]byte, 64)
			return d.Do(func() error {
				return d.api.check("cuMemcpyHtoDAsync", d.api.cuMemcpyHtoDAsync(buf.Ptr, unsafe.Pointer(&src[0]), 64, d.compute))
			})
		}},
		{"copy past the end of an allocation", func() error {
			return d.Do(func() error {
				return d.api.check("cuMemcpyHtoDAsync", d.api.cuMemcpyHtoDAsync(buf.Ptr+4000, h.p, 200, d.compute))
			})
		}},
		{"call on a thread without the context", func() error {
			errc := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var p uint64
				errc <- d.api.check("cuMemAlloc", d.api.cuMemAlloc(&p, 64))
			}()
			return <-errc
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.call())
			require.Equal(t, 1, StandInTakeViolations(), "one violation counted")
		})
	}
	// A correct launch passes and counts nothing.
	var a Args
	a.Ptr(buf.Ptr).I64(16).U32(7)
	require.NoError(t, d.Launch("kv_fill32", Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, &a))
	require.NoError(t, d.Sync())
	require.Zero(t, StandInTakeViolations())
	require.Zero(t, StandInQueued())
}

// TestGPUScrubManyPages scrubs more pages than a grid has rows (grid.y is
// at most 65,535): every page is scrubbed and the pages not listed are not.
func TestGPUScrubManyPages(t *testing.T) {
	d := gpuOrSkip(t)
	const pages, pageBytes = 70_000, 16
	a, err := d.NewArena((pages + 2) * pageBytes)
	require.NoError(t, err)
	defer a.Free()
	src := make([]byte, (pages+2)*pageBytes)
	for i := range src {
		src[i] = 0xA5
	}
	require.NoError(t, a.Upload(0, src))
	list := make([]uint32, pages)
	for i := range list {
		list[i] = uint32(pages - i) // pages 1..70000, in reverse
	}
	f, err := a.ScrubPages(list, pageBytes, 0x7fc00000)
	require.NoError(t, err)
	require.NoError(t, f.Wait())
	got := make([]byte, len(src))
	require.NoError(t, a.Download(got, 0))
	require.Equal(t, src[:pageBytes], got[:pageBytes], "page 0 is not in the list")
	require.Equal(t, src[(pages+1)*pageBytes:], got[(pages+1)*pageBytes:], "the last page is not in the list")
	for p := 1; p <= pages; p++ {
		for i := p * pageBytes; i < (p+1)*pageBytes; i += 4 {
			if got[i] != 0 || got[i+1] != 0 || got[i+2] != 0xc0 || got[i+3] != 0x7f {
				t.Fatalf("page %d not scrubbed at byte %d", p, i)
			}
		}
	}
}

// TestStandInModuleFallback: the embedded PTX first, then the cubin for the
// GPU's architecture when the driver cannot compile PTX, and
// KVWARDEN_CUDA_MODULE forcing either. The stand-in's "cubin" is PTX behind
// an ELF magic number.
func TestStandInModuleFallback(t *testing.T) {
	if !StandIn() {
		t.Skip("runs against the CUDA stand-in only (KVWARDEN_CUDA_STANDIN=1)")
	}
	dir := t.TempDir()
	cubin := filepath.Join(dir, "kvwarden_sm90.cubin")
	_, sm90 := PTX()
	require.NoError(t, os.WriteFile(cubin, append(append([]byte("\x7fELF"), sm90...), 0), 0o644))

	open := func(t *testing.T, module, cubinDir string, rejectPTX bool) (string, error) {
		t.Setenv("KVWARDEN_CUDA_MODULE", module)
		t.Setenv("KVWARDEN_CUDA_CUBIN_DIR", cubinDir)
		StandInRejectPTX(rejectPTX)
		defer StandInRejectPTX(false)
		d, err := Open(0)
		if err != nil {
			return "", err
		}
		defer d.Close()
		return d.Module(), nil
	}
	for _, tc := range []struct {
		name, module, dir string
		rejectPTX         bool
		want, wantErr     string
	}{
		{"PTX by default", "", dir, false, "embedded PTX (sm_90)", ""},
		{"cubin when the PTX does not load", "", dir, true, cubin, ""},
		{"cubin forced", "cubin", dir, false, cubin, ""},
		{"PTX forced, no JIT", "ptx", dir, true, "", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
		{"no JIT and no cubin", "", "", true, "", "KVWARDEN_CUDA_CUBIN_DIR is not set"},
		{"no JIT, cubin missing", "", t.TempDir(), true, "", "kvwarden_sm90.cubin"},
		{"bad module kind", "sass", dir, false, "", "want ptx or cubin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := open(t, tc.module, tc.dir, tc.rejectPTX)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
