package model

import (
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// Prefill attention by blocks of query rows. Row by row, every query row of
// a prompt chunk reads its sequence's whole K and V: at a depth of 16k
// positions and a head dimension of 64 that is 2 MiB per KV head, past L2,
// read again for every row. Here a unit is a block of consecutive rows of one sequence
// and one KV head: the span is cut into tiles of attnTile positions, and
// each tile's keys (then values) are used by all rows of the block, and by
// the query heads of the KV head together, while in L1. Scores, softmax
// and the weighted sum of each row and head are the row-by-row path's bit
// for bit: a score depends on its position alone, the softmax runs on the
// row's whole span as before, and the weighted sum adds the positions in
// the same order, tile after tile (ml.AttnScoresF16Strided,
// ml.AttnAccumF16Strided).

const (
	// attnBlockRows is the most query rows per unit.
	attnBlockRows = 16
	// attnTile is the positions per K/V tile: 16 KiB of f16 keys at a
	// head dimension of 64.
	attnTile = 128
)

var (
	// attnScoreBytes bounds a unit's scores: fewer rows per unit for
	// long spans and wide groups (a variable for the tests).
	attnScoreBytes = 8 << 20
	// attnBlocked turns the blocked path off for tests comparing the two.
	attnBlocked = true
)

// attentionBlocked computes attention as attention does for batches of
// many rows over an f16 cache without a sliding window, and reports false,
// having done nothing, otherwise.
func (r *Runner) attentionBlocked(layer int, rows []row) bool {
	c := r.cfg
	if !attnBlocked || r.kv.f16 == nil || len(rows) < 2*attnBlockRows || c.Block.Local(layer) && c.Block.Window > 0 {
		return false
	}
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	group := c.Heads / c.KVHeads
	inv := c.Block.Scale(hd)
	softcap := c.Block.AttnSoftcap
	var slopes []float32
	if c.Block.ALiBi > 0 {
		slopes = arch.ALiBiSlopes(c.Heads, c.Block.ALiBi)
	}
	sinks := r.w.Layers[layer].Sinks
	ps := r.geo.PageSize
	pageElems := r.geo.PageElems()
	kvDim := r.geo.RowUnits()
	kLayer := r.geo.KOffset(0, layer, 0)
	// V follows K in the same page; latent attention's K-only pool reads
	// the values from the K rows (VOffset is KOffset).
	vDelta := r.geo.VOffset(0, layer, 0) - kLayer
	kv := r.kv.f16

	// Units: blocks of consecutive rows of one sequence, by KV head; the
	// blocks of the latest (longest) rows first, so the short ones fill in
	// at the end of the parallel loop.
	type unit struct{ lo, hi, kvHead int }
	var units []unit
	maxSpan := 0
	for _, rw := range rows {
		maxSpan = max(maxSpan, rw.last+1)
	}
	blockRows := min(attnBlockRows, max(1, attnScoreBytes/(4*group*maxSpan)))
	for hi := len(rows); hi > 0; {
		lo := hi - 1
		for lo > 0 && hi-lo < blockRows && rows[lo-1].seq == rows[hi-1].seq {
			lo--
		}
		for h := range c.KVHeads {
			units = append(units, unit{lo, hi, h})
		}
		hi = lo
	}

	work := func(u unit, sc []float32, offs []int) {
		U := 0
		for _, rw := range rows[u.lo:u.hi] {
			U = max(U, rw.last+1)
		}
		pages := rows[u.lo].pages
		offs = offs[:U]
		for t := range U {
			offs[t] = int(pages[t/ps])*pageElems + kLayer + (t%ps)*kvDim
		}
		h0 := u.kvHead * group
		kvh := u.kvHead * r.geo.HeadUnits()
		kK, kV := kv[kvh:], kv[vDelta+kvh:]
		stride := group * U // one row's scores, its heads U floats apart
		for t0 := 0; t0 < U; t0 += attnTile {
			for i := u.lo; i < u.hi; i++ {
				m := min(t0+attnTile, rows[i].last+1) - t0
				if m <= 0 {
					continue
				}
				q := r.q[i*qDim+h0*hd : i*qDim+(h0+group)*hd]
				ml.AttnScoresF16Strided(sc[(i-u.lo)*stride+t0:], U, q, group, kK, offs[t0:t0+m], inv)
			}
		}
		for i := u.lo; i < u.hi; i++ {
			rw := rows[i]
			for j := range group {
				s := sc[(i-u.lo)*stride+j*U : (i-u.lo)*stride+j*U+rw.last+1]
				if slopes != nil {
					for t := range s {
						d := rw.pos - t
						s[t] += slopes[h0+j] * -float32(max(d, -d))
					}
				}
				if softcap != 0 {
					ml.SoftCap(s, softcap)
				}
				if sinks != nil {
					ml.SoftmaxSink(s, sinks[h0+j])
				}
			}
			if sinks == nil {
				ml.SoftmaxStrided(sc[(i-u.lo)*stride:], U, group, rw.last+1)
			}
			clear(r.att[i*qDim+h0*hd : i*qDim+(h0+group)*hd])
		}
		for t0 := 0; t0 < U; t0 += attnTile {
			for i := u.lo; i < u.hi; i++ {
				m := min(t0+attnTile, rows[i].last+1) - t0
				if m <= 0 {
					continue
				}
				o := r.att[i*qDim+h0*hd : i*qDim+(h0+group)*hd]
				ml.AttnAccumF16Strided(o, sc[(i-u.lo)*stride+t0:], U, group, kV, offs[t0:t0+m])
			}
		}
	}

	runUnits(r, units, min(ml.Threads(), len(units)), blockRows*group*maxSpan, maxSpan, work)
	return true
}
