package ml

import (
	"fmt"
	"sync"
)

// minParallelWork is the number of multiply-adds below which a product
// runs on the calling goroutine alone: handing rows to the pool costs a
// few microseconds, more than tiny products (stories260K) take.
const minParallelWork = 1 << 17

// chunksPerThread is how many pieces a product's rows are cut into per
// thread, claimed dynamically: a few, so that a thread descheduled on a
// busy machine holds up only its current piece (a variable for
// BenchmarkChunkTune).
var chunksPerThread = 4

// tileBytes bounds the f32 weight tile a GEMM keeps hot while it sweeps
// all activation rows across it.
const tileBytes = 32 << 10

// MatMul computes dst[i][r] = dot(x[i], w[r]) for i < n activation rows of
// w.Cols values and r < w.Rows: dst is n x w.Rows, x is n x w.Cols, both
// row-major. Rows are split across the worker pool (see SetThreads).
func MatMul(dst, x []float32, n int, w *Matrix) {
	R, K := w.Rows, w.Cols
	rb, err := w.Type.RowBytes(K)
	if err != nil {
		panic(err)
	}
	if n < 0 || len(x) != n*K || len(dst) != n*R || len(w.Data) != R*rb {
		panic(fmt.Sprintf("ml: MatMul n=%d x %d dst %d with %v %dx%d (%d bytes)", n, len(x), len(dst), w.Type, R, K, len(w.Data)))
	}
	if n == 0 || R == 0 {
		return
	}
	if tb := tokenBlock(n, actRowBytes(w)); tb < n {
		for i0 := 0; i0 < n; i0 += tb {
			i1 := min(i0+tb, n)
			MatMul(dst[i0*R:i1*R], x[i0*K:i1*K], i1-i0, w)
		}
		return
	}
	threads := Threads()
	if n*R*K < minParallelWork {
		threads = 1
	}
	if w.Type.traits().act != actF32 {
		matMulInt(dst, x, n, w, rb, threads)
		return
	}
	// Chunks of whole 4-row groups; a few per thread so a descheduled
	// thread on a noisy machine does not hold up the rest.
	chunk := (R + chunksPerThread*threads - 1) / (chunksPerThread * threads)
	if n > 1 {
		chunk = max(chunk, tileRows(K))
	}
	chunk = max(16, (chunk+3)&^3)
	if threads == 1 {
		chunk = R
	}
	body := func(lo, hi int) {
		matmulRows(dst, x, n, w, rb, lo, hi)
	}
	if n == 1 && threads > 1 && guidedChunks {
		parallelForGuided(R, max(16, guidedMinRows(rb, 4)), 4, threads, body)
		return
	}
	parallelFor(R, chunk, threads, body)
}

// tileRows is how many f32 weight rows of K values fit a tile (a multiple of 4).
func tileRows(K int) int {
	return max(4, tileBytes/(4*K)&^3)
}

var scratch = sync.Pool{New: func() any { return new([]float32) }}

func getScratch(n int) *[]float32 {
	p := scratch.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

// matmulRows computes output columns [lo,hi) of every activation row.
func matmulRows(dst, x []float32, n int, w *Matrix, rb, lo, hi int) {
	if useSIMD() {
		if matmulRowsSIMD(dst, x, n, w, rb, lo, hi) {
			return
		}
	}
	matmulRowsGeneric(dst, x, n, w, rb, lo, hi)
}

// matmulRowsGeneric is the plain-Go path: each weight row is decoded once
// (F32 is used in place) and dotted with every activation row.
func matmulRowsGeneric(dst, x []float32, n int, w *Matrix, rb, lo, hi int) {
	R, K := w.Rows, w.Cols
	var buf *[]float32
	if w.Type != F32 {
		buf = getScratch(K)
		defer scratch.Put(buf)
	}
	for r := lo; r < hi; r++ {
		var row []float32
		if w.Type == F32 {
			row = BytesF32(w.Data[r*rb : (r+1)*rb])
		} else {
			row = *buf
			dequantRow(row, w.Type, w.Data[r*rb:(r+1)*rb])
		}
		for i := 0; i < n; i++ {
			dst[i*R+r] = dotGeneric(x[i*K:(i+1)*K], row)
		}
	}
}
