package cuda

import (
	"fmt"
	"unsafe"
)

// Queue issues work on the compute stream. It is handed to the function
// passed to Device.Run and is valid only during that call, on the worker
// thread; a whole forward step is queued through one Run.
type Queue struct{ d *Device }

// Run calls f with the device's Queue on the worker thread.
func (d *Device) Run(f func(q *Queue) error) error {
	return d.Do(func() error { return f(&Queue{d}) })
}

// Device is the queue's device.
func (q *Queue) Device() *Device { return q.d }

// Launch queues a kernel.
func (q *Queue) Launch(name string, grid, block Dim3, shmem int, args *Args) error {
	return q.d.launch(name, grid, block, shmem, q.d.compute, args)
}

// HasBLAS says whether GemmF32 uses cuBLAS; HasGemmEx whether GemmF16 is available.
func (q *Queue) HasBLAS() bool   { return q.d.blas != nil }
func (q *Queue) HasGemmEx() bool { return q.d.blas != nil && q.d.blas.canGemmEx() }

// GemmF32 computes y[n][out] = x[n][in]·w[out][in]ᵀ + beta·y in f32, with
// cuBLAS when available and the tiled kernel otherwise.
func (q *Queue) GemmF32(y, x, w uint64, n, out, in int, beta float32) error {
	if q.d.blas != nil {
		return q.d.blas.gemmF32(y, x, w, n, out, in, beta)
	}
	return q.gemmKernel("kv_gemm_f32", y, x, w, n, out, in, beta)
}

// GemmF16 is GemmF32 with f16 activations xh and f16 weights wh (f32
// accumulation and output); it needs cuBLAS (HasGemmEx).
func (q *Queue) GemmF16(y, xh, wh uint64, n, out, in int, beta float32) error {
	if !q.HasGemmEx() {
		return fmt.Errorf("cuda: f16 GEMM needs cublasGemmEx: %v", q.d.blasErr)
	}
	return q.d.blas.gemmF16(y, xh, wh, n, out, in, beta)
}

// GemmKernelF16W is the fallback GEMM: f32 activations, f16 weights.
func (q *Queue) GemmKernelF16W(y, x, wh uint64, n, out, in int, beta float32) error {
	return q.gemmKernel("kv_gemm_f16", y, x, wh, n, out, in, beta)
}

// GemmKernelF32 is the fallback GEMM with f32 weights (a test reference).
func (q *Queue) GemmKernelF32(y, x, w uint64, n, out, in int, beta float32) error {
	return q.gemmKernel("kv_gemm_f32", y, x, w, n, out, in, beta)
}

func (q *Queue) gemmKernel(name string, y, x, w uint64, n, out, in int, beta float32) error {
	var a Args
	a.Ptr(y).Ptr(x).Ptr(w).I32(n).I32(out).I32(in).F32(beta)
	return q.Launch(name, Dim3{uint32(CeilDiv(out, 16)), uint32(CeilDiv(n, 16)), 1}, Dim3{16, 16, 1}, 0, &a)
}

// Upload copies host bytes to device memory through the pinned staging
// buffer and waits for the copy.
func (q *Queue) Upload(dst uint64, src []byte) error { return q.d.upload(dst, src) }

// Download copies device memory to host bytes and waits for the copy.
func (q *Queue) Download(dst []byte, src uint64) error { return q.d.download(dst, src) }

// UploadAsync queues a copy from pinned memory; h must stay untouched until
// the compute stream has passed the copy (Sync or a Completion).
func (q *Queue) UploadAsync(dst uint64, h *HostBuffer, off, n int) error {
	if off < 0 || n < 0 || off+n > h.n {
		return fmt.Errorf("cuda: upload of [%d, +%d) from a %d-byte host buffer", off, n, h.n)
	}
	return q.d.api.check("cuMemcpyHtoDAsync", q.d.api.cuMemcpyHtoDAsync(dst, unsafe.Add(h.p, off), uint64(n), q.d.compute))
}

// DownloadAsync queues a copy into pinned memory.
func (q *Queue) DownloadAsync(h *HostBuffer, off int, src uint64, n int) error {
	if off < 0 || n < 0 || off+n > h.n {
		return fmt.Errorf("cuda: download of %d bytes into [%d, ...) of a %d-byte host buffer", n, off, h.n)
	}
	return q.d.api.check("cuMemcpyDtoHAsync", q.d.api.cuMemcpyDtoHAsync(unsafe.Add(h.p, off), src, uint64(n), q.d.compute))
}

// CopyDtoD queues a device-to-device copy.
func (q *Queue) CopyDtoD(dst, src uint64, n int64) error {
	return q.d.api.check("cuMemcpyDtoDAsync", q.d.api.cuMemcpyDtoDAsync(dst, src, uint64(n), q.d.compute))
}

// Memset32 queues a fill of n 32-bit words.
func (q *Queue) Memset32(dst uint64, word uint32, n int64) error {
	return q.d.api.check("cuMemsetD32Async", q.d.api.cuMemsetD32Async(dst, word, uint64(n), q.d.compute))
}

// Sync waits for the compute stream.
func (q *Queue) Sync() error {
	return q.d.api.check("cuStreamSynchronize", q.d.api.cuStreamSynchronize(q.d.compute))
}

// Record returns a Completion for the work queued so far.
func (q *Queue) Record() (*Completion, error) { return q.d.record(q.d.compute) }

// Alloc and Free manage device memory from inside Run.
func (q *Queue) Alloc(n int64) (Buffer, error) { return q.d.alloc(n) }
func (q *Queue) Free(b Buffer) error           { return q.d.free(b) }

// Timer measures GPU time between two points of the compute stream.
type Timer struct{ start, end uintptr }

// StartTimer records a timing event.
func (q *Queue) StartTimer() (*Timer, error) {
	t := &Timer{}
	a := q.d.api
	if err := a.check("cuEventCreate", a.cuEventCreate(&t.start, 0)); err != nil {
		return nil, err
	}
	if err := a.check("cuEventCreate", a.cuEventCreate(&t.end, 0)); err != nil {
		return nil, err
	}
	return t, a.check("cuEventRecord", a.cuEventRecord(t.start, q.d.compute))
}

// StopTimer records the end event, waits for it and returns milliseconds.
func (q *Queue) StopTimer(t *Timer) (float32, error) {
	a := q.d.api
	defer a.cuEventDestroy(t.start)
	defer a.cuEventDestroy(t.end)
	if err := a.check("cuEventRecord", a.cuEventRecord(t.end, q.d.compute)); err != nil {
		return 0, err
	}
	if err := a.check("cuEventSynchronize", a.cuEventSynchronize(t.end)); err != nil {
		return 0, err
	}
	var ms float32
	return ms, a.check("cuEventElapsedTime", a.cuEventElapsedTime(&ms, t.start, t.end))
}

// upload and download bounce through the pinned staging buffer (worker only).
func (d *Device) upload(dst uint64, src []byte) error {
	stg := unsafe.Slice((*byte)(d.staging), stagingBytes)
	for off := 0; off < len(src); off += stagingBytes {
		n := copy(stg, src[off:])
		if err := d.api.check("cuMemcpyHtoDAsync", d.api.cuMemcpyHtoDAsync(dst+uint64(off), d.staging, uint64(n), d.compute)); err != nil {
			return err
		}
		if err := d.api.check("cuStreamSynchronize", d.api.cuStreamSynchronize(d.compute)); err != nil {
			return err
		}
	}
	return nil
}

func (d *Device) download(dst []byte, src uint64) error {
	stg := unsafe.Slice((*byte)(d.staging), stagingBytes)
	for off := 0; off < len(dst); off += stagingBytes {
		n := min(stagingBytes, len(dst)-off)
		if err := d.api.check("cuMemcpyDtoHAsync", d.api.cuMemcpyDtoHAsync(d.staging, src+uint64(off), uint64(n), d.compute)); err != nil {
			return err
		}
		if err := d.api.check("cuStreamSynchronize", d.api.cuStreamSynchronize(d.compute)); err != nil {
			return err
		}
		copy(dst[off:off+n], stg)
	}
	return nil
}

// checksums computes device.Checksum of ranges [offs[i], offs[i]+lens[i])
// of the memory at base (worker only; waits for the result).
func (d *Device) checksums(base uint64, offs, lens []uint64) ([]uint64, error) {
	n := len(offs)
	if n == 0 {
		return nil, nil
	}
	maxChunks := uint64(1)
	for _, l := range lens {
		maxChunks = max(maxChunks, (l+4095)/4096)
	}
	// Scratch: offs, lens, out (n each), then n*maxChunks digests.
	need := int64(8 * (3*uint64(n) + uint64(n)*maxChunks))
	if need > d.checksumCap {
		if d.checksumScratch != 0 {
			if err := d.free(Buffer{Ptr: d.checksumScratch}); err != nil {
				return nil, err
			}
			d.checksumScratch, d.checksumCap = 0, 0
		}
		b, err := d.alloc(max(need, 1<<20))
		if err != nil {
			return nil, err
		}
		d.checksumScratch, d.checksumCap = b.Ptr, b.Len
	}
	host := make([]byte, 8*2*n)
	for i := range n {
		putU64(host[8*i:], offs[i])
		putU64(host[8*(n+i):], lens[i])
	}
	s := d.checksumScratch
	if err := d.upload(s, host); err != nil {
		return nil, err
	}
	var a Args
	a.Ptr(base).Ptr(s).Ptr(s + 8*uint64(n)).Ptr(s + 24*uint64(n)).U64(maxChunks).Ptr(s + 16*uint64(n))
	if err := d.launch("kv_checksum", Dim3{uint32(n), 1, 1}, Dim3{256, 1, 1}, 0, d.compute, &a); err != nil {
		return nil, err
	}
	out := make([]byte, 8*n)
	if err := d.download(out, s+16*uint64(n)); err != nil {
		return nil, err
	}
	res := make([]uint64, n)
	for i := range res {
		res[i] = getU64(out[8*i:])
	}
	return res, nil
}

// Checksums is device.Checksum of byte ranges of device memory at base.
func (q *Queue) Checksums(base uint64, offs, lens []uint64) ([]uint64, error) {
	return q.d.checksums(base, offs, lens)
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getU64(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}
