//go:build amd64 && !purego

package ml

// Q4_K products of four weight rows (w + k*ws) and n = 1..4 activation
// rows (a + j*as) over nb super-blocks, output (j, k) into out[j*os+k],
// each weight block decoded once for the n rows (kqfew_amd64.s). Every
// output has kqQ4KDot4VNNIZ's bits.
//
//go:noescape
func kqQ4KFew1VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

//go:noescape
func kqQ4KFew2VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

//go:noescape
func kqQ4KFew3VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

//go:noescape
func kqQ4KFew4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

// The Q6_K kernels, each output kqQ6KDot4VNNIZ's bits.
//
//go:noescape
func kqQ6KFew1VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

//go:noescape
func kqQ6KFew2VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

//go:noescape
func kqQ6KFew3VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

//go:noescape
func kqQ6KFew4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

type kqFewKernel func(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)

// kqFew is a type's few-row kernels (index: activation rows, 1..4). They
// read the activation rows as quantizeActQ8K writes them.
type kqFew struct {
	kern [5]kqFewKernel
}

var (
	kqQ4KFew = kqFew{[5]kqFewKernel{nil, kqQ4KFew1VNNIZ, kqQ4KFew2VNNIZ, kqQ4KFew3VNNIZ, kqQ4KFew4VNNIZ}}
	kqQ6KFew = kqFew{[5]kqFewKernel{nil, kqQ6KFew1VNNIZ, kqQ6KFew2VNNIZ, kqQ6KFew3VNNIZ, kqQ6KFew4VNNIZ}}
)

// fewGroups appends to buf the split of n activation rows into the
// fewest passes of at most four rows, as even as possible (5 = 3+2,
// 7 = 4+3); a buf on the caller's stack keeps the product free of
// allocations.
func fewGroups(n int, buf []int) []int {
	g := (n + 3) / 4
	for i := range g {
		m := n / g
		if i < n%g {
			m++
		}
		buf = append(buf, m)
	}
	return buf
}

// matmulKFew computes output columns [lo,hi) of n activation rows with
// the few-row kernels of few: one pass of the weight rows per group of at
// most four activation rows, chunk by chunk (kqFewRowsChunk) so that
// passes after the first read the weights from cache. The weight matrix
// has at least four rows; a leftover of fewer than four goes through the
// window of the last four, into a scratch output.
func matmulKFew(few *kqFew, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/256
	as := nb * q8KActBlock
	var gb [2]int
	groups := fewGroups(n, gb[:0])
	ch := hi - lo
	if len(groups) > 1 {
		ch = max(8, kqFewRowsChunk/rb&^7)
	}
	for c0 := lo; c0 < hi; c0 += ch {
		c1 := min(hi, c0+ch)
		i := 0
		for _, m := range groups {
			kern := few.kern[m]
			r := c0
			for ; r+4 <= c1; r += 4 {
				kern(&w.Data[r*rb], rb, &act[i*as], as, nb, &dst[i*R+r], R)
			}
			if r < c1 {
				// Declared here: passed to a func value it escapes, so
				// only a leftover pays for it.
				var out [16]float32
				base := max(0, c1-4)
				kern(&w.Data[base*rb], rb, &act[i*as], as, nb, &out[0], 4)
				for j := range m {
					copy(dst[(i+j)*R+r:(i+j)*R+c1], out[j*4+r-base:j*4+c1-base])
				}
			}
			i += m
		}
	}
}
