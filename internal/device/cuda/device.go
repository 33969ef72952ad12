package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Driver constants in use.
const (
	cuStreamNonBlocking            = 0x1
	cuEventDisableTiming           = 0x2
	cuMemHostAllocPortable         = 0x1
	cuDevAttrCCMajor               = 75
	cuDevAttrCCMinor               = 76
	cuDevAttrMultiprocessorCount   = 16
	cuFuncAttrMaxDynamicSharedSize = 8
	cuJitErrorLogBuffer            = 5
	cuJitErrorLogBufferSize        = 6

	paramBytes   = 4096 // kernel argument values
	paramPtrs    = 64   // kernel argument pointers
	stagingBytes = 8 << 20
)

// kernelNames are the entry points looked up in the module at Open.
var kernelNames = []string{
	"kv_embed_f32", "kv_embed_f16", "kv_rmsnorm_f32", "kv_rmsnorm_f16", "kv_rope",
	"kv_write_f32", "kv_write_f16", "kv_write_bf16",
	"kv_attention_f32_f32", "kv_attention_f32_f16", "kv_attention_f16_f32", "kv_attention_f16_f16",
	"kv_attention_bf16_f32", "kv_attention_bf16_f16",
	"kv_silu_mul_f32", "kv_silu_mul_f16", "kv_add", "kv_f32_to_f16", "kv_f16_to_f32", "kv_f32_to_bf16", "kv_bf16_to_f32",
	"kv_fill32", "kv_scrub_pages", "kv_checksum", "kv_argmax", "kv_gemm_f32", "kv_gemm_f16",
	"kv_rand_f16", "kv_rand_f32", "kv_spin",
	// architecture operations (engine/model/arch)
	"kv_rope_neox", "kv_head_rmsnorm", "kv_bias_add", "kv_gelu_mul_f32", "kv_gelu_mul_f16", "kv_softcap", "kv_scale",
	// mixture of experts (engine/model/gpu/moe.go)
	"kv_swiglu_oai_mul_f32", "kv_swiglu_oai_mul_f16", "kv_moe_combine", "kv_moe_shared_add",
}

// Device is one GPU with its primary context, a compute stream, a copy
// stream, the kernel module and (when found) cuBLAS. Every driver call runs
// on the device's worker goroutine, which is locked to its OS thread.
type Device struct {
	api     *driverAPI
	ordinal int
	name    string
	ccMajor int
	ccMinor int
	sms     int
	total   uint64

	jobs chan job
	quit chan struct{}

	bounceMu sync.Mutex
	bounce   []*HostBuffer // idle pinned bounce buffers for Arena.Download/Upload
	wg       sync.WaitGroup
	mu       sync.Mutex // guards closed
	closed   bool

	// Worker-only state.
	ctx             uintptr
	compute         uintptr
	copy            uintptr
	mod             uintptr
	fn              map[string]uintptr
	params          unsafe.Pointer // pinned: paramBytes of values then paramPtrs pointers
	staging         unsafe.Pointer // pinned bounce buffer for Upload/Download
	blas            *blas
	module          string // what the kernels were loaded from
	blasErr         error
	pending         []*Completion
	freeEvs         []uintptr
	checksumScratch uint64 // device: digests and results for kv_checksum
	checksumCap     int64
}

type job struct {
	f    func() error
	done chan error
}

var defaultDev struct {
	once sync.Once
	dev  *Device
	err  error
}

// Default opens device 0 once per process and returns it.
func Default() (*Device, error) {
	defaultDev.once.Do(func() { defaultDev.dev, defaultDev.err = Open(0) })
	return defaultDev.dev, defaultDev.err
}

// Open starts a worker for GPU ordinal: it initializes the driver, makes
// the primary context current on the worker's thread, creates the streams,
// loads the embedded PTX and looks up every kernel. cuBLAS is optional: when
// it cannot be loaded the GEMMs use the fallback kernel and BLASError says why.
func Open(ordinal int) (*Device, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	api := drv.api
	d := &Device{api: api, ordinal: ordinal, jobs: make(chan job), quit: make(chan struct{}), fn: map[string]uintptr{}}
	ready := make(chan error, 1)
	d.wg.Add(1)
	go d.worker(ready)
	if err := <-ready; err != nil {
		d.wg.Wait()
		return nil, err
	}
	return d, nil
}

func (d *Device) worker(ready chan<- error) {
	defer d.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.init(); err != nil {
		d.teardown()
		ready <- err
		return
	}
	ready <- nil
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if len(d.pending) > 0 {
			timer.Reset(20 * time.Microsecond)
			select {
			case j := <-d.jobs:
				timer.Stop()
				j.done <- d.run(j.f)
			case <-timer.C:
			case <-d.quit:
				timer.Stop()
				d.drain()
				d.teardown()
				return
			}
		} else {
			select {
			case j := <-d.jobs:
				j.done <- d.run(j.f)
			case <-d.quit:
				d.drain()
				d.teardown()
				return
			}
		}
		d.poll()
	}
}

// run calls f, turning a panic into an error so the worker survives.
func (d *Device) run(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: panic in device job: %v", r)
		}
	}()
	return f()
}

func (d *Device) init() error {
	a := d.api
	var dev int32
	if err := a.check("cuDeviceGet", a.cuDeviceGet(&dev, int32(d.ordinal))); err != nil {
		return err
	}
	var name [256]byte
	if err := a.check("cuDeviceGetName", a.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return err
	}
	d.name = goString(&name[0])
	var v int32
	for _, at := range []struct {
		attr int32
		dst  *int
	}{{cuDevAttrCCMajor, &d.ccMajor}, {cuDevAttrCCMinor, &d.ccMinor}, {cuDevAttrMultiprocessorCount, &d.sms}} {
		if err := a.check("cuDeviceGetAttribute", a.cuDeviceGetAttribute(&v, at.attr, dev)); err != nil {
			return err
		}
		*at.dst = int(v)
	}
	if err := a.check("cuDeviceTotalMem", a.cuDeviceTotalMem(&d.total, dev)); err != nil {
		return err
	}
	if d.ccMajor < 8 {
		return fmt.Errorf("cuda: %s has compute capability %d.%d; kvwarden's PTX needs 8.0 or later", d.name, d.ccMajor, d.ccMinor)
	}
	if err := a.check("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&d.ctx, dev)); err != nil {
		return err
	}
	if err := a.check("cuCtxSetCurrent", a.cuCtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	if err := a.check("cuStreamCreate", a.cuStreamCreate(&d.compute, cuStreamNonBlocking)); err != nil {
		return err
	}
	if err := a.check("cuStreamCreate", a.cuStreamCreate(&d.copy, cuStreamNonBlocking)); err != nil {
		return err
	}
	var err error
	if d.params, err = d.hostAlloc(paramBytes + 8*paramPtrs + paramPtrs); err != nil {
		return err
	}
	if d.staging, err = d.hostAlloc(stagingBytes); err != nil {
		return err
	}
	if err := d.loadModule(); err != nil {
		return err
	}
	if os.Getenv("KVWARDEN_CUDA_NO_CUBLAS") != "" {
		d.blasErr = errors.New("cuBLAS disabled by KVWARDEN_CUDA_NO_CUBLAS")
	} else if d.blas, d.blasErr = openBLAS(d.compute, unsafe.Add(d.params, paramBytes-64)); d.blasErr != nil {
		slog.Warn("cuda: cuBLAS unavailable, GEMMs use the fallback kernel", "err", d.blasErr)
	}
	return nil
}

// loadModule loads the kernels: the embedded PTX first (the driver's JIT
// compiles it for the GPU; that needs libnvidia-ptxjitcompiler), then a
// cubin assembled by bench/gpu/build.sh for this GPU's architecture,
// kvwarden_sm<major>0.cubin in $KVWARDEN_CUDA_CUBIN_DIR.
// KVWARDEN_CUDA_MODULE=ptx or cubin forces one of the two.
func (d *Device) loadModule() error {
	ptx := ptxSM80
	ptxName := "embedded PTX (sm_80)"
	if d.ccMajor >= 9 {
		ptx, ptxName = ptxSM90, "embedded PTX (sm_90)"
	}
	mode := os.Getenv("KVWARDEN_CUDA_MODULE")
	switch mode {
	case "", "ptx", "cubin":
	default:
		return fmt.Errorf("cuda: KVWARDEN_CUDA_MODULE=%q: want ptx or cubin", mode)
	}
	var ptxErr error
	if mode != "cubin" {
		if ptxErr = d.loadImage(ptx, true, ptxName); ptxErr == nil {
			d.module = ptxName
			return d.lookupKernels()
		}
		if mode == "ptx" {
			return ptxErr
		}
	}
	cubin, err := d.findCubin()
	if err == nil {
		img, rerr := os.ReadFile(cubin)
		if rerr != nil {
			err = fmt.Errorf("cuda: %w", rerr)
		} else if err = d.loadImage(img, false, cubin); err == nil {
			d.module = cubin
			if ptxErr != nil {
				slog.Warn("cuda: the embedded PTX did not load; using the cubin", "ptx_error", ptxErr, "cubin", cubin)
			}
			return d.lookupKernels()
		}
	}
	if ptxErr != nil {
		return fmt.Errorf("%w; cubin fallback: %w", ptxErr, err)
	}
	return err
}

// findCubin names the cubin for this GPU in $KVWARDEN_CUDA_CUBIN_DIR.
func (d *Device) findCubin() (string, error) {
	dir := os.Getenv("KVWARDEN_CUDA_CUBIN_DIR")
	if dir == "" {
		return "", fmt.Errorf("cuda: no cubin: KVWARDEN_CUDA_CUBIN_DIR is not set (bench/gpu/build.sh assembles kvwarden_sm80.cubin and kvwarden_sm90.cubin)")
	}
	if d.ccMajor != 8 && d.ccMajor != 9 {
		return "", fmt.Errorf("cuda: no cubin for compute capability %d.%d (cubins exist for 8.x and 9.0)", d.ccMajor, d.ccMinor)
	}
	p := filepath.Join(dir, fmt.Sprintf("kvwarden_sm%d0.cubin", d.ccMajor))
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("cuda: cubin: %w", err)
	}
	return p, nil
}

// loadImage loads a PTX (text, NUL-terminated here) or cubin image from
// pinned memory, with the JIT error log captured into the error.
func (d *Device) loadImage(image []byte, text bool, what string) error {
	a := d.api
	n := len(image)
	if text {
		n++
	}
	img, err := d.hostAlloc(n)
	if err != nil {
		return err
	}
	defer a.cuMemFreeHost(img)
	b := unsafe.Slice((*byte)(img), n)
	copy(b, image)
	if text {
		b[n-1] = 0
	}
	// JIT options live in the parameter area: two option codes, two values,
	// and a log buffer.
	const logLen = 2048
	opts := unsafe.Slice((*int32)(d.params), 2)
	vals := unsafe.Slice((*uint64)(unsafe.Add(d.params, 8)), 2)
	logBuf := unsafe.Add(d.params, 64)
	clear(unsafe.Slice((*byte)(logBuf), logLen))
	opts[0], opts[1] = cuJitErrorLogBuffer, cuJitErrorLogBufferSize
	vals[0], vals[1] = uint64(uintptr(logBuf)), logLen-1
	if err := a.check("cuModuleLoadDataEx", a.cuModuleLoadDataEx(&d.mod, img, 2, d.params, unsafe.Add(d.params, 8))); err != nil {
		return fmt.Errorf("%w: loading the %s for a compute capability %d.%d GPU: %s", err, what, d.ccMajor, d.ccMinor, goString((*byte)(logBuf)))
	}
	return nil
}

func (d *Device) lookupKernels() error {
	a := d.api
	for _, n := range kernelNames {
		cs := append([]byte(n), 0)
		var f uintptr
		if err := a.check("cuModuleGetFunction", a.cuModuleGetFunction(&f, d.mod, &cs[0])); err != nil {
			return fmt.Errorf("%w: kernel %s in the %s", err, n, d.module)
		}
		d.fn[n] = f
	}
	return nil
}

// Module names the kernel module in use: the embedded PTX or a cubin path.
func (d *Device) Module() string { return d.module }

func (d *Device) hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := d.api.check("cuMemHostAlloc", d.api.cuMemHostAlloc(&p, uint64(n), cuMemHostAllocPortable)); err != nil {
		return nil, fmt.Errorf("%w: %d bytes of pinned host memory", err, n)
	}
	return p, nil
}

// drain waits for outstanding completions before teardown.
func (d *Device) drain() {
	if d.compute != 0 {
		d.api.cuStreamSynchronize(d.compute)
	}
	if d.copy != 0 {
		d.api.cuStreamSynchronize(d.copy)
	}
	d.poll()
}

func (d *Device) teardown() {
	a := d.api
	d.bounceMu.Lock()
	for _, h := range d.bounce {
		a.cuMemFreeHost(h.p)
		h.p = nil
	}
	d.bounce = nil
	d.bounceMu.Unlock()
	if d.blas != nil {
		d.blas.destroy(d.blas.handle)
	}
	if d.checksumScratch != 0 {
		a.cuMemFree(d.checksumScratch)
	}
	for _, e := range d.freeEvs {
		a.cuEventDestroy(e)
	}
	if d.mod != 0 {
		a.cuModuleUnload(d.mod)
	}
	for _, p := range []unsafe.Pointer{d.params, d.staging} {
		if p != nil {
			a.cuMemFreeHost(p)
		}
	}
	for _, s := range []uintptr{d.compute, d.copy} {
		if s != 0 {
			a.cuStreamDestroy(s)
		}
	}
	if d.ctx != 0 {
		var dev int32
		if a.cuDeviceGet(&dev, int32(d.ordinal)) == cudaSuccess {
			a.cuDevicePrimaryCtxRelease(dev)
		}
	}
}

// ErrClosed reports a call on a closed Device.
var ErrClosed = errors.New("cuda: device closed")

// Do runs f on the worker thread, where the context is current, and
// returns its error. f must not call Do (the worker would wait on itself).
func (d *Device) Do(f func() error) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.mu.Unlock()
	done := make(chan error, 1)
	select {
	case d.jobs <- job{f, done}:
	case <-d.quit:
		return ErrClosed
	}
	return <-done
}

// Close waits for queued work, fires pending completions and releases the
// context. Arenas and buffers must be freed first.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	close(d.quit)
	d.wg.Wait()
	return nil
}

// Name is the GPU's name, e.g. "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// ComputeCapability is the major and minor version.
func (d *Device) ComputeCapability() (int, int) { return d.ccMajor, d.ccMinor }

// SMs is the number of multiprocessors.
func (d *Device) SMs() int { return d.sms }

// TotalMem is the device memory in bytes.
func (d *Device) TotalMem() uint64 { return d.total }

// BLAS reports the cuBLAS library in use, or why there is none.
func (d *Device) BLAS() (string, error) {
	if d.blas == nil {
		return "", d.blasErr
	}
	return d.blas.path, nil
}

// ---------------------------------------------------------------- memory

// Buffer is device memory owned by the caller.
type Buffer struct {
	Ptr uint64
	Len int64
}

// Alloc allocates n bytes of device memory (on the worker).
func (d *Device) Alloc(n int64) (Buffer, error) {
	var b Buffer
	err := d.Do(func() error {
		var e error
		b, e = d.alloc(n)
		return e
	})
	return b, err
}

func (d *Device) alloc(n int64) (Buffer, error) {
	if n <= 0 {
		return Buffer{}, fmt.Errorf("cuda: allocation of %d bytes", n)
	}
	var p uint64
	if err := d.api.check("cuMemAlloc", d.api.cuMemAlloc(&p, uint64(n))); err != nil {
		var free, total uint64
		d.api.cuMemGetInfo(&free, &total)
		return Buffer{}, fmt.Errorf("%w: %d bytes requested, %d of %d free", err, n, free, total)
	}
	return Buffer{Ptr: p, Len: n}, nil
}

// Free releases b after the compute stream has finished with it.
func (d *Device) Free(b Buffer) error {
	if b.Ptr == 0 {
		return nil
	}
	return d.Do(func() error { return d.free(b) })
}

func (d *Device) free(b Buffer) error {
	if b.Ptr == 0 {
		return nil
	}
	if err := d.api.check("cuStreamSynchronize", d.api.cuStreamSynchronize(d.compute)); err != nil {
		return err
	}
	return d.api.check("cuMemFree", d.api.cuMemFree(b.Ptr))
}

// HostBuffer is pinned (page-locked) host memory: the host tier's storage
// and the source or target of asynchronous copies.
type HostBuffer struct {
	d *Device
	p unsafe.Pointer
	n int
}

// HostAlloc allocates n bytes of pinned host memory.
func (d *Device) HostAlloc(n int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: pinned allocation of %d bytes", n)
	}
	var h *HostBuffer
	err := d.Do(func() error {
		p, err := d.hostAlloc(n)
		h = &HostBuffer{d: d, p: p, n: n}
		return err
	})
	return h, err
}

// Bytes is the buffer as a byte slice; it must not be used after Free.
func (h *HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Free releases the pinned memory.
func (h *HostBuffer) Free() error {
	if h.p == nil {
		return nil
	}
	p := h.p
	h.p = nil
	return h.d.Do(func() error { return h.d.api.check("cuMemFreeHost", h.d.api.cuMemFreeHost(p)) })
}

// Pinned bounce buffers for the synchronous Arena copies: at most
// maxBounce idle ones are kept.
const (
	bounceBytes = 4 << 20
	maxBounce   = 8
)

func (d *Device) getBounce() (*HostBuffer, error) {
	d.bounceMu.Lock()
	if n := len(d.bounce); n > 0 {
		h := d.bounce[n-1]
		d.bounce = d.bounce[:n-1]
		d.bounceMu.Unlock()
		return h, nil
	}
	d.bounceMu.Unlock()
	return d.HostAlloc(bounceBytes)
}

// putBounce returns an idle bounce buffer (no copy may still use it).
func (d *Device) putBounce(h *HostBuffer) {
	d.bounceMu.Lock()
	if len(d.bounce) < maxBounce {
		d.bounce = append(d.bounce, h)
		d.bounceMu.Unlock()
		return
	}
	d.bounceMu.Unlock()
	_ = h.Free()
}

// ---------------------------------------------------------------- completions

// Completion is asynchronous device work: it completes when the CUDA event
// recorded after the work has been reached. Resources the work uses (page
// leases, pinned buffers) must be released from OnComplete or after Wait,
// never when the work was merely queued.
type Completion struct {
	ev    uintptr
	done  chan struct{}
	mu    sync.Mutex
	err   error
	cbs   []func(error)
	fired bool
}

// Done reports whether the work has completed.
func (c *Completion) Done() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Wait blocks until the work has completed and returns its error.
func (c *Completion) Wait() error {
	<-c.done
	return c.err
}

// OnComplete registers f to run once the work has completed, on a
// goroutine of its own (never on the device worker, so f may use the
// device). If the work has already completed, f runs before OnComplete returns.
func (c *Completion) OnComplete(f func(error)) {
	c.mu.Lock()
	if c.fired {
		err := c.err
		c.mu.Unlock()
		f(err)
		return
	}
	c.cbs = append(c.cbs, f)
	c.mu.Unlock()
}

func (c *Completion) fire(err error) {
	c.mu.Lock()
	c.err, c.fired = err, true
	cbs := c.cbs
	c.cbs = nil
	close(c.done)
	c.mu.Unlock()
	if len(cbs) > 0 {
		go func() {
			for _, f := range cbs {
				f(err)
			}
		}()
	}
}

// record records an event on stream and returns its Completion (worker only).
func (d *Device) record(stream uintptr) (*Completion, error) {
	var ev uintptr
	if n := len(d.freeEvs); n > 0 {
		ev, d.freeEvs = d.freeEvs[n-1], d.freeEvs[:n-1]
	} else if err := d.api.check("cuEventCreate", d.api.cuEventCreate(&ev, cuEventDisableTiming)); err != nil {
		return nil, err
	}
	if err := d.api.check("cuEventRecord", d.api.cuEventRecord(ev, stream)); err != nil {
		d.freeEvs = append(d.freeEvs, ev)
		return nil, err
	}
	c := &Completion{ev: ev, done: make(chan struct{})}
	d.pending = append(d.pending, c)
	return c, nil
}

// poll fires the completions whose events have been reached (worker only).
func (d *Device) poll() {
	keep := d.pending[:0]
	for _, c := range d.pending {
		switch r := d.api.cuEventQuery(c.ev); r {
		case cudaErrorNotReady:
			keep = append(keep, c)
		default:
			d.freeEvs = append(d.freeEvs, c.ev)
			c.fire(d.api.check("cuEventQuery", r))
		}
	}
	clear(d.pending[len(keep):])
	d.pending = keep
}

// Record returns a Completion for all work queued so far on the compute stream.
func (d *Device) Record() (*Completion, error) {
	var c *Completion
	err := d.Do(func() error {
		var e error
		c, e = d.record(d.compute)
		return e
	})
	return c, err
}

// Sync waits for all work queued on both streams.
func (d *Device) Sync() error {
	return d.Do(func() error { return d.sync() })
}

func (d *Device) sync() error {
	return errJoin(d.api.check("cuStreamSynchronize", d.api.cuStreamSynchronize(d.compute)),
		d.api.check("cuStreamSynchronize", d.api.cuStreamSynchronize(d.copy)))
}

// streamAfter makes stream wait for everything queued so far on other.
func (d *Device) streamAfter(stream, other uintptr) error {
	var ev uintptr
	if err := d.api.check("cuEventCreate", d.api.cuEventCreate(&ev, cuEventDisableTiming)); err != nil {
		return err
	}
	defer d.api.cuEventDestroy(ev)
	if err := d.api.check("cuEventRecord", d.api.cuEventRecord(ev, other)); err != nil {
		return err
	}
	return d.api.check("cuStreamWaitEvent", d.api.cuStreamWaitEvent(stream, ev, 0))
}

// ---------------------------------------------------------------- launch

// launch queues kernel name on stream (worker only). The argument values
// and pointers are written to pinned C memory; the driver copies them
// before cuLaunchKernel returns, so the area is reused by the next launch.
func (d *Device) launch(name string, grid, block Dim3, shmem int, stream uintptr, args *Args) error {
	f, ok := d.fn[name]
	if !ok {
		return fmt.Errorf("cuda: unknown kernel %s", name)
	}
	vals := unsafe.Slice((*byte)(d.params), paramBytes-64) // the top 64 bytes hold cuBLAS scalars
	ptrs := unsafe.Slice((*uint64)(unsafe.Add(d.params, paramBytes)), paramPtrs)
	if _, err := args.encode(vals, ptrs, uint64(uintptr(d.params))); err != nil {
		return fmt.Errorf("%w (kernel %s)", err, name)
	}
	if s := drv.standIn; s != nil {
		// The stand-in checks the argument sizes against the PTX (C memory:
		// the byte after the pointer array).
		sizes := unsafe.Slice((*byte)(unsafe.Add(d.params, paramBytes+8*paramPtrs)), paramPtrs)
		copy(sizes, args.size)
		s.argSizes(&sizes[0], uint32(len(args.size)))
	}
	if shmem >= 48<<10 {
		if err := d.api.check("cuFuncSetAttribute", d.api.cuFuncSetAttribute(f, cuFuncAttrMaxDynamicSharedSize, int32(shmem))); err != nil {
			return fmt.Errorf("%w: kernel %s with %d bytes of shared memory", err, name, shmem)
		}
	}
	r := d.api.cuLaunchKernel(f, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, uint32(shmem), stream,
		unsafe.Add(d.params, paramBytes), nil)
	if err := d.api.check("cuLaunchKernel", r); err != nil {
		return fmt.Errorf("%w: kernel %s grid %v block %v", err, name, grid, block)
	}
	return nil
}

// Launch queues a kernel on the compute stream from outside the worker
// (tests and tools).
func (d *Device) Launch(name string, grid, block Dim3, shmem int, args *Args) error {
	return d.Do(func() error { return d.launch(name, grid, block, shmem, d.compute, args) })
}
