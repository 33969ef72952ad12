//go:build amd64 && !purego

package ml

//go:noescape
func maxAVX512(x *float32, n int) float32

//go:noescape
func divAVX512(x *float32, n int, d float32)

// maxOf returns the largest value of x (len >= 1).
func maxOf(x []float32) float32 {
	if useAVX512 {
		return maxAVX512(&x[0], len(x))
	}
	return maxOfGeneric(x)
}

// divBy sets x[i] /= d.
func divBy(x []float32, d float32) {
	if useAVX512 && len(x) > 0 {
		divAVX512(&x[0], len(x), d)
		return
	}
	divByGeneric(x, d)
}
