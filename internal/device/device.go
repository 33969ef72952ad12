// Package device defines the memory a backend lends to kvwarden: arenas that
// hold KV pages, and the few operations the page pool needs on them (copy,
// fill, checksum, transfer to and from host memory). The CPU backend lives in
// device/cpu; the CUDA backend must fit the same interface.
package device

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"
)

// DType is the element type of KV data in an arena.
type DType uint8

const (
	F32 DType = iota
	F16
	BF16
	// Q8_0 and Q4_0 are ggml's block quantizations: blocks of 32 values
	// along a row, each an f16 scale then 32 int8 values (34 bytes) or 32
	// 4-bit values (18 bytes). Their arena unit is the byte.
	Q8_0
	Q4_0
)

// Size is the width of one arena unit in bytes: an element for the float
// types, a byte for the block-quantized ones (whose offsets count bytes).
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case Q8_0, Q4_0:
		return 1
	}
	return 0
}

// BlockElems is how many values one block of d holds (1 for the float
// types, 32 for the block-quantized ones): a row's length must be a
// multiple of it.
func (d DType) BlockElems() int {
	if d.Quantized() {
		return 32
	}
	return 1
}

// Quantized reports a block-quantized type.
func (d DType) Quantized() bool { return d == Q8_0 || d == Q4_0 }

// RowBytes is the size in bytes of a row of n values (n a multiple of
// BlockElems).
func (d DType) RowBytes(n int) int {
	switch d {
	case Q8_0:
		return n / 32 * 34
	case Q4_0:
		return n / 32 * 18
	}
	return n * d.Size()
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Q8_0:
		return "q8_0"
	case Q4_0:
		return "q4_0"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ErrOutOfRange reports an arena access outside the arena.
var ErrOutOfRange = errors.New("device: access outside arena")

// ErrFreed reports a call on an arena after Free.
var ErrFreed = errors.New("device: arena freed")

// ErrUnavailable reports a backend that cannot run on this machine.
var ErrUnavailable = errors.New("device: backend unavailable")

// Arena is one contiguous region of backend memory. Offsets and lengths are
// in bytes. Implementations check every range and return ErrOutOfRange
// rather than touching memory outside the arena.
type Arena interface {
	// Len is the size of the arena in bytes.
	Len() int64
	// Copy copies n bytes from src to dst inside the arena. Ranges must not overlap.
	Copy(dst, src, n int64) error
	// Fill writes the 32-bit word repeatedly over n bytes at off (n a multiple of 4).
	Fill(off, n int64, word uint32) error
	// Checksum hashes n bytes at off with the project's page checksum.
	Checksum(off, n int64) (uint64, error)
	// Download copies len(dst) bytes at off into host memory.
	Download(dst []byte, off int64) error
	// Upload copies src into the arena at off.
	Upload(off int64, src []byte) error
	// ScrubPages fills whole pages (page i at pages[i]*pageBytes, pageBytes
	// a multiple of 4) with word, the whole batch in one call: the page
	// pool scrubs every page released together at once instead of page by
	// page. It may return before the work is done (CUDA queues one
	// kernel): the pages must then not be reused until the Fence's Wait
	// has returned nil. A nil Fence means the work is already done (the
	// CPU's single pass).
	ScrubPages(pages []uint32, pageBytes int64, word uint32) (Fence, error)
	// Free releases the memory. Later calls fail.
	Free() error
}

// Fence is device work that may still be running.
type Fence interface {
	// Done reports, without blocking, whether the work has completed.
	Done() bool
	// Wait blocks until the work has completed and returns its error.
	Wait() error
}

// StagingScrubber is an Arena that copies through host staging buffers of
// its own (CUDA's pinned bounce buffers). With SetScrubStaging(true) it
// zeroes what a Download or Upload left in them before they are reused or
// kept idle, so the bytes of a page do not outlive the copy in host
// memory (the page pool turns it on with ZeroOnRelease).
type StagingScrubber interface {
	SetScrubStaging(on bool)
}

// Backend allocates arenas.
type Backend interface {
	Name() string
	NewArena(bytes int64) (Arena, error)
}

// ChecksumChunk is the chunk width of the page checksum in bytes.
const ChecksumChunk = 4096

// Checksum is the project's page checksum; every backend must reproduce it
// bit for bit, so a page sealed on one device verifies on another and a
// host-tier copy verifies against the device original.
//
// It is chunk-parallel rather than a single xxh3 stream: each 4 KiB chunk is
// hashed with xxh3-64 on its own and the chunk digests (little-endian) are
// hashed again. A real model's page is megabytes (Llama-8B f16, 16 tokens:
// 2 MiB), and one GPU thread walking that serially would stall every
// handoff; with chunks, one thread or warp per chunk hashes a page at memory
// speed, and the host still hashes at roughly xxh3's own rate because 4 KiB
// is long enough for its vectorised inner loop: measured on this project's
// build machine, 51 GB/s of CPU time on a 2 MiB page against 82 GB/s for a
// single xxh3 stream and 32 GB/s for copy() of the same buffer, so the check
// costs less than the copy it guards. xxh3 itself is not
// cryptographic; it only has to catch corruption and bookkeeping bugs, not
// an adversary who can already write device memory.
func Checksum(b []byte) uint64 {
	var stack [64]byte
	n := (len(b) + ChecksumChunk - 1) / ChecksumChunk
	digests := stack[:0]
	if n*8 > len(stack) {
		digests = make([]byte, 0, n*8)
	}
	for off := 0; off < len(b); off += ChecksumChunk {
		end := min(off+ChecksumChunk, len(b))
		digests = binary.LittleEndian.AppendUint64(digests, xxh3.Hash(b[off:end]))
	}
	return xxh3.Hash(digests)
}

// CombineChecksums folds the checksums of several byte ranges, in order, into
// one value. It is how a page whose written slots are not contiguous (a
// partly written page: one run per layer and K/V) is checksummed the same way
// on the device and on the host.
func CombineChecksums(sums []uint64) uint64 {
	var stack [64]byte
	buf := stack[:0]
	if len(sums)*8 > len(stack) {
		buf = make([]byte, 0, len(sums)*8)
	}
	for _, s := range sums {
		buf = binary.LittleEndian.AppendUint64(buf, s)
	}
	return xxh3.Hash(buf)
}
