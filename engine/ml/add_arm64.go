//go:build arm64 && !purego

package ml

import "sync/atomic"

//go:noescape
func addF32NEON(dst, x *float32, n16 int)

// addCalls counts the values the arm64 Add kernel summed, so tests can
// tell it ran.
var addCalls atomic.Int64

// addTo sets dst[i] += x[i] (len(x) >= len(dst)): whole 16-value steps in
// the kernel, the tail in Go, the same single rounding everywhere.
func addTo(dst, x []float32) {
	if !useSIMD() {
		addGeneric(dst, x)
		return
	}
	x = x[:len(dst)]
	n16 := len(dst) &^ 15
	if n16 > 0 {
		addF32NEON(&dst[0], &x[0], n16)
		addCalls.Add(int64(n16))
	}
	addGeneric(dst[n16:], x[n16:])
}
