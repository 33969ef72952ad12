package ml

import "fmt"

// eachPiecesPerThread is how many pieces per thread MatMulEach cuts the
// rows of all its products into at least.
const eachPiecesPerThread = 8

// minParallelQuant is the fewest activation values MatMulEach quantizes
// on the worker pool rather than alone.
const minParallelQuant = 1 << 16

// MatMulEach computes dsts[j] = xs[j]·ws[j]ᵀ for every j, each product
// with its own ns[j] activation rows: the products of a mixture-of-experts
// layer, where each expert multiplies the rows of the tokens routed to it.
// All row chunks of all products are handed to the worker pool as one job
// (an expert with few tokens would leave most threads idle on its own),
// and each expert's weights are streamed once for all its rows. Each
// output is computed by MatMul's kernels and arithmetic, so the results
// are bitwise those of separate MatMul calls, whatever the grouping.
func MatMulEach(dsts, xs [][]float32, ns []int, ws []*Matrix) {
	if len(dsts) != len(ws) || len(xs) != len(ws) || len(ns) != len(ws) {
		panic(fmt.Sprintf("ml: MatMulEach with %d outputs, %d inputs, %d row counts for %d matrices", len(dsts), len(xs), len(ns), len(ws)))
	}
	threads := Threads()
	work := 0
	for j, w := range ws {
		rb, err := w.Type.RowBytes(w.Cols)
		if err != nil {
			panic(err)
		}
		n := ns[j]
		if n < 0 || len(xs[j]) != n*w.Cols || len(dsts[j]) != n*w.Rows || len(w.Data) != w.Rows*rb {
			panic(fmt.Sprintf("ml: MatMulEach n=%d x %d dst %d with %v %dx%d (%d bytes)", n, len(xs[j]), len(dsts[j]), w.Type, w.Rows, w.Cols, len(w.Data)))
		}
		work += n * w.Rows * w.Cols
	}
	if threads == 1 || work < minParallelWork || len(ws) < 2 {
		for j, w := range ws {
			MatMul(dsts[j], xs[j], ns[j], w)
		}
		return
	}

	// Each product's activations are quantized once per format (an
	// expert's gate and up share theirs), all in one parallel pass.
	acts := make([][]byte, len(ws))
	type qjob struct{ j, lo, hi int }
	type actKey struct {
		p *float32
		n int
		f actFormat
	}
	done := map[actKey][]byte{}
	var qjobs []qjob
	qwork := 0
	for j, w := range ws {
		f := w.Type.traits().act
		if f == actF32 || w.Rows == 0 || ns[j] == 0 {
			continue
		}
		k := actKey{&xs[j][0], len(xs[j]), f}
		if a, ok := done[k]; ok {
			acts[j] = a
			continue
		}
		as := w.Cols / f.blockSize() * f.blockBytes()
		p := getBytes(ns[j] * as)
		defer byteScratch.Put(p)
		acts[j] = *p
		done[k] = acts[j]
		qwork += ns[j] * w.Cols
		for lo := 0; lo < ns[j]; lo += 8 {
			qjobs = append(qjobs, qjob{j, lo, min(lo+8, ns[j])})
		}
	}
	quant := func(lo, hi int) {
		for _, q := range qjobs[lo:hi] {
			w := ws[q.j]
			f := w.Type.traits().act
			K := w.Cols
			as := K / f.blockSize() * f.blockBytes()
			for i := q.lo; i < q.hi; i++ {
				quantizeAct(f, acts[q.j][i*as:(i+1)*as], xs[q.j][i*K:(i+1)*K])
			}
		}
	}
	// A decode step's few rows are quantized faster than the hand-off.
	if len(qjobs) > 1 && qwork >= minParallelQuant {
		parallelFor(len(qjobs), 1, threads, quant)
	} else {
		quant(0, len(qjobs))
	}

	// Row chunks sized as MatMul sizes them for a product of this shape,
	// but no smaller than the whole job's share of a piece: with many
	// small products (a decode step's 8 experts of 768 rows) there are
	// pieces enough to balance the threads, and longer pieces stream each
	// matrix in fewer, longer runs.
	type piece struct{ j, lo, hi int }
	var pieces []piece
	sumRows := 0
	for j, w := range ws {
		if ns[j] > 0 {
			sumRows += w.Rows
		}
	}
	share := (sumRows + eachPiecesPerThread*threads - 1) / (eachPiecesPerThread * threads)
	for j, w := range ws {
		R, n := w.Rows, ns[j]
		if n == 0 {
			continue
		}
		chunk := max((R+4*threads-1)/(4*threads), min(R, share))
		if acts[j] != nil {
			chunk = max(q8TileRows, (chunk+q8TileRows-1)&^(q8TileRows-1))
		} else {
			if n > 1 {
				chunk = max(chunk, tileRows(w.Cols))
			}
			chunk = max(16, (chunk+3)&^3)
		}
		for lo := 0; lo < R; lo += chunk {
			pieces = append(pieces, piece{j, lo, min(lo+chunk, R)})
		}
	}
	parallelFor(len(pieces), 1, threads, func(lo, hi int) {
		for _, p := range pieces[lo:hi] {
			w := ws[p.j]
			rb, _ := w.Type.RowBytes(w.Cols)
			if act := acts[p.j]; act != nil {
				if !matmulIntSIMD(dsts[p.j], act, ns[p.j], w, rb, p.lo, p.hi) {
					matmulIntGeneric(dsts[p.j], act, ns[p.j], w, rb, p.lo, p.hi)
				}
			} else {
				matmulRows(dsts[p.j], xs[p.j], ns[p.j], w, rb, p.lo, p.hi)
			}
		}
	})
}

// SwiGLUOAIMul computes gate = g*sigmoid(alpha*g)*(u+1) in place, with g =
// min(gate, limit) and u = clamp(up, -limit, limit): gpt-oss's expert
// activation (ggml's swiglu_oai).
func SwiGLUOAIMul(gate, up []float32, alpha, limit float32) {
	if len(gate) != len(up) {
		panic(fmt.Sprintf("ml: SwiGLUOAIMul lengths %d and %d", len(gate), len(up)))
	}
	// The exponentials go through expShift (the vector expf, bit-identical
	// to the scalar one), a block at a time, as GELUTanhSlice's: the scalar
	// expf was 4% of a gpt-oss decode step.
	var t [256]float32
	for len(gate) > 0 {
		g := gate[:min(len(gate), len(t))]
		e := t[:len(g)]
		for i, v := range g {
			e[i] = -alpha * min(v, limit)
		}
		expShift(e, 0) // expf(e - 0) = expf(e): the subtraction is exact
		for i, v := range g {
			u := max(-limit, min(up[i], limit))
			g[i] = min(v, limit) / (1 + e[i]) * (u + 1)
		}
		gate, up = gate[len(g):], up[len(g):]
	}
}
