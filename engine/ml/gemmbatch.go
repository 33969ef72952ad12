package ml

import "fmt"

// MatMulBatch computes what MatMul does (dst = x·wᵀ, n activation rows)
// for a product where every row of the step goes through it at once: an
// encoder's whole input (issue 26). With AVX-512 and F32, F16 or BF16
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

// Tile and block sizes of the broadcast GEMM: the kernel takes bcastRows
// weight rows (broadcast one value at a time) against a panel of bcastLanes
// activation rows packed k-major; bcastPanelBytes bounds the packed
// activation block a job keeps in L2 while it streams the weight rows.
const (
	bcastRows       = 12
	bcastLanes      = 32
	bcastPanelBytes = 384 << 10
)

// bcastBlock is how many activation rows a job packs (a multiple of
// bcastLanes).
func bcastBlock(K int) int {
	return max(bcastLanes, bcastPanelBytes/(4*K)/bcastLanes*bcastLanes)
}

// bcastJob computes dst rows [i0,i1) x output columns [j0,j1) (j0 a
// multiple of bcastRows): packs the activation rows into k-major panels
// of bcastLanes rows (zero-padded), then runs the kernel for every group
// of bcastRows weight rows (decoded to f32, zero-padded at the end) over
// every panel, transposing each tile into dst.
func bcastJob(dst, x []float32, w *Matrix, rb, i0, i1, j0, j1 int,
	kern func(a *float32, as int, p *float32, k int, dst *float32, ds int)) {
	R, K := w.Rows, w.Cols
	np := (i1 - i0 + bcastLanes - 1) / bcastLanes
	pp := getScratch(np*bcastLanes*K + bcastRows*bcastLanes)
	defer scratch.Put(pp)
	panels, tile := (*pp)[:np*bcastLanes*K], (*pp)[np*bcastLanes*K:]
	for p := range np {
		panel := panels[p*bcastLanes*K : (p+1)*bcastLanes*K]
		r0 := i0 + p*bcastLanes
		m := min(bcastLanes, i1-r0)
		for r := range m {
			row := x[(r0+r)*K : (r0+r+1)*K]
			for k, v := range row {
				panel[k*bcastLanes+r] = v
			}
		}
		if m < bcastLanes {
			for k := range K {
				clear(panel[k*bcastLanes+m : (k+1)*bcastLanes])
			}
		}
	}
	var wbuf *[]float32
	if w.Type != F32 || (j1-j0)%bcastRows != 0 {
		wbuf = getScratch(bcastRows * K)
		defer scratch.Put(wbuf)
	}
	for g := j0; g < j1; g += bcastRows {
		m := min(bcastRows, j1-g)
		var a []float32
		if w.Type == F32 && m == bcastRows {
			a = BytesF32(w.Data[g*rb : (g+m)*rb])
		} else {
			a = *wbuf
			for r := range m {
				dequantRow(a[r*K:(r+1)*K], w.Type, w.Data[(g+r)*rb:(g+r+1)*rb])
			}
			clear(a[m*K:])
		}
		for p := range np {
			kern(&a[0], K, &panels[p*bcastLanes*K], K, &tile[0], bcastLanes)
			r0 := i0 + p*bcastLanes
			for i := range min(bcastLanes, i1-r0) {
				out := dst[(r0+i)*R+g : (r0+i)*R+g+m]
				for j := range out {
					out[j] = tile[j*bcastLanes+i]
				}
			}
		}
	}
}

// bcastSplit runs the jobs of an n x R product on the pool: blocks of
// activation rows, each cut into column ranges only when there are too
// few blocks for the threads.
func bcastSplit(dst, x []float32, n int, w *Matrix, rb int,
	kern func(a *float32, as int, p *float32, k int, dst *float32, ds int)) {
	R, K := w.Rows, w.Cols
	threads := Threads()
	if n*R*K < minParallelWork {
		threads = 1
	}
	ib := bcastBlock(K)
	iblocks := (n + ib - 1) / ib
	groups := (R + bcastRows - 1) / bcastRows
	jcuts := 1
	if want := threads * chunksPerThread; iblocks < want && threads > 1 {
		jcuts = min(groups, (want+iblocks-1)/iblocks)
	}
	jchunk := (groups + jcuts - 1) / jcuts * bcastRows
	jcuts = (R + jchunk - 1) / jchunk
	parallelFor(iblocks*jcuts, 1, threads, func(lo, hi int) {
		for job := lo; job < hi; job++ {
			b, c := job/jcuts, job%jcuts
			bcastJob(dst, x, w, rb, b*ib, min(n, (b+1)*ib), c*jchunk, min(R, (c+1)*jchunk), kern)
		}
	})
}
