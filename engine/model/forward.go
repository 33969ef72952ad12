package model

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// ErrNotImplemented marks a configuration the forward pass does not support yet.
var ErrNotImplemented = errors.New("model: not implemented")

// Runner runs the forward pass on the CPU over a page pool, interpreting
// the model's arch.Block. A Runner is owned by one goroutine (the engine's
// scheduler); its scratch buffers are reused between steps.
type Runner struct {
	w    *Weights
	cfg  Config
	pool *kvcache.Pool
	geo  kvcache.Geometry
	kv   kvStore

	ropes  []*Rope // distinct RoPE configurations
	ropeOf []int   // per layer: index into ropes and tabs
	tabs   [][]float32

	// Scratch, sized for the largest batch seen so far.
	x, xb, q, k, v, att, hb, hb2 []float32
	lx, logits, hid              []float32
	scores                       [][]float32
	offs                         [][]int
	dsts                         [][]float32  // MatMulGroup outputs
	mats                         []*ml.Matrix // MatMulGroup weights
	moe                          moeScratch
	mla                          mlaScratch
}

// rowChunk is the batch rows per work item of the row-wise steps.
const rowChunk = 8

// attnSplitCost is the least attention work (positions x heads x head
// dimension over the batch) split across the worker pool; below it the
// caller does it alone. Splitting from 1<<13 (depth 4 on the 1B shape)
// instead did not measurably help a one-sequence decode
// (BenchmarkDecodeTune): below depth 32 attention is under 1% of a step.
var attnSplitCost = 1 << 16

// NewRunner checks that pool's geometry matches the model and that its
// arena is CPU memory. It is NewRunnerContext for the model's own context
// length.
func NewRunner(w *Weights, pool *kvcache.Pool) (*Runner, error) {
	return NewRunnerContext(w, pool, w.Config.MaxContext)
}

// NewRunnerContext is NewRunner for requests of up to maxContext tokens,
// which chooses the RoPE factors of LongRoPE models (Weights.RopeFactors).
func NewRunnerContext(w *Weights, pool *kvcache.Pool, maxContext int) (*Runner, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	c := w.Config
	g := pool.Geometry()
	if g.Layers != c.Layers || g.KVHeads != c.KVHeads || g.HeadDim != c.HeadDim {
		return nil, fmt.Errorf("model: pool geometry (layers %d, kv heads %d, head dim %d) does not match the model (%d, %d, %d)",
			g.Layers, g.KVHeads, g.HeadDim, c.Layers, c.KVHeads, c.HeadDim)
	}
	if g.KOnly != c.KOnlyKV() {
		return nil, fmt.Errorf("model: pool has %d KV planes, the model needs %d (K-only for latent attention; see Config.KVGeometry)",
			g.Planes(), c.KVGeometry(g.PageSize, g.DType).Planes())
	}
	kv, err := newKVStore(pool)
	if err != nil {
		return nil, err
	}
	r := &Runner{w: w, cfg: c, pool: pool, geo: g, kv: kv}
	r.ropes, r.ropeOf = ropes(c, w.RopeFactors(maxContext))
	r.tabs = make([][]float32, len(r.ropes))
	return r, nil
}

// Config is the model's configuration.
func (r *Runner) Config() Config { return r.cfg }

// Weights is the model the runner executes.
func (r *Runner) Weights() *Weights { return r.w }

// row is one token of the flattened batch.
type row struct {
	seq   int
	pos   int
	pages []uint32
	// last is the last position the row attends to: pos, or with
	// non-causal attention the sequence's last token of this step.
	last int
}

// Forward processes every token of b in one pass: per layer one matrix
// product over all rows of all sequences, so decode tokens and prefill
// chunks share the weight stream. On error no table is advanced; pages that
// were partly written stay unwritten as far as the tables know, and callers
// fail the affected requests.
func (r *Runner) Forward(b *Batch) error {
	c := r.cfg
	// The KV arena is read and written in place; once the pool is closed
	// its memory is unmapped.
	if r.pool.Closed() {
		return fmt.Errorf("model: forward: %w", kvcache.ErrClosed)
	}
	n, err := b.Check(c.Vocab)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if r.w.Encoder != nil {
		return r.forwardEncoder(b, n)
	}

	rows := make([]row, 0, n)
	for i, s := range b.Seqs {
		pages := s.Table.Pages()
		start := s.Table.Written()
		if c.NonCausal && start > 0 {
			// Bidirectional attention needs every token's K/V of the input
			// in the same step: a chunk cannot see the tokens after it.
			return fmt.Errorf("%w: non-causal attention over an input split across steps (sequence %d starts at %d)", ErrNotImplemented, i, start)
		}
		for j := range s.Tokens {
			last := start + j
			if c.NonCausal {
				last = start + len(s.Tokens) - 1
			}
			rows = append(rows, row{seq: i, pos: start + j, pages: pages, last: last})
		}
	}

	dim, kvDim, qDim := c.Dim, c.KVDim(), c.Heads*c.HeadDim
	r.x = ml.Grow(r.x, n*dim)
	r.xb = ml.Grow(r.xb, n*max(dim, qDim))
	r.q = ml.Grow(r.q, n*qDim)
	r.k = ml.Grow(r.k, n*kvDim)
	r.v = ml.Grow(r.v, n*kvDim)
	r.att = ml.Grow(r.att, n*qDim)
	r.hb = ml.Grow(r.hb, n*c.Hidden)
	r.hb2 = ml.Grow(r.hb2, n*c.Hidden)

	ti := 0
	for _, s := range b.Seqs {
		for _, t := range s.Tokens {
			ml.Dequantize(r.x[ti*dim:(ti+1)*dim], r.w.Embed, t)
			ti++
		}
	}
	blk := c.Block
	if blk.EmbedScale != 0 {
		ml.Scale(r.x[:n*dim], blk.EmbedScale)
	}

	// Slot offsets of each row's own K/V write, resolved once for all layers.
	locs := make([]struct {
		page uint32
		slot int
	}, n)
	ti = 0
	for _, s := range b.Seqs {
		start := s.Table.Written()
		for j := range s.Tokens {
			p, sl, err := s.Table.Location(start + j)
			if err != nil {
				return fmt.Errorf("model: locate KV slot: %w", err)
			}
			locs[ti].page, locs[ti].slot = p, sl
			ti++
		}
	}

	// RoPE's cos/sin depend only on the position (and the layer's base):
	// once per row and configuration, not per layer.
	ropeDim := r.ropes[0].Dim()
	for k, rp := range r.ropes {
		r.tabs[k] = ml.Grow(r.tabs[k], n*ropeDim)
		for i := range n {
			rp.Fill(r.tabs[k][i*ropeDim:(i+1)*ropeDim], rows[i].pos)
		}
	}
	rope := ml.RoPEApply
	if blk.RopeStyle == arch.RopeNeoX {
		rope = ml.RoPEApplyNeoX
	}
	// byRows runs f over the batch rows, split across the worker pool for
	// a prompt-sized batch (the row-wise steps would otherwise run on one
	// core between the multi-threaded products); a row's arithmetic is the
	// same either way.
	byRows := func(f func(lo, hi int)) {
		if n >= 2*rowChunk {
			ml.Parallel(n, rowChunk, f)
			return
		}
		f(0, n)
	}
	norm := func(dst, src []float32, w []float32, width int) {
		byRows(func(lo, hi int) {
			for i := lo; i < hi; i++ {
				ml.RMSNorm(dst[i*width:(i+1)*width], src[i*width:(i+1)*width], w, c.NormEps)
			}
		})
	}
	residual := func() {
		byRows(func(lo, hi int) { ml.Add(r.x[lo*dim:hi*dim], r.xb[lo*dim:hi*dim]) })
	}
	bias := func(v []float32, b []float32) {
		if b == nil {
			return
		}
		for i := range n {
			ml.Add(v[i*len(b):(i+1)*len(b)], b)
		}
	}

	for l := range c.Layers {
		L := &r.w.Layers[l]
		norm(r.xb, r.x, L.AttnNorm, dim)
		if L.MLA != nil {
			r.latentAttention(l, r.xb, rows, locs, r.tabs[r.ropeOf[l]][:n*ropeDim])
		} else {
			xb := r.xb[:n*dim]
			// One hand-off to the worker pool for the three products.
			r.dsts = append(r.dsts[:0], r.q[:n*qDim], r.k[:n*kvDim], r.v[:n*kvDim])
			r.mats = append(r.mats[:0], L.Q, L.K, L.V)
			ml.MatMulGroup(r.dsts, xb, n, r.mats)
			bias(r.q[:n*qDim], L.QBias)
			bias(r.k[:n*kvDim], L.KBias)
			bias(r.v[:n*kvDim], L.VBias)
			if blk.QKNorm {
				// Per head: the same weights for every head.
				hd := c.HeadDim
				for h := range n * c.Heads {
					ml.RMSNorm(r.q[h*hd:(h+1)*hd], r.q[h*hd:(h+1)*hd], L.QNorm, c.NormEps)
				}
				for h := range n * c.KVHeads {
					ml.RMSNorm(r.k[h*hd:(h+1)*hd], r.k[h*hd:(h+1)*hd], L.KNorm, c.NormEps)
				}
			}
			tab := r.tabs[r.ropeOf[l]]
			byRows(func(lo, hi int) {
				for i := lo; i < hi; i++ {
					cs := tab[i*ropeDim : (i+1)*ropeDim]
					rope(r.q[i*qDim:(i+1)*qDim], c.HeadDim, cs)
					rope(r.k[i*kvDim:(i+1)*kvDim], c.HeadDim, cs)
					ko := r.geo.KOffset(locs[i].page, l, locs[i].slot)
					vo := r.geo.VOffset(locs[i].page, l, locs[i].slot)
					r.kv.put(ko, r.k[i*kvDim:(i+1)*kvDim])
					r.kv.put(vo, r.v[i*kvDim:(i+1)*kvDim])
				}
			})
			r.attention(l, rows)
			ml.MatMul(r.xb[:n*dim], r.att[:n*qDim], n, L.O)
			bias(r.xb[:n*dim], L.OBias)
		}
		if blk.PostNorms {
			norm(r.xb, r.xb, L.PostAttnNorm, dim)
		}
		residual()

		norm(r.xb, r.x, L.FFNNorm, dim)
		if L.MoE != nil {
			r.hb = ml.Grow(r.hb, n*dim)
			copy(r.hb[:n*dim], r.xb[:n*dim])
			r.moeFFN(L.MoE, r.hb[:n*dim], n, r.xb[:n*dim])
		} else {
			r.dsts = append(r.dsts[:0], r.hb[:n*c.Hidden], r.hb2[:n*c.Hidden])
			r.mats = append(r.mats[:0], L.Gate, L.Up)
			ml.MatMulGroup(r.dsts, r.xb[:n*dim], n, r.mats)
			hb, hb2 := r.hb, r.hb2
			act := ml.SiLUMul
			switch blk.Activation {
			case arch.GeGLU:
				act = ml.GELUMul
			case arch.SwiGLUOAI:
				act = func(g, u []float32) { ml.SwiGLUOAIMul(g, u, arch.SwiGLUOAIAlpha, arch.SwiGLUOAILimit) }
			}
			ml.Parallel(n*c.Hidden, 8192, func(lo, hi int) { act(hb[lo:hi], hb2[lo:hi]) })
			ml.MatMul(r.xb[:n*dim], r.hb[:n*c.Hidden], n, L.Down)
		}
		if blk.PostNorms {
			norm(r.xb, r.xb, L.PostFFNNorm, dim)
		}
		residual()
	}

	// Logits only for the rows that asked: the final norm and the output
	// matrix are the largest product of a decode step.
	var want []int
	end := 0
	for i, s := range b.Seqs {
		end += len(s.Tokens)
		for j := s.LogitRows(); j > 0; j-- {
			want = append(want, i, end-j)
		}
	}
	if cap(b.Logits) < len(b.Seqs) {
		b.Logits = make([][]float32, len(b.Seqs))
	}
	b.Logits = b.Logits[:len(b.Seqs)]
	clear(b.Logits)
	if m := len(want) / 2; m > 0 {
		r.lx = ml.Grow(r.lx, m*dim)
		r.logits = ml.Grow(r.logits, m*c.Vocab)
		for j := range m {
			ri := want[2*j+1]
			ml.RMSNorm(r.lx[j*dim:(j+1)*dim], r.x[ri*dim:(ri+1)*dim], r.w.Norm, c.NormEps)
		}
		ml.MatMul(r.logits[:m*c.Vocab], r.lx[:m*dim], m, r.w.Output)
		if blk.FinalSoftcap != 0 {
			ml.SoftCap(r.logits[:m*c.Vocab], blk.FinalSoftcap)
		}
		// A sequence's rows are consecutive: its slice spans all of them.
		for j := 0; j < m; {
			i := want[2*j]
			k := b.Seqs[i].LogitRows()
			b.Logits[i] = r.logits[j*c.Vocab : (j+k)*c.Vocab : (j+k)*c.Vocab]
			j += k
		}
	}

	r.hidden(b)
	b.Advance()
	return nil
}

// hidden fills b.Hidden for the sequences that asked: the output norm of
// each of their rows (what the logits are computed from), row by row with
// the same kernel whatever else is in the batch.
func (r *Runner) hidden(b *Batch) {
	c := r.cfg
	dim := c.Dim
	if cap(b.Hidden) < len(b.Seqs) {
		b.Hidden = make([][]float32, len(b.Seqs))
	}
	b.Hidden = b.Hidden[:len(b.Seqs)]
	clear(b.Hidden)
	need, start := 0, 0
	for _, s := range b.Seqs {
		if s.Hidden {
			need += len(s.Tokens)
		}
	}
	if need == 0 {
		return
	}
	r.hid = ml.Grow(r.hid, need*dim)
	at := 0
	for i, s := range b.Seqs {
		n := len(s.Tokens)
		if s.Hidden {
			out := r.hid[at*dim : (at+n)*dim : (at+n)*dim]
			for j := range n {
				ri := start + j
				ml.RMSNorm(out[j*dim:(j+1)*dim], r.x[ri*dim:(ri+1)*dim], r.w.Norm, c.NormEps)
			}
			b.Hidden[i] = out
			at += n
		}
		start += n
	}
}

// attention computes, for every row and query head, softmax(q·K·scale)·V
// over positions 0..pos of the row's own sequence (the last Block.Window
// of them on a local layer), reading K/V through its page indices. Row i's
// span ends at its own position, so it reads only slots written before
// this step or by earlier rows of this step. Query head h reads KV head
// h/(Heads/KVHeads); scores are soft-capped when the block says so.
//
// A row's K/V slot offsets are resolved once per layer; each head's scores
// and weighted V sum are then one kernel call each over all positions
// (ml.AttnScores, ml.AttnAccum), whose per-position arithmetic does not
// depend on the span, the batch or the thread split.
func (r *Runner) attention(layer int, rows []row) {
	if r.attentionBlocked(layer, rows) {
		return
	}
	c := r.cfg
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	heads := c.Heads
	group := c.Heads / c.KVHeads
	inv := c.Block.Scale(hd)
	softcap := c.Block.AttnSoftcap
	var slopes []float32
	if c.Block.ALiBi > 0 {
		slopes = arch.ALiBiSlopes(heads, c.Block.ALiBi)
	}
	sinks := r.w.Layers[layer].Sinks
	window := 0
	if c.Block.Local(layer) {
		window = c.Block.Window
	}
	ps := r.geo.PageSize
	pageElems := r.geo.PageElems()
	kvDim := r.geo.RowUnits() // arena units of a row: bytes for a quantized KV
	kLayer := r.geo.KOffset(0, layer, 0)

	// One unit is a (row, head range). Decode of a single sequence splits
	// its heads across threads; batches split by rows.
	type unit struct{ row, h0, h1 int }
	maxSpan, cost := 0, 0
	for _, rw := range rows {
		maxSpan = max(maxSpan, rw.last+1)
		cost += rw.last + 1
	}
	cost *= heads * hd
	threads := ml.Threads()
	if cost < attnSplitCost {
		threads = 1
	}
	var units []unit
	if len(rows) >= 2*threads || heads < 2 {
		for i := range rows {
			units = append(units, unit{i, 0, heads})
		}
	} else {
		per := max(1, heads/max(1, (2*threads+len(rows)-1)/len(rows)))
		for i := range rows {
			for h := 0; h < heads; h += per {
				units = append(units, unit{i, h, min(h+per, heads)})
			}
		}
	}
	threads = min(threads, len(units))

	// A row's K and V of one layer and position: one offset per position,
	// shared by all heads (each head adds its own kvHead*hd by slicing kv).
	// V sits ps*kvDim after K in the same page; latent attention's values
	// are its keys' first values, read from the K rows of its K-only pool
	// (VOffset is KOffset there).
	vDelta := r.geo.VOffset(0, layer, 0) - kLayer
	work := func(u unit, sc []float32, offs []int) {
		rw := rows[u.row]
		first, end := 0, rw.last
		switch {
		case window > 0 && c.Block.WindowSymmetric:
			first, end = max(0, rw.pos-window/2), min(rw.last, rw.pos+window/2)
		case window > 0:
			first = max(0, rw.pos+1-window)
		}
		span := end + 1 - first
		offs = offs[:span]
		for i := range span {
			t := first + i
			offs[i] = int(rw.pages[t/ps])*pageElems + kLayer + (t%ps)*kvDim
		}
		q := r.q[u.row*qDim : (u.row+1)*qDim]
		out := r.att[u.row*qDim : (u.row+1)*qDim]
		// The heads of the unit that share a KV head go together, so a
		// quantized cache expands each block once for all of them.
		for h := u.h0; h < u.h1; {
			hEnd := min(u.h1, (h/group+1)*group)
			kvh := (h / group) * r.geo.HeadUnits()
			ss := sc[(h-u.h0)*span : (hEnd-u.h0)*span]
			r.kv.scoresGroup(ss, q[h*hd:hEnd*hd], hEnd-h, kvh, offs, inv)
			for j := h; j < hEnd; j++ {
				s := sc[(j-u.h0)*span : (j-u.h0+1)*span]
				if slopes != nil {
					for t := range s {
						d := rw.pos - (first + t)
						s[t] += slopes[j] * -float32(max(d, -d))
					}
				}
				if softcap != 0 {
					ml.SoftCap(s, softcap)
				}
				if sinks != nil {
					ml.SoftmaxSink(s, sinks[j])
				}
			}
			if sinks == nil {
				ml.SoftmaxStrided(ss, span, hEnd-h, span)
			}
			o := out[h*hd : hEnd*hd]
			clear(o)
			r.kv.accumGroup(o, ss, hEnd-h, vDelta+kvh, offs)
			h = hEnd
		}
	}

	runUnits(r, units, threads, heads*maxSpan, maxSpan, work)
}

// runUnits runs work over units on the matrix products' worker pool
// (already spinning between the products of a step) rather than on
// goroutines started per layer, at most threads at a time. Each running
// call holds one of threads scratch slots: need scores and maxSpan
// offsets, grown in r and kept across steps.
func runUnits[U any](r *Runner, units []U, threads, need, maxSpan int, work func(u U, scores []float32, offs []int)) {
	if threads <= 1 {
		r.scores = growScores(r.scores, 1, need)
		r.offs = growOffs(r.offs, 1, maxSpan)
		for _, u := range units {
			work(u, r.scores[0], r.offs[0])
		}
		return
	}
	r.scores = growScores(r.scores, threads, need)
	r.offs = growOffs(r.offs, threads, maxSpan)
	inUse := make([]atomic.Bool, threads)
	ml.Parallel(len(units), 1, func(lo, hi int) {
		s := 0
		for !inUse[s].CompareAndSwap(false, true) {
			s = (s + 1) % threads
		}
		for _, u := range units[lo:hi] {
			work(u, r.scores[s], r.offs[s])
		}
		inUse[s].Store(false)
	})
}

func growOffs(s [][]int, n, span int) [][]int {
	for len(s) < n {
		s = append(s, nil)
	}
	for i := range n {
		if cap(s[i]) < span {
			s[i] = make([]int, span)
		}
		s[i] = s[i][:span]
	}
	return s
}

func growScores(s [][]float32, n, span int) [][]float32 {
	for len(s) < n {
		s = append(s, nil)
	}
	for i := range n {
		s[i] = ml.Grow(s[i], span)
	}
	return s
}
