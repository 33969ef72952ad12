package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kvwarden/kvwarden/internal/device"
)

// Backend allocates KV arenas in device memory.
type Backend struct{ dev *Device }

var _ device.Backend = (*Backend)(nil)

// NewBackend opens the default device (GPU 0). The error wraps
// device.ErrUnavailable and says what was searched when there is no driver.
func NewBackend() (*Backend, error) {
	d, err := Default()
	if err != nil {
		return nil, err
	}
	return &Backend{dev: d}, nil
}

// BackendFor wraps an open device.
func BackendFor(d *Device) *Backend { return &Backend{dev: d} }

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device is the backend's GPU.
func (b *Backend) Device() *Device { return b.dev }

// NewArena allocates bytes (a positive multiple of 4) of device memory,
// zeroed.
func (b *Backend) NewArena(bytes int64) (device.Arena, error) { return b.dev.NewArena(bytes) }

// NewArena is NewArena returning the concrete type.
func (d *Device) NewArena(bytes int64) (*Arena, error) {
	if bytes <= 0 || bytes%4 != 0 {
		return nil, fmt.Errorf("cuda: arena of %d bytes: size must be a positive multiple of 4", bytes)
	}
	a := &Arena{d: d}
	err := d.Do(func() error {
		buf, err := d.alloc(bytes)
		if err != nil {
			return err
		}
		a.buf = buf
		if err := d.api.check("cuMemsetD32Async", d.api.cuMemsetD32Async(buf.Ptr, 0, uint64(bytes/4), d.compute)); err != nil {
			d.free(buf)
			return err
		}
		return d.api.check("cuStreamSynchronize", d.api.cuStreamSynchronize(d.compute))
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: arena of %d bytes on %s: %w", bytes, d.name, err)
	}
	return a, nil
}

// Arena is device memory holding KV pages. Its device.Arena methods are
// synchronous: they return when the device has done the work, so the page
// pool's bookkeeping (leases, scrub before reuse, seal checksums) holds as
// on the CPU. They run on the compute stream, ordered after every forward
// step already queued. The Async methods run on the copy stream and return
// a Completion; whatever they use must stay leased until it fires.
type Arena struct {
	d     *Device
	mu    sync.RWMutex
	buf   Buffer
	freed bool
	scrub atomic.Bool // zero bounce buffers after Download and Upload
	// scrubIdx holds ScrubPages' page list on the device; only the worker
	// touches it.
	scrubIdx Buffer
}

var (
	_ device.Arena           = (*Arena)(nil)
	_ device.StagingScrubber = (*Arena)(nil)
)

// SetScrubStaging makes Download and Upload zero the part of the pinned
// bounce buffer they used before it goes back to the device's idle list:
// the idle buffers would otherwise keep the last page copied through them.
func (a *Arena) SetScrubStaging(on bool) { a.scrub.Store(on) }

// releaseBounce returns h after a copy that used its first n bytes.
func (a *Arena) releaseBounce(h *HostBuffer, n int) {
	if a.scrub.Load() {
		clear(h.Bytes()[:min(n, len(h.Bytes()))])
	}
	a.d.putBounce(h)
}

// failBounce handles a failed copy through h: a copy that was queued
// before the failure may still be writing or reading h, so wait for both
// streams before h is scrubbed and reused.
func (a *Arena) failBounce(h *HostBuffer, err error) error {
	if serr := a.d.Sync(); serr != nil {
		return errors.Join(err, serr) // h is not reused: the device is in doubt
	}
	a.releaseBounce(h, len(h.Bytes()))
	return err
}

// Ptr is the arena's device address (for kernels), 0 after Free.
func (a *Arena) Ptr() uint64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.freed {
		return 0
	}
	return a.buf.Ptr
}

// Device is the arena's GPU.
func (a *Arena) Device() *Device { return a.d }

// Len is the arena size in bytes (0 after Free).
func (a *Arena) Len() int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.freed {
		return 0
	}
	return a.buf.Len
}

func (a *Arena) span(op string, off, n int64) error {
	if a.freed {
		return fmt.Errorf("cuda: %s: %w", op, device.ErrFreed)
	}
	if off < 0 || n < 0 || off > a.buf.Len || n > a.buf.Len-off {
		return fmt.Errorf("cuda: %s [%d, %d+%d) of a %d-byte arena: %w", op, off, off, n, a.buf.Len, device.ErrOutOfRange)
	}
	return nil
}

// Copy copies n bytes from src to dst inside the arena; overlapping ranges
// are refused.
func (a *Arena) Copy(dst, src, n int64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.span("copy dst", dst, n); err != nil {
		return err
	}
	if err := a.span("copy src", src, n); err != nil {
		return err
	}
	if n > 0 && dst < src+n && src < dst+n {
		return fmt.Errorf("cuda: copy of %d bytes from %d to %d: ranges overlap: %w", n, src, dst, device.ErrOutOfRange)
	}
	if n == 0 {
		return nil
	}
	return a.d.Run(func(q *Queue) error {
		if err := q.CopyDtoD(a.buf.Ptr+uint64(dst), a.buf.Ptr+uint64(src), n); err != nil {
			return err
		}
		return q.Sync()
	})
}

// Fill writes word over n bytes at off (both multiples of 4).
func (a *Arena) Fill(off, n int64, word uint32) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if off%4 != 0 || n%4 != 0 {
		return fmt.Errorf("cuda: fill [%d, +%d): offset and length must be multiples of 4: %w", off, n, device.ErrOutOfRange)
	}
	if err := a.span("fill", off, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return a.d.Run(func(q *Queue) error {
		if err := q.Memset32(a.buf.Ptr+uint64(off), word, n/4); err != nil {
			return err
		}
		return q.Sync()
	})
}

// maxGridY is the largest grid.y (and grid.z) of a launch.
const maxGridY = 65535

// ScrubPages fills whole pages (page i at pages[i]*pageBytes) with word in
// one kernel on the compute stream and returns without waiting for it: the
// Completion fires when the kernel has run. Forward steps queued later run
// after it (same stream), and so do copies (they follow the compute
// stream); the page pool still waits for the Completion before it hands a
// page out again, so a failed scrub quarantines the pages instead.
func (a *Arena) ScrubPages(pages []uint32, pageBytes int64, word uint32) (device.Fence, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if pageBytes <= 0 || pageBytes%4 != 0 {
		return nil, fmt.Errorf("cuda: scrub: page size %d bytes: %w", pageBytes, device.ErrOutOfRange)
	}
	for _, p := range pages {
		if err := a.span("scrub", int64(p)*pageBytes, pageBytes); err != nil {
			return nil, err
		}
	}
	if len(pages) == 0 {
		return nil, nil
	}
	// The page list travels through pinned memory, asynchronously, into a
	// device buffer the arena keeps: a synchronous upload would wait for
	// every forward step already queued.
	n := 4 * len(pages)
	h, err := a.d.getBounce()
	if err != nil {
		return nil, err
	}
	release := func() { a.d.putBounce(h) }
	if n > len(h.Bytes()) {
		a.d.putBounce(h)
		if h, err = a.d.HostAlloc(n); err != nil {
			return nil, err
		}
		release = func() { _ = h.Free() }
	}
	copy(h.Bytes(), unsafe.Slice((*byte)(unsafe.Pointer(&pages[0])), n))
	var c *Completion
	inDoubt := false // a queued copy may still read h
	err = a.d.Run(func(q *Queue) error {
		fail := func(err error) error {
			if serr := q.Sync(); serr != nil {
				inDoubt = true
				return errors.Join(err, serr)
			}
			return err
		}
		// The buffer is reused by later scrubs: their upload is queued on
		// the same stream, after this kernel.
		if a.scrubIdx.Len < int64(n) {
			if err := q.Free(a.scrubIdx); err != nil {
				return err
			}
			a.scrubIdx = Buffer{}
			b, err := q.Alloc(int64(n))
			if err != nil {
				return err
			}
			a.scrubIdx = b
		}
		idx := a.scrubIdx.Ptr
		if err := q.UploadAsync(idx, h, 0, n); err != nil {
			return fail(err)
		}
		// The kernel takes page i from blockIdx.y, and grid.y is at most
		// 65,535: launch the list in chunks of that many pages.
		var args Args
		words := pageBytes / 4
		for start := 0; start < len(pages); start += maxGridY {
			cnt := min(maxGridY, len(pages)-start)
			args.Reset()
			args.Ptr(a.buf.Ptr).Ptr(idx + 4*uint64(start)).I64(words).U32(word)
			g := Grid1D(words, 256, 64)
			g.Y = uint32(cnt)
			if err := q.Launch("kv_scrub_pages", g, Dim3{256, 1, 1}, 0, &args); err != nil {
				return fail(err)
			}
		}
		var err error
		if c, err = q.Record(); err != nil {
			return fail(err)
		}
		return nil
	})
	if err != nil {
		// Each failure synced the stream, so nothing queued still reads
		// h; if that sync failed too, h is never reused.
		if !inDoubt {
			release()
		}
		return nil, fmt.Errorf("cuda: scrub of %d pages: %w", len(pages), err)
	}
	c.OnComplete(func(error) { release() })
	return c, nil
}

// Checksum is device.Checksum of n bytes at off, computed on the GPU.
func (a *Arena) Checksum(off, n int64) (uint64, error) {
	s, err := a.Checksums([]int64{off}, []int64{n})
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

// Checksums hashes several ranges in one launch.
func (a *Arena) Checksums(offs, lens []int64) ([]uint64, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if len(offs) != len(lens) {
		return nil, fmt.Errorf("cuda: checksums of %d offsets and %d lengths", len(offs), len(lens))
	}
	uo, ul := make([]uint64, len(offs)), make([]uint64, len(offs))
	for i := range offs {
		if err := a.span("checksum", offs[i], lens[i]); err != nil {
			return nil, err
		}
		uo[i], ul[i] = uint64(offs[i]), uint64(lens[i])
	}
	var out []uint64
	err := a.d.Do(func() error {
		var e error
		out, e = a.d.checksums(a.buf.Ptr, uo, ul)
		return e
	})
	return out, err
}

// Download copies len(dst) bytes at off into dst. The copy runs on the
// copy stream through a pinned bounce buffer and waits for its completion
// event on the calling goroutine (a host-tier worker), not on the device
// worker, so forward steps keep being queued while a swap-out or prefix
// spill is in flight. It returns once the data has landed: the caller's
// page lease is held until the copy's event has completed (invariant 5).
func (a *Arena) Download(dst []byte, off int64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.span("download", off, int64(len(dst))); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	h, err := a.d.getBounce()
	if err != nil {
		return err
	}
	for done := 0; done < len(dst); done += len(h.Bytes()) {
		n := min(len(h.Bytes()), len(dst)-done)
		c, err := a.downloadAsync(h, 0, off+int64(done), int64(n))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			return a.failBounce(h, err)
		}
		copy(dst[done:done+n], h.Bytes()[:n])
	}
	a.releaseBounce(h, len(dst))
	return nil
}

// Upload copies src into the arena at off, through a pinned bounce buffer
// on the copy stream like Download; work queued on the compute stream after
// it returns sees the data.
func (a *Arena) Upload(off int64, src []byte) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.span("upload", off, int64(len(src))); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	h, err := a.d.getBounce()
	if err != nil {
		return err
	}
	for done := 0; done < len(src); done += len(h.Bytes()) {
		n := copy(h.Bytes(), src[done:])
		c, err := a.uploadAsync(off+int64(done), h, 0, int64(n))
		if err == nil {
			err = c.Wait() // before the bounce buffer is refilled
		}
		if err != nil {
			return a.failBounce(h, err)
		}
	}
	a.releaseBounce(h, len(src))
	return nil
}

// DownloadAsync queues a copy of n bytes at off into h[hoff:] on the copy
// stream, ordered after all work queued so far on the compute stream (the
// forward steps that wrote the pages). The page must stay leased, and h
// untouched, until the Completion fires.
func (a *Arena) DownloadAsync(h *HostBuffer, hoff int, off, n int64) (*Completion, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.downloadAsync(h, hoff, off, n)
}

func (a *Arena) downloadAsync(h *HostBuffer, hoff int, off, n int64) (*Completion, error) {
	if err := a.span("download", off, n); err != nil {
		return nil, err
	}
	if hoff < 0 || n > int64(h.n-hoff) {
		return nil, fmt.Errorf("cuda: download of %d bytes into [%d, ...) of a %d-byte host buffer: %w", n, hoff, h.n, device.ErrOutOfRange)
	}
	var c *Completion
	err := a.d.Do(func() error {
		d := a.d
		if err := d.streamAfter(d.copy, d.compute); err != nil {
			return err
		}
		if err := d.api.check("cuMemcpyDtoHAsync", d.api.cuMemcpyDtoHAsync(unsafe.Add(h.p, hoff), a.buf.Ptr+uint64(off), uint64(n), d.copy)); err != nil {
			return err
		}
		var e error
		c, e = d.record(d.copy)
		return e
	})
	return c, err
}

// UploadAsync queues a copy of h[hoff:hoff+n] to off on the copy stream.
// Work queued on the compute stream after UploadAsync returns waits for
// the copy, so a forward step never reads a page before its restore lands.
func (a *Arena) UploadAsync(off int64, h *HostBuffer, hoff int, n int64) (*Completion, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.uploadAsync(off, h, hoff, n)
}

func (a *Arena) uploadAsync(off int64, h *HostBuffer, hoff int, n int64) (*Completion, error) {
	if err := a.span("upload", off, n); err != nil {
		return nil, err
	}
	if hoff < 0 || n > int64(h.n-hoff) {
		return nil, fmt.Errorf("cuda: upload of %d bytes from [%d, ...) of a %d-byte host buffer: %w", n, hoff, h.n, device.ErrOutOfRange)
	}
	var c *Completion
	err := a.d.Do(func() error {
		d := a.d
		// The copy must also follow compute work already queued on the
		// page (a scrub of its previous generation).
		if err := d.streamAfter(d.copy, d.compute); err != nil {
			return err
		}
		if err := d.api.check("cuMemcpyHtoDAsync", d.api.cuMemcpyHtoDAsync(a.buf.Ptr+uint64(off), unsafe.Add(h.p, hoff), uint64(n), d.copy)); err != nil {
			return err
		}
		var e error
		if c, e = d.record(d.copy); e != nil {
			return e
		}
		return d.api.check("cuStreamWaitEvent", d.api.cuStreamWaitEvent(d.compute, c.ev, 0))
	})
	return c, err
}

// SpinCopyStream holds the copy stream busy for ns nanoseconds (tests use
// it to keep a copy observably in flight).
func (a *Arena) SpinCopyStream(ns uint64) error {
	return a.d.Do(func() error {
		var args Args
		args.U64(ns)
		return a.d.launch("kv_spin", Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, a.d.copy, &args)
	})
}

// Free releases the device memory after queued work on it has finished.
func (a *Arena) Free() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.freed {
		return fmt.Errorf("cuda: free: %w", device.ErrFreed)
	}
	a.freed = true
	return a.d.Do(func() error {
		if err := a.d.sync(); err != nil {
			return err
		}
		if err := a.d.free(a.scrubIdx); err != nil {
			return err
		}
		return a.d.free(a.buf)
	})
}
