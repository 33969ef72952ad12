package ml

import (
	"encoding/binary"
	"math"
	"sync"
)

// Q8_0 products run in integers, as llama.cpp's ggml_vec_dot_q8_0_q8_0:
// each activation row is quantized per 32-value block to int8 with an f32
// scale, the weight and activation blocks are dotted exactly in int32, and
// the per-block products are scaled and summed in f32.
//
// The arithmetic of one output is fixed, whatever kernel computes it, so
// results are bitwise identical for any batch size, batch position, thread
// count and SIMD level:
//
//	acc := float32(0)
//	for b := range blocks {
//		s := int32 dot of the 32 int8 weights and 32 int8 activations
//		sc := dw[b] * dx[b]          // f32 product, rounded
//		acc += float32(s) * sc       // rounded product, then rounded sum
//	}
//
// float32(s) is exact (|s| <= 32*128*127 < 2^24), and no step is fused.

// q8ActBlock is the size of one quantized activation block: f32 scale dx,
// int32 bias = -128*sum(q) (the correction the VNNI kernel needs for its
// unsigned weights), then 32 int8 values.
const q8ActBlock = 40

// q8PackBlock is the size of one block of a packed 16-row weight tile: the
// 32 values of each row as 8 vectors of 16 rows x 4 bytes (biased to
// unsigned), then the 16 rows' scales as f32.
const (
	q8TileRows  = 16
	q8PackBlock = 8*64 + 64
)

// quantizeActQ8Generic encodes x (len a multiple of 32) into dst (len
// len(x)/32*q8ActBlock): per block d = max|x|/127, q = roundeven(x/d) (as
// x * (1/d) in f32), like ggml's SIMD quantize_row_q8_0 but with an f32 d.
func quantizeActQ8Generic(dst []byte, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		xb := x[b*32 : b*32+32]
		o := dst[b*q8ActBlock : (b+1)*q8ActBlock]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sum int32
		for j, v := range xb {
			q := int32(math.RoundToEven(float64(float32(v * id))))
			q = max(-128, min(127, q))
			o[8+j] = byte(int8(q))
			sum += q
		}
		binary.LittleEndian.PutUint32(o, math.Float32bits(d))
		binary.LittleEndian.PutUint32(o[4:], uint32(-128*sum))
	}
}

// dotQ8Generic is the reference arithmetic of one output: row is nb Q8_0
// blocks of the weight, act the nb quantized activation blocks.
func dotQ8Generic(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*34 : b*34+34]
		ab := act[b*q8ActBlock : (b+1)*q8ActBlock]
		w := blk[2:34]
		q := ab[8:40]
		var s int32
		for j := range 32 {
			s += int32(int8(w[j])) * int32(int8(q[j]))
		}
		dw := F16ToF32(binary.LittleEndian.Uint16(blk))
		dx := math.Float32frombits(binary.LittleEndian.Uint32(ab))
		sc := float32(dw * dx)
		p := float32(float32(s) * sc)
		acc = float32(acc + p)
	}
	return acc
}

var byteScratch = sync.Pool{New: func() any { return new([]byte) }}

func getBytes(n int) *[]byte {
	p := byteScratch.Get().(*[]byte)
	if cap(*p) < n {
		*p = make([]byte, n)
	}
	*p = (*p)[:n]
	return p
}

// matMulInt is MatMul for weights multiplied in integers (Q8_0, the
// other 32-value types and the K-quants): quantize the activations once in
// the type's activation format, then split the weight rows across the
// pool in whole 16-row tiles.
func matMulInt(dst, x []float32, n int, w *Matrix, rb, threads int) {
	R, K := w.Rows, w.Cols
	tr := w.Type.traits()
	as := K / tr.act.blockSize() * tr.act.blockBytes()
	actp := getBytes(n * as)
	defer byteScratch.Put(actp)
	act := *actp
	quant := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			quantizeAct(tr.act, act[i*as:(i+1)*as], x[i*K:(i+1)*K])
		}
	}
	if threads > 1 && n >= 8 {
		parallelFor(n, (n+2*threads-1)/(2*threads), threads, quant)
	} else {
		quant(0, n)
	}
	body := func(lo, hi int) {
		if !matmulIntSIMD(dst, act, n, w, rb, lo, hi) {
			matmulIntGeneric(dst, act, n, w, rb, lo, hi)
		}
	}
	if n == 1 && threads > 1 && guidedChunks {
		parallelForGuided(R, guidedMinRows(rb, q8TileRows), q8TileRows, threads, body)
		return
	}
	chunk := (R + chunksPerThread*threads - 1) / (chunksPerThread * threads)
	chunk = max(q8TileRows, (chunk+q8TileRows-1)&^(q8TileRows-1))
	if threads == 1 {
		chunk = R
	}
	parallelFor(R, chunk, threads, body)
}

// guidedMinBytes is the least weight data of a guided piece of a
// one-row product: each piece starts its stream cold (the kernels
// prefetch ahead within it), so pieces are no shorter than a few
// prefetch distances.
const guidedMinBytes = 32 << 10

// guidedMinRows is the least rows of rb bytes of a guided piece, a
// multiple of align.
func guidedMinRows(rb, align int) int {
	r := (guidedMinBytes + rb - 1) / max(rb, 1)
	return max(align, (r+align-1)/align*align)
}

// matmulIntGeneric computes output columns [lo,hi) of every activation
// row with the type's reference dot, from the quantized activations act
// (n rows).
func matmulIntGeneric(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	if w.Type == BF16 {
		matmulBF16Generic(dst, act, n, w, rb, lo, hi)
		return
	}
	tr := w.Type.traits()
	R, nb := w.Rows, w.Cols/tr.blockSize
	as := w.Cols / tr.act.blockSize() * tr.act.blockBytes()
	nbs := make([]normBlock, nb)
	for r := lo; r < hi; r++ {
		unpackRow(tr, nbs, w.Data[r*rb:(r+1)*rb])
		for i := 0; i < n; i++ {
			dst[i*R+r] = dotNorm(tr, nbs, act[i*as:(i+1)*as])
		}
	}
}

// matmulIntSIMD is the dispatch hook for SIMD integer kernels: it computes
// output columns [lo,hi) with the kernel for w.Type and reports true, or
// reports false when there is none at the current SIMD level. A kernel
// must reproduce the type's reference dot (typeTraits.dot) bit for bit.
func matmulIntSIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	switch w.Type {
	case BF16:
		return matmulBF16SIMD(dst, act, n, w, rb, lo, hi)
	case Q8_0:
		return matmulQ8SIMD(dst, act, n, w, rb, lo, hi)
	case Q4_0:
		return matmulExpandSIMD(dst, act, n, w, rb, lo, hi) ||
			matmulKSIMD(dst, act, n, w, rb, lo, hi)
	case Q5_0, IQ4_NL:
		return matmulExpandSIMD(dst, act, n, w, rb, lo, hi)
	case MXFP4:
		return matmulMXFP4SIMD(dst, act, n, w, rb, lo, hi)
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K:
		return matmulKSIMD(dst, act, n, w, rb, lo, hi)
	case Q4_1, Q5_1, IQ4_XS:
		return matmulOffSIMD(dst, act, n, w, rb, lo, hi)
	}
	return false
}
