package ml

import "fmt"

// MatMulGroup computes dsts[j] = x·ws[j]ᵀ for every j, as MatMul does for
// each, for products that share the activation rows x (a layer's Q, K and
// V, or its gate and up projections): the rows of all of them are split
// across the worker pool in one hand-off instead of one per product, and
// the activations are quantized once per activation format. Each output is
// computed by the same kernels and arithmetic as MatMul's (which do not
// depend on how rows are split across threads), so the results are
// bitwise those of separate MatMul calls.
func MatMulGroup(dsts [][]float32, x []float32, n int, ws []*Matrix) {
	if len(dsts) != len(ws) {
		panic(fmt.Sprintf("ml: MatMulGroup with %d outputs for %d matrices", len(dsts), len(ws)))
	}
	threads := Threads()
	work := 0
	for j, w := range ws {
		rb, err := w.Type.RowBytes(w.Cols)
		if err != nil {
			panic(err)
		}
		if n < 0 || len(x) != n*w.Cols || len(dsts[j]) != n*w.Rows || len(w.Data) != w.Rows*rb {
			panic(fmt.Sprintf("ml: MatMulGroup n=%d x %d dst %d with %v %dx%d (%d bytes)", n, len(x), len(dsts[j]), w.Type, w.Rows, w.Cols, len(w.Data)))
		}
		work += n * w.Rows * w.Cols
	}
	if tb := tokenBlock(n, groupRowBytes(ws)); tb < n {
		sub := make([][]float32, len(ws))
		K := ws[0].Cols
		for i0 := 0; i0 < n; i0 += tb {
			i1 := min(i0+tb, n)
			for j, w := range ws {
				sub[j] = dsts[j][i0*w.Rows : i1*w.Rows]
			}
			MatMulGroup(sub, x[i0*K:i1*K], i1-i0, ws)
		}
		return
	}
	if threads == 1 || work < minParallelWork || len(ws) < 2 || n == 0 {
		for j, w := range ws {
			MatMul(dsts[j], x, n, w)
		}
		return
	}

	// Activations quantized once per format (the formats of a group are
	// usually one; a few at most).
	type quantized struct {
		f   actFormat
		act *[]byte
	}
	var qs []quantized
	acts := make([][]byte, len(ws))
	for j, w := range ws {
		f := w.Type.traits().act
		if f == actF32 || w.Rows == 0 {
			continue
		}
		for _, q := range qs {
			if q.f == f {
				acts[j] = *q.act
			}
		}
		if acts[j] != nil {
			continue
		}
		K := w.Cols
		as := K / f.blockSize() * f.blockBytes()
		p := getBytes(n * as)
		defer byteScratch.Put(p)
		act := *p
		quant := func(lo, hi int) {
			for i := lo; i < hi; i++ {
				quantizeAct(f, act[i*as:(i+1)*as], x[i*K:(i+1)*K])
			}
		}
		if n >= 8 {
			parallelFor(n, (n+2*threads-1)/(2*threads), threads, quant)
		} else {
			quant(0, n)
		}
		qs = append(qs, quantized{f, p})
		acts[j] = act
	}

	if n == 1 && guidedChunks {
		matVecGroupGuided(dsts, x, ws, acts, threads)
		return
	}

	// The row chunks of every product, sized as MatMul sizes them, run as
	// the items of one parallel job.
	type piece struct{ j, lo, hi int }
	var pieces []piece
	for j, w := range ws {
		R := w.Rows
		chunk := (R + chunksPerThread*threads - 1) / (chunksPerThread * threads)
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
				if !matmulIntSIMD(dsts[p.j], act, n, w, rb, p.lo, p.hi) {
					matmulIntGeneric(dsts[p.j], act, n, w, rb, p.lo, p.hi)
				}
			} else {
				matmulRows(dsts[p.j], x, n, w, rb, p.lo, p.hi)
			}
		}
	})
}

// matVecGroupGuided runs the one-row products of a group as one guided
// job (parallelForGuided) over their rows laid end to end, each product's
// first row at a multiple of the alignment its kernels split rows at (16:
// the integer kernels' tiles; 4 for the float ones), so the pieces shrink
// towards the end of the last product rather than of each.
func matVecGroupGuided(dsts [][]float32, x []float32, ws []*Matrix, acts [][]byte, threads int) {
	const align = q8TileRows
	offs := make([]int, len(ws)+1)
	minRows := 0
	for j, w := range ws {
		offs[j+1] = (offs[j] + w.Rows + align - 1) / align * align
		rb, _ := w.Type.RowBytes(w.Cols)
		minRows = max(minRows, guidedMinRows(rb, align))
	}
	parallelForGuided(offs[len(ws)], minRows, align, threads, func(lo, hi int) {
		for j, w := range ws {
			a, b := max(lo, offs[j])-offs[j], min(hi, offs[j]+w.Rows)-offs[j]
			if a >= b {
				continue
			}
			rb, _ := w.Type.RowBytes(w.Cols)
			if act := acts[j]; act != nil {
				if !matmulIntSIMD(dsts[j], act, 1, w, rb, a, b) {
					matmulIntGeneric(dsts[j], act, 1, w, rb, a, b)
				}
			} else {
				matmulRows(dsts[j], x, 1, w, rb, a, b)
			}
		}
	})
}
