package model

import (
	"runtime"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
)

// prefetchChunk is how many bytes Prefetch reads between progress reports.
const prefetchChunk = 32 << 20

// WeightBytes is the size of the weights' tensors (a tied output matrix
// counted once).
func (w *Weights) WeightBytes() int64 {
	var n int64
	w.eachTensor(func(b []byte) { n += int64(len(b)) })
	return n
}

// Prefetch reads every page of the weights once, so that a file mapped by
// a loader is in memory before the first request rather than faulted in
// by it, and calls progress (when not nil) with the bytes read so far and
// the total, at least every 32 MiB and once at the end. For weights that
// were copied or converted into memory it only costs a pass over them.
func (w *Weights) Prefetch(progress func(done, total int64)) {
	total := w.WeightBytes()
	var done, next int64
	var sink byte
	const page = 4096
	w.eachTensor(func(b []byte) {
		for off := 0; off < len(b); off += page {
			sink ^= b[off]
			end := done + int64(min(page, len(b)-off))
			if progress != nil && end >= next {
				progress(end, total)
				next = end + prefetchChunk
			}
			done = end
		}
	})
	if progress != nil {
		progress(total, total)
	}
	runtime.KeepAlive(sink) // the reads must happen
}

// eachTensor calls f with the bytes of every distinct tensor.
func (w *Weights) eachTensor(f func([]byte)) {
	seen := map[uintptr]bool{}
	visit := func(b []byte) {
		if len(b) == 0 {
			return
		}
		p := uintptr(unsafe.Pointer(&b[0]))
		if seen[p] {
			return
		}
		seen[p] = true
		f(b)
	}
	f32 := func(v []float32) {
		if len(v) > 0 {
			visit(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
		}
	}
	if w.Embed != nil {
		visit(w.Embed.Data)
	}
	for _, l := range w.Layers {
		f32(l.AttnNorm)
		f32(l.FFNNorm)
		for _, m := range l.Matrices() {
			if m != nil {
				visit(m.Data)
			}
		}
	}
	f32(w.Norm)
	if w.Output != nil {
		visit(w.Output.Data)
	}
}

// StepBytes is what one decode step of one token streams from the
// weights: every layer's matrices (latent attention's included), of a
// mixture-of-experts layer the router, Used experts of average size and
// the shared expert, and the output matrix (of the embedding, one row, not
// counted). Benchmarks divide it by a step's time for a bandwidth.
func (w *Weights) StepBytes() int64 {
	size := func(ms ...*ml.Matrix) int64 {
		var n int64
		for _, m := range ms {
			if m != nil {
				n += int64(len(m.Data))
			}
		}
		return n
	}
	n := size(w.Output)
	for _, l := range w.Layers {
		n += size(l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
		if a := l.MLA; a != nil {
			n += size(a.QA, a.QB, a.KVA) + size(a.KB...) + size(a.VB...)
		}
		if e := l.MoE; e != nil && len(e.Gate) > 0 {
			all := size(e.Gate...) + size(e.Up...) + size(e.Down...)
			n += size(e.Router) + all*int64(w.Config.Block.MoE.Used)/int64(len(e.Gate))
			n += size(e.SharedGate, e.SharedUp, e.SharedDown)
		}
	}
	return n
}
