//go:build amd64 && !purego

package ml

// Q4_K products of four weight rows (w + k*ws) and n = 1..4 activation
// rows (a + j*as) over nb super-blocks,
// output (j, k) into out[j*os+k], each weight block decoded once for the
// n rows (kqfew_amd64.s). Every output has kqQ4KDot4VNNIZ's bits.
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

// kqFew is a type's few-row kernels (index: activation rows, 1..4) and
// the order of the 32-value chunks of each activation block they read
// (nil: the activations as quantizeActQ8K writes them).
type kqFew struct {
	kern  [5]kqFewKernel
	order *[8]int
}

// Q4_K reads the activations as they are (each 32-byte chunk of nibbles
// is 64 consecutive values); Q6_K's value vector v is chunks v and v+4.
var (
	kqQ4KFew = kqFew{
		[5]kqFewKernel{nil, kqQ4KFew1VNNIZ, kqQ4KFew2VNNIZ, kqQ4KFew3VNNIZ, kqQ4KFew4VNNIZ},
		nil,
	}
	kqQ6KFew = kqFew{
		[5]kqFewKernel{nil, kqQ6KFew1VNNIZ, kqQ6KFew2VNNIZ, kqQ6KFew3VNNIZ, kqQ6KFew4VNNIZ},
		&[8]int{0, 4, 1, 5, 2, 6, 3, 7},
	}
)

// kqFewPermute copies Q8_K activation blocks from src to dst with each
// block's 32-value chunks in the given order; scale and sums stay in place.
func kqFewPermute(dst, src []byte, order *[8]int) {
	for b := 0; b+q8KActBlock <= len(src); b += q8KActBlock {
		s, d := src[b:b+q8KActBlock], dst[b:b+q8KActBlock]
		for i, c := range order {
			copy(d[32*i:32*i+32], s[32*c:32*c+32])
		}
		copy(d[256:], s[256:])
	}
}

// fewGroups splits n activation rows into the fewest passes of at most
// four rows, as even as possible (5 = 3+2, 7 = 4+3).
func fewGroups(n int) []int {
	g := (n + 3) / 4
	sizes := make([]int, g)
	for i := range sizes {
		sizes[i] = n / g
		if i < n%g {
			sizes[i]++
		}
	}
	return sizes
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
	pa := act
	if few.order != nil {
		pp := getBytes(n * as)
		defer byteScratch.Put(pp)
		pa = *pp
		kqFewPermute(pa, act[:n*as], few.order)
	}
	groups := fewGroups(n)
	ch := hi - lo
	if len(groups) > 1 {
		ch = max(8, kqFewRowsChunk/rb&^7)
	}
	var out [16]float32
	for c0 := lo; c0 < hi; c0 += ch {
		c1 := min(hi, c0+ch)
		i := 0
		for _, m := range groups {
			kern := few.kern[m]
			r := c0
			for ; r+4 <= c1; r += 4 {
				kern(&w.Data[r*rb], rb, &pa[i*as], as, nb, &dst[i*R+r], R)
			}
			if r < c1 {
				base := max(0, c1-4)
				kern(&w.Data[base*rb], rb, &pa[i*as], as, nb, &out[0], 4)
				for j := range m {
					copy(dst[(i+j)*R+r:(i+j)*R+c1], out[j*4+r-base:j*4+c1-base])
				}
			}
			i += m
		}
	}
}
