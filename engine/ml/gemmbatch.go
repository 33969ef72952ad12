package ml

import "fmt"

// MatMulBatch computes what MatMul does (dst = x·wᵀ, n activation rows)
// for a product where every row of the step goes through it at once: an
// encoder's whole input (issue 26). With AVX-512 and F32 or F16
// weights it runs a broadcast GEMM whose every output is one FMA chain
// over k in order; that chain does not depend on n or on a row's place in
// the batch, so a row's result is bit-identical whatever else is batched
// with it. Its values differ from MatMul's (a different reduction order),
// so a forward pass must use one or the other for all its rows. Elsewhere
// it is MatMul.
func MatMulBatch(dst, x []float32, n int, w *Matrix) {
	R, K := w.Rows, w.Cols
	if n < 0 || len(x) != n*K || len(dst) != n*R {
		panic(fmt.Sprintf("ml: MatMulBatch n=%d x %d dst %d with %v %dx%d", n, len(x), len(dst), w.Type, R, K))
	}
	if n == 0 || R == 0 || !bcastGEMM(dst, x, n, w) {
		MatMul(dst, x, n, w)
	}
}

// The broadcast GEMM's kernel multiplies bcastRows rows of one operand,
// broadcast a value at a time, by a panel of bcastLanes rows of the other
// packed k-major. With many activation rows those are the activation rows
// (read in place, each output tile a piece of dst) against packed weight
// rows: the weights are packed once per call. With few, the roles swap:
// the few activation rows are packed and the weight rows broadcast, so a
// short input does not pay for packing every weight. Each output is the
// same chain fma(x[k], w[k], acc) over k either way, hence the same bits.
const (
	bcastRows  = 12
	bcastLanes = 32
	// bcastPackBytes bounds the packed block a job keeps in L2 while it
	// streams the other operand.
	bcastPackBytes = 384 << 10
	// bcastPackWeights is the batch from which the weights are packed.
	bcastPackWeights = 4 * bcastLanes
)

type bcastKernel func(a *float32, as int, p *float32, k int, dst *float32, ds int)

// bcastKernels are the kernel for panels of bcastLanes values per step and
// the one for panels of 16 (a short input's last panel): the same chain
// per output.
type bcastKernels struct{ k32, k16 bcastKernel }

// packRows writes m rows of K values (row(r) for r < m) k-major into
// panel (K x lanes), zero-padding the lanes past m.
func packRows(panel []float32, K, m, lanes int, row func(r int) []float32) {
	for r := range m {
		src := row(r)[:K]
		dst := panel[r:]
		for k, v := range src {
			dst[k*lanes] = v
		}
	}
	if m < lanes {
		for k := range K {
			clear(panel[k*lanes+m : (k+1)*lanes])
		}
	}
}

// weightRow returns weight row r as f32: in place for F32, else decoded
// into buf.
func weightRow(w *Matrix, rb, r int, buf []float32) []float32 {
	if w.Type == F32 {
		return BytesF32(w.Data[r*rb : (r+1)*rb])
	}
	dequantRow(buf, w.Type, w.Data[r*rb:(r+1)*rb])
	return buf
}

// bcastSplit runs an n x R product on the pool in jobs of whole panels.
func bcastSplit(dst, x []float32, n int, w *Matrix, rb int, kern bcastKernels) {
	R, K := w.Rows, w.Cols
	threads := Threads()
	if n*R*K < minParallelWork {
		threads = 1
	}
	block := max(bcastLanes, bcastPackBytes/(4*K)/bcastLanes*bcastLanes) // rows packed per job
	if n >= bcastPackWeights {
		// Jobs of packed weight columns, at least a few per thread.
		if want := threads * chunksPerThread; threads > 1 && (R+block-1)/block < want {
			block = max(bcastLanes, (R+want-1)/want+bcastLanes-1) / bcastLanes * bcastLanes
		}
		parallelFor(R, block, threads, func(lo, hi int) { bcastPackedWeights(dst, x, n, w, rb, lo, hi, kern.k32) })
		return
	}
	parallelFor(R, bcastRows*max(1, (R/bcastRows+threads*chunksPerThread-1)/(threads*chunksPerThread)), threads,
		func(lo, hi int) { bcastPackedActs(dst, x, n, w, rb, lo, hi, kern) })
}

// bcastPackedWeights computes output columns [j0,j1) of every row: packs
// those weight rows into panels of bcastLanes (zero-padded), then sweeps
// the activation rows across them bcastRows at a time, storing straight
// into dst (through a tile at the edges).
func bcastPackedWeights(dst, x []float32, n int, w *Matrix, rb, j0, j1 int, kern bcastKernel) {
	R, K := w.Rows, w.Cols
	np := (j1 - j0 + bcastLanes - 1) / bcastLanes
	pp := getScratch(np*bcastLanes*K + K + bcastRows*K + bcastRows*bcastLanes)
	defer scratch.Put(pp)
	buf := *pp
	panels, buf := buf[:np*bcastLanes*K], buf[np*bcastLanes*K:]
	row, buf := buf[:K], buf[K:]
	pad, tile := buf[:bcastRows*K], buf[bcastRows*K:]
	for p := range np {
		c0 := j0 + p*bcastLanes
		packRows(panels[p*bcastLanes*K:(p+1)*bcastLanes*K], K, min(bcastLanes, j1-c0), bcastLanes,
			func(r int) []float32 { return weightRow(w, rb, c0+r, row) })
	}
	for i0 := 0; i0 < n; i0 += bcastRows {
		m := min(bcastRows, n-i0)
		a := x[i0*K:]
		if m < bcastRows {
			copy(pad, x[i0*K:n*K])
			clear(pad[m*K:])
			a = pad
		}
		for p := range np {
			c0 := j0 + p*bcastLanes
			c := min(bcastLanes, j1-c0)
			if m == bcastRows && c == bcastLanes {
				kern(&a[0], K, &panels[p*bcastLanes*K], K, &dst[i0*R+c0], R)
				continue
			}
			kern(&a[0], K, &panels[p*bcastLanes*K], K, &tile[0], bcastLanes)
			for i := range m {
				copy(dst[(i0+i)*R+c0:(i0+i)*R+c0+c], tile[i*bcastLanes:])
			}
		}
	}
}

// bcastPackedActs computes output columns [j0,j1) (j0 a multiple of
// bcastRows) of every row for a small n: packs the activation rows into
// panels of bcastLanes (the last one of 16 when the rest fits: a short
// query wastes fewer lanes), then runs every group of bcastRows weight
// rows (decoded to f32, zero-padded at the end) over every panel,
// transposing each tile into dst.
func bcastPackedActs(dst, x []float32, n int, w *Matrix, rb, j0, j1 int, kern bcastKernels) {
	R, K := w.Rows, w.Cols
	type panel struct{ r0, m, lanes, off int }
	var ps []panel
	size := 0
	for r0 := 0; r0 < n; {
		lanes := bcastLanes
		if n-r0 <= 16 {
			lanes = 16
		}
		m := min(lanes, n-r0)
		ps = append(ps, panel{r0, m, lanes, size})
		size += lanes * K
		r0 += m
	}
	pp := getScratch(size + bcastRows*K + bcastRows*bcastLanes)
	defer scratch.Put(pp)
	panels, wbuf, tile := (*pp)[:size], (*pp)[size:][:bcastRows*K], (*pp)[size+bcastRows*K:]
	for _, p := range ps {
		packRows(panels[p.off:p.off+p.lanes*K], K, p.m, p.lanes,
			func(r int) []float32 { return x[(p.r0+r)*K : (p.r0+r+1)*K] })
	}
	for g := j0; g < j1; g += bcastRows {
		m := min(bcastRows, j1-g)
		var a []float32
		if w.Type == F32 && m == bcastRows {
			a = BytesF32(w.Data[g*rb : (g+m)*rb])
		} else {
			a = wbuf
			for r := range m {
				if row := a[r*K : (r+1)*K]; w.Type == F32 {
					copy(row, BytesF32(w.Data[(g+r)*rb:(g+r+1)*rb]))
				} else {
					dequantRow(row, w.Type, w.Data[(g+r)*rb:(g+r+1)*rb])
				}
			}
			clear(a[m*K:])
		}
		for _, p := range ps {
			k := kern.k32
			if p.lanes == 16 {
				k = kern.k16
			}
			k(&a[0], K, &panels[p.off], K, &tile[0], p.lanes)
			for i := range p.m {
				out := dst[(p.r0+i)*R+g : (p.r0+i)*R+g+m]
				for j := range out {
					out[j] = tile[j*p.lanes+i]
				}
			}
		}
	}
}
