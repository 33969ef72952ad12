//go:build amd64 && !purego

package ml

// matVecCoreOld switches a type's one-row products to the kernel a change
// replaced (returning the undo), for BenchmarkMatVecCore's A/B.
var matVecCoreOld = map[Type]func() func(){
	IQ4_XS: func() func() { iqxM, iqxA = false, false; return func() { iqxM, iqxA = true, true } },
	Q5_K:   func() func() { kqQ5KY = false; return func() { kqQ5KY = true } },
}

func init() {
	// BF16: the FMA emulation of VDPBF16PS (as without AVX512_BF16).
	matVecCoreOld[BF16] = func() func() { s := hasBF16; hasBF16 = false; return func() { hasBF16 = s } }
	// F16: the eight-row kernel (gemvF16x8) in place of gemvF16Long.
	matVecCoreOld[F16] = func() func() { f16Blocked = false; return func() { f16Blocked = true } }
	// The prefetch distance floor of kqPfRows against none (kqPfDist
	// alone), for the long rows of ffn_down.
	off := func() func() { s := kqPfRows; kqPfRows = 0; return func() { kqPfRows = s } }
	matVecCoreOld[Q6_K] = off
	// Q4_K: the 512-bit eight-row kernel (and no prefetch floor).
	matVecCoreOld[Q4_K] = func() func() {
		undo := off()
		kqQ4KY = false
		return func() { undo(); kqQ4KY = true }
	}
}
