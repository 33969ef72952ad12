package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Args is a kernel's argument list in declaration order. The driver reads
// kernelParams as an array of pointers, one per argument, each pointing at
// the argument's value; Args records the values and their sizes, and
// encode lays them out, naturally aligned, in memory the driver may read
// (C memory, never Go memory holding Go pointers).
type Args struct {
	vals []uint64
	size []uint8
}

// Ptr appends a device pointer.
func (a *Args) Ptr(p uint64) *Args { return a.add(p, 8) }

// I32 appends an int.
func (a *Args) I32(v int) *Args {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("cuda: kernel argument %d overflows int32", v))
	}
	return a.add(uint64(uint32(int32(v))), 4)
}

// U32 appends an unsigned int.
func (a *Args) U32(v uint32) *Args { return a.add(uint64(v), 4) }

// I64 appends a long long.
func (a *Args) I64(v int64) *Args { return a.add(uint64(v), 8) }

// U64 appends an unsigned long long.
func (a *Args) U64(v uint64) *Args { return a.add(v, 8) }

// F32 appends a float.
func (a *Args) F32(v float32) *Args { return a.add(uint64(math.Float32bits(v)), 4) }

func (a *Args) add(v uint64, n uint8) *Args {
	a.vals = append(a.vals, v)
	a.size = append(a.size, n)
	return a
}

// Len is the number of arguments.
func (a *Args) Len() int { return len(a.vals) }

// Reset empties the list for reuse.
func (a *Args) Reset() { a.vals, a.size = a.vals[:0], a.size[:0] }

// encode writes the values into vals (each aligned to its size) and, into
// ptrs, the address of each value given that vals starts at address base.
// It returns the number of value bytes used.
func (a *Args) encode(vals []byte, ptrs []uint64, base uint64) (int, error) {
	if len(a.vals) > len(ptrs) {
		return 0, fmt.Errorf("cuda: %d kernel arguments, at most %d", len(a.vals), len(ptrs))
	}
	off := 0
	for i, v := range a.vals {
		n := int(a.size[i])
		off = (off + n - 1) &^ (n - 1)
		if off+n > len(vals) {
			return 0, fmt.Errorf("cuda: kernel arguments need more than %d bytes", len(vals))
		}
		switch n {
		case 4:
			binary.LittleEndian.PutUint32(vals[off:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(vals[off:], v)
		}
		ptrs[i] = base + uint64(off)
		off += n
	}
	return off, nil
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Grid1D sizes a 1-D grid-stride launch over n elements with block
// threads, capped at maxBlocks (the kernels loop over the rest). It is at
// least 1 block so a launch over 0 elements is still valid.
func Grid1D(n int64, block, maxBlocks int) Dim3 {
	if block <= 0 {
		panic("cuda: non-positive block size")
	}
	b := (n + int64(block) - 1) / int64(block)
	b = max(1, min(b, int64(maxBlocks)))
	return Dim3{uint32(b), 1, 1}
}

// CeilDiv is ceil(a/b) for positive b.
func CeilDiv(a, b int) int { return (a + b - 1) / b }

// BlockFor picks a power-of-two block size of at least 32 and at most 1024
// threads for a row-wise kernel over n elements per row.
func BlockFor(n int) int {
	b := 32
	for b < n && b < 1024 {
		b *= 2
	}
	return b
}
