package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kvwarden/kvwarden/internal/device"
)

// result is a CUresult or a cublasStatus_t.
type result = uint32

const (
	cudaSuccess       result = 0
	cudaErrorNotReady result = 600
)

// Driver entry points in use. Each is bound with purego at load time.
type driverAPI struct {
	cuInit                    func(flags uint32) result
	cuDriverGetVersion        func(v *int32) result
	cuGetErrorName            func(r result, s **byte) result
	cuDeviceGetCount          func(n *int32) result
	cuDeviceGet               func(d *int32, ordinal int32) result
	cuDeviceGetName           func(name *byte, n int32, d int32) result
	cuDeviceGetAttribute      func(v *int32, attr int32, d int32) result
	cuDeviceTotalMem          func(b *uint64, d int32) result
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, d int32) result
	cuDevicePrimaryCtxRelease func(d int32) result
	cuCtxSetCurrent           func(ctx uintptr) result
	cuCtxSynchronize          func() result
	cuMemGetInfo              func(free, total *uint64) result
	cuMemAlloc                func(p *uint64, n uint64) result
	cuMemFree                 func(p uint64) result
	cuMemHostAlloc            func(p *unsafe.Pointer, n uint64, flags uint32) result
	cuMemFreeHost             func(p unsafe.Pointer) result
	cuMemsetD32Async          func(p uint64, v uint32, n uint64, s uintptr) result
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) result
	cuMemcpyDtoDAsync         func(dst, src uint64, n uint64, s uintptr) result
	cuStreamCreate            func(s *uintptr, flags uint32) result
	cuStreamDestroy           func(s uintptr) result
	cuStreamSynchronize       func(s uintptr) result
	cuStreamWaitEvent         func(s, e uintptr, flags uint32) result
	cuEventCreate             func(e *uintptr, flags uint32) result
	cuEventDestroy            func(e uintptr) result
	cuEventRecord             func(e, s uintptr) result
	cuEventQuery              func(e uintptr) result
	cuEventSynchronize        func(e uintptr) result
	cuEventElapsedTime        func(ms *float32, start, end uintptr) result
	cuModuleLoadDataEx        func(m *uintptr, image unsafe.Pointer, n uint32, opts unsafe.Pointer, vals unsafe.Pointer) result
	cuModuleUnload            func(m uintptr) result
	cuModuleGetFunction       func(f *uintptr, m uintptr, name *byte) result
	cuFuncSetAttribute        func(f uintptr, attr int32, v int32) result
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, shmem uint32, s uintptr, params unsafe.Pointer, extra unsafe.Pointer) result
}

// symbols maps each field to its exported name (the _v2 names where the
// driver versions them).
func (a *driverAPI) symbols() map[string]any {
	return map[string]any{
		"cuInit": &a.cuInit, "cuDriverGetVersion": &a.cuDriverGetVersion, "cuGetErrorName": &a.cuGetErrorName,
		"cuDeviceGetCount": &a.cuDeviceGetCount, "cuDeviceGet": &a.cuDeviceGet, "cuDeviceGetName": &a.cuDeviceGetName,
		"cuDeviceGetAttribute": &a.cuDeviceGetAttribute, "cuDeviceTotalMem_v2": &a.cuDeviceTotalMem,
		"cuDevicePrimaryCtxRetain": &a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRelease_v2": &a.cuDevicePrimaryCtxRelease,
		"cuCtxSetCurrent": &a.cuCtxSetCurrent, "cuCtxSynchronize": &a.cuCtxSynchronize, "cuMemGetInfo_v2": &a.cuMemGetInfo,
		"cuMemAlloc_v2": &a.cuMemAlloc, "cuMemFree_v2": &a.cuMemFree, "cuMemHostAlloc": &a.cuMemHostAlloc,
		"cuMemFreeHost": &a.cuMemFreeHost, "cuMemsetD32Async": &a.cuMemsetD32Async,
		"cuMemcpyHtoDAsync_v2": &a.cuMemcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &a.cuMemcpyDtoHAsync,
		"cuMemcpyDtoDAsync_v2": &a.cuMemcpyDtoDAsync, "cuStreamCreate": &a.cuStreamCreate,
		"cuStreamDestroy_v2": &a.cuStreamDestroy, "cuStreamSynchronize": &a.cuStreamSynchronize,
		"cuStreamWaitEvent": &a.cuStreamWaitEvent, "cuEventCreate": &a.cuEventCreate,
		"cuEventDestroy_v2": &a.cuEventDestroy, "cuEventRecord": &a.cuEventRecord, "cuEventQuery": &a.cuEventQuery,
		"cuEventSynchronize": &a.cuEventSynchronize, "cuEventElapsedTime": &a.cuEventElapsedTime,
		"cuModuleLoadDataEx": &a.cuModuleLoadDataEx, "cuModuleUnload": &a.cuModuleUnload,
		"cuModuleGetFunction": &a.cuModuleGetFunction, "cuFuncSetAttribute": &a.cuFuncSetAttribute,
		"cuLaunchKernel": &a.cuLaunchKernel,
	}
}

// Error is a failed CUDA driver or cuBLAS call.
type Error struct {
	Call string // the API function
	Code uint32 // CUresult or cublasStatus_t
	Name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
}

var drv struct {
	once    sync.Once
	api     *driverAPI
	path    string
	err     error
	standIn *standInAPI // non-nil when the driver is the test stand-in
}

// driverCandidates is the search list for libcuda: $KVWARDEN_CUDA_LIB alone
// when it is set, otherwise the loader's own search for libcuda.so.1
// (LD_LIBRARY_PATH, ld.so.cache) and then the usual install locations.
func driverCandidates() []string {
	if p := os.Getenv("KVWARDEN_CUDA_LIB"); p != "" {
		return []string{p}
	}
	c := []string{"libcuda.so.1"}
	for _, dir := range []string{
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
		"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib", "/usr/local/cuda/compat",
	} {
		c = append(c, filepath.Join(dir, "libcuda.so.1"))
	}
	return c
}

// openFirst dlopens the first candidate that loads and has every symbol
// in syms; the error lists what was tried and why each failed.
func openFirst(what string, cands []string, bind func(handle uintptr) error) (string, error) {
	var tried []string
	for _, c := range cands {
		if strings.Contains(c, "/") {
			if _, err := os.Stat(c); err != nil {
				tried = append(tried, c+": not found")
				continue
			}
		}
		h, err := dlopen(c)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		if err := bind(h); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			_ = dlclose(h)
			continue
		}
		return c, nil
	}
	return "", fmt.Errorf("%w: no usable %s; searched %s", device.ErrUnavailable, what, strings.Join(tried, "; "))
}

// bindAll binds every symbol in syms from handle, or fails naming the
// first missing one.
func bindAll(h uintptr, syms map[string]any) error {
	for name, fp := range syms {
		addr, err := dlsym(h, name)
		if err != nil || addr == 0 {
			return fmt.Errorf("symbol %s missing", name)
		}
		purego.RegisterFunc(fp, addr)
	}
	return nil
}

// systemSupported says whether the CUDA backend can run on goos: it loads
// libcuda.so.1 with dlopen, so Linux only (WSL included). Elsewhere the
// engine runs on the CPU and --device cuda fails with this error.
func systemSupported(goos string) error {
	if goos != "linux" {
		return fmt.Errorf("%w: CUDA is not supported on this system (%s): the CUDA backend loads libcuda on Linux only; use the CPU device", device.ErrUnavailable, goos)
	}
	return nil
}

func loadDriver() (*driverAPI, error) {
	drv.once.Do(func() {
		if drv.err = systemSupported(runtime.GOOS); drv.err != nil {
			return
		}
		api := &driverAPI{}
		cands := driverCandidates()
		what := "CUDA driver (libcuda.so.1; set KVWARDEN_CUDA_LIB to its path)"
		if os.Getenv("KVWARDEN_CUDA_LIB") != "" {
			what = "CUDA driver at $KVWARDEN_CUDA_LIB"
		}
		var handle uintptr
		drv.path, drv.err = openFirst(what, cands, func(h uintptr) error {
			handle = h
			return bindAll(h, api.symbols())
		})
		if drv.err == nil {
			drv.api = api
			drv.standIn = bindStandIn(handle)
		}
	})
	return drv.api, drv.err
}

// check turns a CUresult into an error carrying its name.
func (a *driverAPI) check(call string, r result) error {
	if r == cudaSuccess {
		return nil
	}
	name := "CUDA_ERROR_UNKNOWN_CODE"
	var s *byte
	if a.cuGetErrorName(r, &s) == cudaSuccess && s != nil {
		name = goString(s)
	}
	return &Error{Call: call, Code: r, Name: name}
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

var avail struct {
	once  sync.Once
	err   error
	count int
}

// Available reports whether CUDA can be used: the driver library loads,
// cuInit succeeds and there is at least one device. The error says what
// was searched and what failed, and wraps device.ErrUnavailable.
func Available() error {
	avail.once.Do(func() {
		api, err := loadDriver()
		if err != nil {
			avail.err = err
			return
		}
		if err := api.check("cuInit", api.cuInit(0)); err != nil {
			avail.err = fmt.Errorf("%w: %s loaded from %s, but %w", device.ErrUnavailable, "the CUDA driver", drv.path, err)
			return
		}
		var n int32
		if err := api.check("cuDeviceGetCount", api.cuDeviceGetCount(&n)); err != nil {
			avail.err = fmt.Errorf("%w: %w", device.ErrUnavailable, err)
			return
		}
		if n == 0 {
			avail.err = fmt.Errorf("%w: the CUDA driver (%s) reports no devices", device.ErrUnavailable, drv.path)
			return
		}
		avail.count = int(n)
	})
	return avail.err
}

// DriverPath is the path of the loaded libcuda ("" before a successful load).
func DriverPath() string {
	if _, err := loadDriver(); err != nil {
		return ""
	}
	return drv.path
}

// errJoin joins non-nil errors.
func errJoin(errs ...error) error { return errors.Join(errs...) }
