// Package cpu is the host-memory backend: arenas are anonymous memory
// mappings outside the Go heap (returned to the OS by Free), aligned for
// float32, so the CPU forward pass can read and write K/V in
// place through Float32s while the page pool uses the generic Arena methods.
package cpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/kvwarden/kvwarden/internal/device"
)

// Backend allocates host-memory arenas.
type Backend struct{}

// New returns the CPU backend.
func New() device.Backend { return Backend{} }

// Name is "cpu".
func (Backend) Name() string { return "cpu" }

// NewArena allocates bytes of zeroed host memory. bytes must be a positive
// multiple of 4 so the arena can be viewed as float32s.
func (Backend) NewArena(bytes int64) (device.Arena, error) {
	return NewArena(bytes)
}

// NewArena is NewArena returning the concrete type. The memory comes from
// an anonymous mapping outside the Go heap (where the platform has one),
// so Free returns it to the operating system at once rather than whenever
// the garbage collector and scavenger get to it; untouched pages of a
// large arena cost no resident memory.
func NewArena(bytes int64) (*Arena, error) {
	if bytes <= 0 || bytes%4 != 0 {
		return nil, fmt.Errorf("cpu: arena of %d bytes: size must be a positive multiple of 4", bytes)
	}
	if bytes/4 > int64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("cpu: arena of %d bytes does not fit this platform", bytes)
	}
	b, release, err := allocHost(int(bytes))
	if err != nil {
		return nil, fmt.Errorf("cpu: arena of %d bytes: %w", bytes, err)
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), bytes/4)
	return &Arena{f: f, b: b, release: release}, nil
}

// Arena is a host-memory arena. The RWMutex only orders Free against the
// other calls: callers that use disjoint ranges run concurrently, and
// ordering accesses to the same range is the page pool's job (leases).
type Arena struct {
	mu      sync.RWMutex
	f       []float32
	b       []byte
	release func([]byte) error
	freed   bool
}

var _ device.Arena = (*Arena)(nil)

// Float32s returns the arena as float32s, or nil after Free. The slice
// aliases the arena; it must not be used after Free.
func (a *Arena) Float32s() []float32 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.freed {
		return nil
	}
	return a.f
}

// Uint16s returns the arena as 16-bit words (f16 or bf16 KV), or nil after
// Free. The slice aliases the arena; it must not be used after Free.
func (a *Arena) Uint16s() []uint16 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.freed {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&a.b[0])), len(a.b)/2)
}

// Bytes returns the arena as bytes, or nil after Free.
func (a *Arena) Bytes() []byte {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.freed {
		return nil
	}
	return a.b
}

// Len is the arena size in bytes (0 after Free).
func (a *Arena) Len() int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return int64(len(a.b))
}

// span checks [off, off+n) and returns it; the caller holds a.mu.
func (a *Arena) span(op string, off, n int64) ([]byte, error) {
	if a.freed {
		return nil, fmt.Errorf("cpu: %s: %w", op, device.ErrFreed)
	}
	if off < 0 || n < 0 || off > int64(len(a.b)) || n > int64(len(a.b))-off {
		return nil, fmt.Errorf("cpu: %s [%d, %d+%d) of a %d-byte arena: %w", op, off, off, n, len(a.b), device.ErrOutOfRange)
	}
	return a.b[off : off+n], nil
}

// Copy copies n bytes from src to dst. Overlapping ranges are refused
// because a device copy engine would not define their result either.
func (a *Arena) Copy(dst, src, n int64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	d, err := a.span("copy dst", dst, n)
	if err != nil {
		return err
	}
	s, err := a.span("copy src", src, n)
	if err != nil {
		return err
	}
	if n > 0 && dst < src+n && src < dst+n {
		return fmt.Errorf("cpu: copy of %d bytes from %d to %d: ranges overlap: %w", n, src, dst, device.ErrOutOfRange)
	}
	copy(d, s)
	return nil
}

// Fill writes word over n bytes at off; off and n must be multiples of 4.
func (a *Arena) Fill(off, n int64, word uint32) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if off%4 != 0 || n%4 != 0 {
		return fmt.Errorf("cpu: fill [%d, +%d): offset and length must be multiples of 4: %w", off, n, device.ErrOutOfRange)
	}
	if _, err := a.span("fill", off, n); err != nil {
		return err
	}
	fillWords(a.f[off/4:(off+n)/4], word)
	return nil
}

// fillWords writes the bit pattern word into every element of f.
func fillWords(f []float32, word uint32) {
	if word == 0 {
		clear(f)
		return
	}
	if len(f) == 0 {
		return
	}
	// Doubling copies run at memcpy speed instead of one store per word.
	f[0] = *(*float32)(unsafe.Pointer(&word))
	for i := 1; i < len(f); i *= 2 {
		copy(f[i:], f[:i])
	}
}

// ScrubPages fills each listed page with word in one pass, after checking
// every range first so a bad index scrubs nothing. It is synchronous: the
// Fence is always nil.
func (a *Arena) ScrubPages(pages []uint32, pageBytes int64, word uint32) (device.Fence, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if pageBytes <= 0 || pageBytes%4 != 0 {
		return nil, fmt.Errorf("cpu: scrub: page size %d bytes: %w", pageBytes, device.ErrOutOfRange)
	}
	for _, p := range pages {
		if _, err := a.span("scrub", int64(p)*pageBytes, pageBytes); err != nil {
			return nil, err
		}
	}
	w := pageBytes / 4
	for _, p := range pages {
		fillWords(a.f[int64(p)*w:(int64(p)+1)*w], word)
	}
	return nil, nil
}

// Checksum hashes n bytes at off with device.Checksum.
func (a *Arena) Checksum(off, n int64) (uint64, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	s, err := a.span("checksum", off, n)
	if err != nil {
		return 0, err
	}
	return device.Checksum(s), nil
}

// Download copies len(dst) bytes at off into dst.
func (a *Arena) Download(dst []byte, off int64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	s, err := a.span("download", off, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

// Upload copies src into the arena at off.
func (a *Arena) Upload(off int64, src []byte) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	d, err := a.span("upload", off, int64(len(src)))
	if err != nil {
		return err
	}
	copy(d, src)
	return nil
}

// Free returns the memory to the operating system; every later call fails
// with device.ErrFreed. Slices obtained from Float32s, Uint16s or Bytes
// must not be used afterwards (the page pool's Close runs only after the
// forward pass has stopped).
func (a *Arena) Free() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.freed {
		return fmt.Errorf("cpu: free: %w", device.ErrFreed)
	}
	b := a.b
	a.freed, a.f, a.b = true, nil, nil
	if err := a.release(b); err != nil {
		return fmt.Errorf("cpu: free: %w", err)
	}
	return nil
}

// Access runs f over the n bytes at off in place, with the arena held
// against Free: what a host-side consumer of a page (the page pool's
// sealed host tier) uses instead of Download or Upload, to read or write
// the page without a staging copy. f must not keep the slice.
func (a *Arena) Access(off, n int64, f func([]byte) error) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	s, err := a.span("access", off, n)
	if err != nil {
		return err
	}
	return f(s[:n:n])
}
