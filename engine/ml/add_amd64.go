//go:build amd64 && !purego

package ml

//go:noescape
func addAVX512(dst, x *float32, n int)

// addTo sets dst[i] += x[i] (len(x) >= len(dst)).
func addTo(dst, x []float32) {
	if useAVX512 && len(dst) > 0 {
		addAVX512(&dst[0], &x[0], len(dst))
		return
	}
	addGeneric(dst, x)
}
