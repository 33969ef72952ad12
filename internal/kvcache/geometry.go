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
// are contiguous for the attention kernel.
type Geometry struct {
	PageSize int // tokens per page; 0 means DefaultPageSize
	Layers   int
	KVHeads  int
	HeadDim  int
	DType    device.DType
}

// KVDim is the number of elements of one token's K (or V) in one layer.
func (g Geometry) KVDim() int { return g.KVHeads * g.HeadDim }

// PageElems is the number of elements in a page.
func (g Geometry) PageElems() int { return g.Layers * 2 * g.PageSize * g.KVDim() }

// PageBytes is the size of a page in bytes.
func (g Geometry) PageBytes() int64 { return int64(g.PageElems()) * int64(g.DType.Size()) }

// KOffset is the element index in the arena of the first of KVDim K values
// of slot in layer of page.
func (g Geometry) KOffset(page uint32, layer, slot int) int {
	return int(page)*g.PageElems() + (layer*2*g.PageSize+slot)*g.KVDim()
}

// VOffset is KOffset for the V values.
func (g Geometry) VOffset(page uint32, layer, slot int) int {
	return int(page)*g.PageElems() + ((layer*2+1)*g.PageSize+slot)*g.KVDim()
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
	}
	return nil
}
