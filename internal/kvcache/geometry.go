package kvcache

import (
	"fmt"

	"github.com/kvwarden/kvwarden/internal/device"
)

// DefaultPageSize is the page size in tokens when Geometry.PageSize is 0.
const DefaultPageSize = 16

// Geometry is the shape of one page. One page index covers a block of
// PageSize token slots in every layer, laid out as
// [layer][K|V][slot][KVHeads*HeadDim], so a layer's K (or V) rows of a page
// are contiguous for the attention kernel; a K-only page (KOnly) is
// [layer][K][slot][KVHeads*HeadDim].
type Geometry struct {
	PageSize int // tokens per page; 0 means DefaultPageSize
	Layers   int
	KVHeads  int
	HeadDim  int
	DType    device.DType
	// KOnly gives every layer one plane (K) instead of two (K and V).
	// Latent attention (deepseek2's MLA) keeps one row per token, the
	// compressed latent and the rotated key, and reads its values from
	// that same row: a V plane would double the pool for rows nobody
	// writes or reads. In this layout VOffset is KOffset by design (the
	// values are the K rows), and WriteKV/ReadKV take no V row.
	KOnly bool
}

// Planes is the number of row planes per layer: 2 (K and V), or 1 for a
// K-only geometry.
func (g Geometry) Planes() int {
	if g.KOnly {
		return 1
	}
	return 2
}

// Runs is the number of contiguous runs of PageSize rows in a page (one
// per plane and layer), the unit of partial-page copies and checksums.
func (g Geometry) Runs() int { return g.Layers * g.Planes() }

// KVDim is the number of elements of one token's K (or V) in one layer.
func (g Geometry) KVDim() int { return g.KVHeads * g.HeadDim }

// RowUnits is the number of arena units (DType.Size bytes each) of one
// token's K (or V) in one layer: KVDim elements, or for a block-quantized
// type the bytes of its KVHeads*HeadDim/32 blocks (each head's blocks
// contiguous, so one head's row is HeadUnits units at head*HeadUnits).
func (g Geometry) RowUnits() int { return g.DType.RowBytes(g.KVDim()) / g.DType.Size() }

// HeadUnits is RowUnits for one KV head.
func (g Geometry) HeadUnits() int { return g.DType.RowBytes(g.HeadDim) / g.DType.Size() }

// RowBytes is the size in bytes of one token's K (or V) in one layer.
func (g Geometry) RowBytes() int { return g.DType.RowBytes(g.KVDim()) }

// TokenBytes is the KV memory one token takes: its rows in every layer
// and plane.
func (g Geometry) TokenBytes() int64 { return int64(g.Runs()) * int64(g.RowBytes()) }

// PageElems is the number of arena units in a page (elements, or bytes for
// a block-quantized type).
func (g Geometry) PageElems() int { return g.Runs() * g.PageSize * g.RowUnits() }

// PageBytes is the size of a page in bytes.
func (g Geometry) PageBytes() int64 { return int64(g.PageElems()) * int64(g.DType.Size()) }

// KOffset is the unit index in the arena (see RowUnits) of the first of
// KVDim K values of slot in layer of page.
func (g Geometry) KOffset(page uint32, layer, slot int) int {
	return int(page)*g.PageElems() + (layer*g.Planes()*g.PageSize+slot)*g.RowUnits()
}

// VOffset is KOffset for the V values. In a K-only geometry it is KOffset:
// the values are read from the K rows, and there is no other plane an
// offset could point into.
func (g Geometry) VOffset(page uint32, layer, slot int) int {
	if g.KOnly {
		return g.KOffset(page, layer, slot)
	}
	return int(page)*g.PageElems() + ((layer*2+1)*g.PageSize+slot)*g.RowUnits()
}

func (g Geometry) withDefaults() Geometry {
	if g.PageSize == 0 {
		g.PageSize = DefaultPageSize
	}
	return g
}

func (g Geometry) validate() error {
	switch {
	case g.PageSize <= 0 || g.PageSize > 1<<15:
		return fmt.Errorf("%w: page size %d tokens (want 1..32768)", ErrConfig, g.PageSize)
	case g.Layers <= 0 || g.KVHeads <= 0 || g.HeadDim <= 0:
		return fmt.Errorf("%w: geometry %d layers, %d kv heads, head dim %d: all must be positive", ErrConfig, g.Layers, g.KVHeads, g.HeadDim)
	case g.DType.Size() == 0:
		return fmt.Errorf("%w: dtype %s", ErrConfig, g.DType)
	case g.HeadDim%g.DType.BlockElems() != 0:
		return fmt.Errorf("%w: %s KV needs a head dim that is a multiple of %d (blocks along the head), got %d",
			ErrConfig, g.DType, g.DType.BlockElems(), g.HeadDim)
	}
	return nil
}
