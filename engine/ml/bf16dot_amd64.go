//go:build amd64 && !purego

package ml

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sys/cpu"
)

// hasBF16 reports AVX512_BF16 (VDPBF16PS, VCVTNEPS2BF16): Cooper Lake,
// Sapphire Rapids and later, Zen 4 and later. Tests clear it to run the
// emulation on such a CPU.
var hasBF16 = hasAVX512 && cpu.X86.HasAVX512BF16

// bf16Checked is the one-time self-check of the AVX512_BF16 kernels
// against dotBF16Ref and roundBF16: a CPU whose instructions disagreed with
// the reference (none is known) would give other bits than every other
// CPU, so it takes the emulation instead.
var bf16Checked = sync.OnceValue(func() bool { return bf16SelfCheck(true) })

// useBF16 is whether the AVX512_BF16 kernels run (bf16Kernels lists them).
func useBF16() bool { return useAVX512 && hasBF16 && bf16Checked() }

// bf16BlockNative is whether the products of several activation rows take
// the VDPBF16PS block kernel rather than its FMA emulation, which gives
// the same bits: whichever ran faster in a one-time timing here. On the
// Sapphire Rapids this was written on, VDPBF16PS issues once every two
// cycles against two FMAs a cycle, and the emulation's 4x4 block (two
// FMAs per product pair and the widening) ran 90 cpu-GFLOP/s against
// 80 (BenchmarkBF16Variants); on Zen 4 VDPBF16PS issues at the FMA rate.
// One-row products keep VDPBF16PS: they are bound by the weight stream,
// and it reads a 64-byte line per instruction in one chain.
var bf16BlockTimed = sync.OnceValue(func() bool {
	const k, nw = 512, 8
	x := make([]byte, 4*2*k)
	w := make([]byte, nw*2*k)
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < len(x); i += 2 {
		binary.LittleEndian.PutUint16(x[i:], roundBF16(r.Float32()))
	}
	for i := 0; i < len(w); i += 2 {
		binary.LittleEndian.PutUint16(w[i:], roundBF16(r.Float32()))
	}
	d := make([]float32, 4*nw)
	best := [2]time.Duration{time.Hour, time.Hour}
	for range 3 {
		for v, f := range []func(x *byte, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int){bf16Dot4x4, bf16Dot4x4Emu} {
			t0 := time.Now()
			for range 100 {
				f(&x[0], 2*k, &w[0], 2*k, k, &d[0], nw, nw)
			}
			best[v] = min(best[v], time.Since(t0))
		}
	}
	return best[0] <= best[1]
})

// bf16BlockMode overrides the timing for tests: 1 VDPBF16PS, 2 emulation.
var bf16BlockMode int

func bf16BlockNative() bool {
	switch bf16BlockMode {
	case 1:
		return true
	case 2:
		return false
	}
	return bf16BlockTimed()
}

// bf16DotRows: dst[r] = dotBF16Ref(x, w row r) for r < nw, one weight
// row (ws bytes apart) at a time with VDPBF16PS. bf16DotRowsEmu is the
// same on AVX-512F (MXCSR DAZ|FTZ for its FMAs, restored before the
// reduction and on return).
//
//go:noescape
func bf16DotRows(x *byte, w *byte, ws int, k int, dst *float32, nw int)

//go:noescape
func bf16DotRowsEmu(x *byte, w *byte, ws int, k int, dst *float32, nw int)

// bf16Dot4x4: dst[i*ds+r] = dotBF16Ref(x row i, w row r) for four
// activation rows (xs bytes apart) and nw weight rows (a multiple of 4):
// 16 accumulators, one per output, each the chain of bf16DotRows.
//
//go:noescape
func bf16Dot4x4(x *byte, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int)

//go:noescape
func bf16LanesAVX2(x *byte, w *byte, ws int, nc int, lanes *float32, nw int)

// bf16Lanes2x4AVX2 is bf16LanesAVX2 for two activation rows (xs bytes
// apart) and nw weight rows, a multiple of 4: the lanes of activation row
// i and weight row r at lanes[16*(i*nw+r):].
//
//go:noescape
func bf16Lanes2x4AVX2(x *byte, xs int, w *byte, ws int, nc int, lanes *float32, nw int)

//go:noescape
func bf16Dot4x4Emu(x *byte, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int)

// bf16Round: dst = roundBF16 of n values with VCVTNEPS2BF16.
//
//go:noescape
func bf16Round(dst *byte, x *float32, n int)

// bf16RoundEmu is bf16Round on AVX-512F (integer rounding, the same bits).
//
//go:noescape
func bf16RoundEmu(dst *byte, x *float32, n int)

func quantizeActBF16(dst []byte, x []float32) {
	switch {
	case len(x) == 0:
	case useBF16():
		bf16Round(&dst[0], &x[0], len(x))
	case useAVX512:
		bf16RoundEmu(&dst[0], &x[0], len(x))
	default:
		quantizeActBF16Generic(dst, x)
	}
}

// matmulBF16SIMD computes output columns [lo,hi) of a BF16 product from
// the bf16 activations act with AVX-512: one activation row takes the
// weight rows one at a time (bf16DotRows), more take 4x4 blocks over a tile
// of weight rows, rows left over the one-row kernel. Every output is the
// same chain (dotBF16Ref), whichever kernel computes it.
func matmulBF16SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	R, K := w.Rows, w.Cols
	if K == 0 || !useAVX512 && !useAVX2 {
		return false
	}
	if !useAVX512 {
		matmulBF16AVX2(dst, act, n, w, rb, lo, hi)
		return true
	}
	rows, blk := bf16DotRowsEmu, bf16Dot4x4Emu
	if useBF16() {
		rows = bf16DotRows
		if bf16BlockNative() {
			blk = bf16Dot4x4
		}
	}
	as := 2 * K
	if n == 1 {
		rows(&act[0], &w.Data[lo*rb], rb, K, &dst[lo], hi-lo)
		return true
	}
	tr := max(4, bf16TileBytes/rb&^3)
	for t0 := lo; t0 < hi; t0 += tr {
		t1 := min(t0+tr, hi)
		nr4 := (t1 - t0) &^ 3
		i := 0
		if nr4 > 0 {
			for ; i+4 <= n; i += 4 {
				blk(&act[i*as], as, &w.Data[t0*rb], rb, K, &dst[i*R+t0], R, nr4)
			}
		}
		for ; i < n; i++ {
			rows(&act[i*as], &w.Data[t0*rb], rb, K, &dst[i*R+t0], nr4)
		}
		if t0+nr4 < t1 {
			for i := 0; i < n; i++ {
				rows(&act[i*as], &w.Data[(t0+nr4)*rb], rb, K, &dst[i*R+t0+nr4], t1-t0-nr4)
			}
		}
	}
	return true
}

// matmulBF16AVX2 is matmulBF16Lanes with bf16Lanes2x4AVX2 for pairs of
// activation rows against the tile's weight rows in fours, bf16LanesAVX2
// for the rows left over; Go finishes every output (bf16FinishLanes).
func matmulBF16AVX2(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, K := w.Rows, w.Cols
	as, nc := 2*K, K/32
	tr := max(4, bf16TileBytes/rb&^3)
	lp := getScratch(2 * 16 * tr)
	defer scratch.Put(lp)
	lanes := *lp
	// finish writes the outputs of activation row i and weight rows
	// [r0, r0+m) from their lanes.
	finish := func(i, r0, m int, lanes []float32) {
		x := act[i*as : (i+1)*as]
		for r := 0; r < m; r++ {
			acc := (*[16]float32)(lanes[16*r:])
			dst[i*R+r0+r] = bf16FinishLanes(acc, x, w.Data[(r0+r)*rb:(r0+r+1)*rb], 32*nc, K)
		}
	}
	for t0 := lo; t0 < hi; t0 += tr {
		m := min(tr, hi-t0)
		m4 := m &^ 3
		i := 0
		if m4 > 0 {
			for ; i+2 <= n; i += 2 {
				bf16Lanes2x4AVX2(&act[i*as], as, &w.Data[t0*rb], rb, nc, &lanes[0], m4)
				finish(i, t0, m4, lanes)
				finish(i+1, t0, m4, lanes[16*m4:])
			}
		}
		for ; i < n; i++ {
			bf16LanesAVX2(&act[i*as], &w.Data[t0*rb], rb, nc, &lanes[0], m4)
			finish(i, t0, m4, lanes)
		}
		if m4 < m {
			for i := 0; i < n; i++ {
				bf16LanesAVX2(&act[i*as], &w.Data[(t0+m4)*rb], rb, nc, &lanes[0], m-m4)
				finish(i, t0+m4, m-m4, lanes)
			}
		}
	}
}

// bf16SelfCheck runs the AVX512_BF16 kernels (native) or the emulation on
// random and crafted rows, subnormals, signed zeros, infinities and NaNs
// among them, and reports whether every output has dotBF16Ref's bits (any
// NaN for a NaN) and the rounding roundBF16's.
func bf16SelfCheck(native bool) bool {
	if !hasAVX512 || native && !hasBF16 {
		return false
	}
	rows, blk := bf16DotRowsEmu, bf16Dot4x4Emu
	if native {
		rows, blk = bf16DotRows, bf16Dot4x4
	}
	rng := rand.New(rand.NewPCG(1, 2))
	special := []uint16{0x0000, 0x8000, 0x0001, 0x807f, 0x0040, 0x0080, 0x8080, 0x7f80, 0xff80, 0x7fc0, 0x7f7f, 0xff7f, 0x3f80, 0xbf80}
	val := func() uint16 {
		switch r := rng.IntN(100); {
		case r < 4:
			return special[rng.IntN(len(special))]
		case r < 10: // tiny: products and sums near the subnormal range
			return uint16(rng.IntN(2))<<15 | uint16(rng.IntN(12))<<7 | uint16(rng.IntN(128))
		default:
			return uint16(rng.IntN(2))<<15 | uint16(100+rng.IntN(50))<<7 | uint16(rng.IntN(128))
		}
	}
	// Rounding: random and crafted f32 values, ties included.
	fs := make([]float32, 1000)
	for i := range fs {
		u := rng.Uint32()
		switch i % 4 {
		case 1:
			u = u&0x8000ffff | uint32(rng.IntN(3))<<23 // near zero, subnormals
		case 2:
			u = u&0xffff0000 | 0x8000 // ties
		case 3:
			u |= 0x7f800000 // inf, NaN
		}
		fs[i] = math.Float32frombits(u)
	}
	got := make([]byte, 2*len(fs))
	round := bf16RoundEmu
	if native {
		round = bf16Round
	}
	round(&got[0], &fs[0], len(fs)-3) // an odd length: the masked tail
	quantizeActBF16Generic(got[2*(len(fs)-3):], fs[len(fs)-3:])
	for i, f := range fs {
		if binary.LittleEndian.Uint16(got[2*i:]) != roundBF16(f) {
			return false
		}
	}
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
	}
	for _, k := range []int{1, 31, 32, 33, 64, 100, 256, 301} {
		const n, nw = 5, 9
		x := make([]byte, n*2*k)
		w := make([]byte, nw*2*k)
		for it := 0; it < 40; it++ {
			for i := 0; i < len(x); i += 2 {
				binary.LittleEndian.PutUint16(x[i:], val())
			}
			for i := 0; i < len(w); i += 2 {
				binary.LittleEndian.PutUint16(w[i:], val())
			}
			d := make([]float32, n*nw)
			blk(&x[0], 2*k, &w[0], 2*k, k, &d[0], nw, 8)
			for i := 0; i < n; i++ {
				rows(&x[i*2*k], &w[8*2*k], 2*k, k, &d[i*nw+8], 1)
			}
			rows(&x[4*2*k], &w[0], 2*k, k, &d[4*nw], 8)
			for i := 0; i < n; i++ {
				for r := 0; r < nw; r++ {
					if !same(d[i*nw+r], dotBF16Ref(x[i*2*k:(i+1)*2*k], w[r*2*k:(r+1)*2*k], k)) {
						return false
					}
				}
			}
		}
	}
	// Sums just below 2^-126, flushed or not by the rounding to 24 bits
	// (fmaFTZ, TestBF16TininessAfterRounding): 2^-126 + 1.5*2^-75 * w0.
	x := make([]byte, 64)
	binary.LittleEndian.PutUint16(x[0:], 0x1a40)
	binary.LittleEndian.PutUint16(x[2:], 0x3f80)
	for _, w0 := range []uint16{0x9980, 0x9900, 0x99c0, 0x9920} {
		w := make([]byte, 64)
		binary.LittleEndian.PutUint16(w[0:], w0)
		binary.LittleEndian.PutUint16(w[2:], 0x0080)
		var d [1]float32
		rows(&x[0], &w[0], 64, 32, &d[0], 1)
		if !same(d[0], dotBF16Ref(x, w, 32)) {
			return false
		}
	}
	return true
}
