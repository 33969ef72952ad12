package model

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// kvStore is the CPU forward pass's direct view of the pool's arena, in the
// pool's element type: f16 (the default, half the memory and bandwidth of
// attention), f32 (exact against float references) or the block-quantized
// q8_0 / q4_0 (about a half and a quarter of f16's bytes). Offsets are in
// arena units, as kvcache.Geometry gives them: elements, or bytes for the
// block types.
type kvStore struct {
	f32 []float32
	f16 []uint16
	q   []byte       // a block-quantized arena (q8_0 or q4_0), offsets in bytes
	qt  device.DType // its type
}

// float32Arena and uint16Arena are what the CPU forward pass needs of an
// arena: direct access to its memory. The CPU backend's arena provides both.
type float32Arena interface {
	Float32s() []float32
}

type uint16Arena interface {
	Uint16s() []uint16
}

type byteArena interface {
	Bytes() []byte
}

func newKVStore(pool *kvcache.Pool) (kvStore, error) {
	switch dt := pool.Geometry().DType; dt {
	case device.F32:
		if fa, ok := pool.Arena().(float32Arena); ok {
			return kvStore{f32: fa.Float32s()}, nil
		}
	case device.F16:
		if ha, ok := pool.Arena().(uint16Arena); ok {
			return kvStore{f16: ha.Uint16s()}, nil
		}
	case device.Q8_0, device.Q4_0:
		if ba, ok := pool.Arena().(byteArena); ok {
			return kvStore{q: ba.Bytes(), qt: dt}, nil
		}
	default:
		return kvStore{}, fmt.Errorf("%w: %v KV cache on the CPU backend (use f16, f32, q8_0 or q4_0)", ErrNotImplemented, dt)
	}
	return kvStore{}, fmt.Errorf("%w: the CPU forward pass needs a CPU arena, got %T", ErrNotImplemented, pool.Arena())
}

// put stores one K or V row at element offset off.
func (s kvStore) put(off int, row []float32) {
	if s.q != nil {
		rb := s.qt.RowBytes(len(row))
		if s.qt == device.Q8_0 {
			ml.QuantizeRowQ8_0(s.q[off:off+rb], row)
		} else {
			ml.QuantizeRowQ4_0(s.q[off:off+rb], row)
		}
		return
	}
	if s.f16 != nil {
		ml.F32sToF16s(s.f16[off:off+len(row)], row)
		return
	}
	copy(s.f32[off:off+len(row)], row)
}

// scores is ml.AttnScores over the rows at base+offs[t].
func (s kvStore) scores(dst, q []float32, base int, offs []int, scale float32) {
	switch s.qt {
	case device.Q8_0:
		ml.AttnScoresQ8_0(dst, q, s.q[base:], offs, scale)
		return
	case device.Q4_0:
		ml.AttnScoresQ4_0(dst, q, s.q[base:], offs, scale)
		return
	}
	if s.f16 != nil {
		ml.AttnScoresF16(dst, q, s.f16[base:], offs, scale)
		return
	}
	ml.AttnScores(dst, q, s.f32[base:], offs, scale)
}

// accum is ml.AttnAccum over the rows at base+offs[t].
func (s kvStore) accum(out, w []float32, base int, offs []int) {
	switch s.qt {
	case device.Q8_0:
		ml.AttnAccumQ8_0(out, w, s.q[base:], offs)
		return
	case device.Q4_0:
		ml.AttnAccumQ4_0(out, w, s.q[base:], offs)
		return
	}
	if s.f16 != nil {
		ml.AttnAccumF16(out, w, s.f16[base:], offs)
		return
	}
	ml.AttnAccum(out, w, s.f32[base:], offs)
}

// scoresGroup is scores for g consecutive query heads sharing the KV head
// at base: q and dst hold the heads back to back. Each head's scores are
// what scores gives it alone.
func (s kvStore) scoresGroup(dst, q []float32, g, base int, offs []int, scale float32) {
	switch s.qt {
	case device.Q8_0:
		ml.AttnScoresQ8_0Group(dst, q, g, s.q[base:], offs, scale)
		return
	case device.Q4_0:
		ml.AttnScoresQ4_0Group(dst, q, g, s.q[base:], offs, scale)
		return
	}
	if s.f16 != nil {
		ml.AttnScoresF16Group(dst, q, g, s.f16[base:], offs[:len(dst)/g], scale)
		return
	}
	n, d := len(dst)/g, len(q)/g
	for h := range g {
		s.scores(dst[h*n:(h+1)*n], q[h*d:(h+1)*d], base, offs, scale)
	}
}

// accumGroup is accum for g consecutive query heads sharing the KV head
// at base: out and w hold the heads back to back.
func (s kvStore) accumGroup(out, w []float32, g, base int, offs []int) {
	switch s.qt {
	case device.Q8_0:
		ml.AttnAccumQ8_0Group(out, w, g, s.q[base:], offs)
		return
	case device.Q4_0:
		ml.AttnAccumQ4_0Group(out, w, g, s.q[base:], offs)
		return
	}
	if s.f16 != nil {
		ml.AttnAccumF16Group(out, w, g, s.f16[base:], offs)
		return
	}
	n, d := len(w)/g, len(out)/g
	for h := range g {
		s.accum(out[h*d:(h+1)*d], w[h*n:(h+1)*n], base, offs)
	}
}
