package ml

import (
	"fmt"
	"math"
)

// RMSNorm writes weight * x / sqrt(mean(x²) + eps) into dst (llama2.c's
// rmsnorm). dst may alias x.
func RMSNorm(dst, x, weight []float32, eps float32) {
	if len(dst) != len(x) || len(weight) != len(x) {
		panic(fmt.Sprintf("ml: RMSNorm lengths dst %d x %d weight %d", len(dst), len(x), len(weight)))
	}
	if len(x) == 0 {
		return
	}
	ss := Dot(x, x)
	ss /= float32(len(x))
	ss += eps
	ss = 1 / float32(math.Sqrt(float64(ss)))
	for i, v := range x {
		dst[i] = weight[i] * (ss * v)
	}
}

// SiLUMul computes gate = silu(gate) * up in place.
func SiLUMul(gate, up []float32) {
	if len(gate) != len(up) {
		panic(fmt.Sprintf("ml: SiLUMul lengths %d and %d", len(gate), len(up)))
	}
	siluMul(gate, up)
}

// Add computes dst += x.
func Add(dst, x []float32) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("ml: Add lengths %d and %d", len(dst), len(x)))
	}
	addTo(dst, x)
}

// addGeneric sets dst[i] += x[i].
func addGeneric(dst, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += x[i]
	}
}

// Dot returns the inner product of a and b.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("ml: Dot lengths %d and %d", len(a), len(b)))
	}
	if len(a) == 0 {
		return 0
	}
	return dot(a, b)
}

func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy computes dst += a * x.
func Axpy(dst []float32, a float32, x []float32) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("ml: Axpy lengths %d and %d", len(dst), len(x)))
	}
	if len(dst) == 0 {
		return
	}
	axpy(dst, a, x)
}

func axpyGeneric(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * x[i]
	}
}

// Softmax normalizes x in place into probabilities, subtracting the max
// first as llama2.c does. The exponentials are expf's (within about 1 ulp
// of math.Exp), identical at every SIMD level.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	expShift(x, maxOf(x))
	var sum float32
	for _, e := range x {
		sum += e
	}
	divBy(x, sum)
}

// maxOfGeneric returns the largest value of x (len >= 1).
func maxOfGeneric(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// divByGeneric sets x[i] /= d.
func divByGeneric(x []float32, d float32) {
	for i := range x {
		x[i] /= d
	}
}

// RoPE rotates the adjacent pairs (i, i+1), i < ropeDim, of every head of v
// (len(v) a multiple of headDim) by the angle pos*freq, freq =
// 1/theta^(i/headDim), computed in float32 as llama2.c's run.c does. A
// linear scale other than 0 or 1 divides pos by scale.
func RoPE(v []float32, headDim, ropeDim int, pos int, theta float32, scale float32) {
	if headDim <= 0 || len(v)%headDim != 0 || ropeDim > headDim || ropeDim%2 != 0 {
		panic(fmt.Sprintf("ml: RoPE len %d headDim %d ropeDim %d", len(v), headDim, ropeDim))
	}
	var buf [256]float32
	var cs []float32
	if ropeDim <= len(buf) {
		cs = buf[:ropeDim]
	} else {
		cs = make([]float32, ropeDim)
	}
	RoPETable(cs, headDim, pos, theta, scale)
	RoPEApply(v, headDim, cs)
}

// RoPETable fills cs (length ropeDim) with the cos and sin pairs of
// position pos, computed in float32 as llama2.c's run.c does. The forward
// pass computes it once per token and applies it to Q and K of every layer.
func RoPETable(cs []float32, headDim, pos int, theta, scale float32) {
	p := float32(pos)
	if scale != 0 && scale != 1 {
		p = p / scale
	}
	for i := 0; i+1 < len(cs); i += 2 {
		e := float32(i) / float32(headDim)
		freq := 1 / float32(math.Pow(float64(theta), float64(e)))
		val := p * freq
		cs[i] = float32(math.Cos(float64(val)))
		cs[i+1] = float32(math.Sin(float64(val)))
	}
}

// RoPEApply rotates the adjacent pairs (i, i+1), i < len(cs), of every head
// of v by the table from RoPETable.
func RoPEApply(v []float32, headDim int, cs []float32) {
	ropeDim := len(cs)
	if headDim <= 0 || len(v)%headDim != 0 || ropeDim > headDim || ropeDim%2 != 0 {
		panic(fmt.Sprintf("ml: RoPE len %d headDim %d ropeDim %d", len(v), headDim, ropeDim))
	}
	for h := 0; h+headDim <= len(v); h += headDim {
		hv := v[h : h+ropeDim]
		for i := 0; i < ropeDim; i += 2 {
			fcr, fci := cs[i], cs[i+1]
			v0, v1 := hv[i], hv[i+1]
			hv[i] = float32(v0*fcr) - float32(v1*fci)
			hv[i+1] = float32(v0*fci) + float32(v1*fcr)
		}
	}
}

// Grow returns buf resized to n, reallocating only when its capacity is
// short: the runners' scratch buffers, sized for the largest batch seen.
func Grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
