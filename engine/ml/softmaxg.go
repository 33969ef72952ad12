package ml

import "fmt"

// SoftmaxStrided is Softmax on each of g rows of n values, row j at
// x[j*stride:j*stride+n], bit for bit. Softmax's sum is one scalar chain
// of additions in order (the reference arithmetic every SIMD level keeps),
// so over a long span a single row waits on the adder's latency; four rows
// at once run four independent chains, each in its own order.
func SoftmaxStrided(x []float32, stride, g, n int) {
	if g < 0 || n < 0 || stride < n || (g > 0 && len(x) < (g-1)*stride+n) {
		panic(fmt.Sprintf("ml: SoftmaxStrided of %d rows of %d with stride %d over %d values", g, n, stride, len(x)))
	}
	if n == 0 {
		return
	}
	for j := range g {
		r := x[j*stride : j*stride+n]
		expShift(r, maxOf(r))
	}
	j := 0
	for ; j+4 <= g; j += 4 {
		r0 := x[j*stride : j*stride+n]
		r1 := x[(j+1)*stride : (j+1)*stride+n]
		r2 := x[(j+2)*stride : (j+2)*stride+n]
		r3 := x[(j+3)*stride : (j+3)*stride+n]
		var s0, s1, s2, s3 float32
		for i := range r0 {
			s0 += r0[i]
			s1 += r1[i]
			s2 += r2[i]
			s3 += r3[i]
		}
		divBy(r0, s0)
		divBy(r1, s1)
		divBy(r2, s2)
		divBy(r3, s3)
	}
	for ; j < g; j++ {
		r := x[j*stride : j*stride+n]
		var s float32
		for _, e := range r {
			s += e
		}
		divBy(r, s)
	}
}
