package model

import (
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// KOnlyKV reports whether the model keeps one KV row per token and layer
// and reads its values from it: latent attention (Block.MLA), whose row
// is the compressed latent and the rotated key. Its pool needs no V plane.
func (c Config) KOnlyKV() bool { return c.Block.MLA.KVRank > 0 }

// KVGeometry is the page geometry of a KV pool for this model: pages of
// pageSize tokens (0: kvcache.DefaultPageSize) of dt elements, K-only for
// latent attention, so the pool holds what llama.cpp's cache holds and
// not twice it. Every pool a Runner runs on must have this shape.
func (c Config) KVGeometry(pageSize int, dt device.DType) kvcache.Geometry {
	return kvcache.Geometry{PageSize: pageSize, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: dt, KOnly: c.KOnlyKV()}
}
