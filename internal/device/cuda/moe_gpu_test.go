package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvwarden/kvwarden/engine/ml"
)

// TestGPUMoEKernels checks the mixture-of-experts kernels against the CPU
// pass's operations: gpt-oss's clamped SwiGLU (ml.SwiGLUOAIMul), the
// weighted sum of each token's expert rows in selection order
// (kv_moe_combine, ml.Axpy) and the shared expert's gated add
// (kv_moe_shared_add, with and without its gate).
func TestGPUMoEKernels(t *testing.T) {
	d := gpuOrSkip(t)
	rng := rand.New(rand.NewPCG(11, 12))
	var a Args

	// Clamped SwiGLU: values on both sides of the limit 7. Bound 1e-5
	// (ex2.approx), f16 output 1e-3.
	const rows, hidden = 3, 700
	const alpha, limit = 1.702, 7
	gu := randF32(rng, rows*2*hidden, 10)
	gud := upF32(t, d, gu)
	want := make([]float32, 0, rows*hidden)
	for r := range rows {
		g := append([]float32(nil), gu[r*2*hidden:r*2*hidden+hidden]...)
		ml.SwiGLUOAIMul(g, gu[r*2*hidden+hidden:(r+1)*2*hidden], alpha, limit)
		want = append(want, g...)
	}
	so := zeros(t, d, rows*hidden)
	a.Ptr(so.b.Ptr).Ptr(gud.b.Ptr).I32(rows).I32(hidden).F32(alpha).F32(limit)
	launch(t, d, "kv_swiglu_oai_mul_f32", Grid1D(rows*hidden, 256, 16), Dim3{256, 1, 1}, 0, &a)
	kernelOut(t).Less(relErr(so.f32(t, rows*hidden), want), 1e-5)
	sh := upBytes(t, d, make([]byte, 2*rows*hidden))
	a.Reset()
	a.Ptr(sh.b.Ptr).Ptr(gud.b.Ptr).I32(rows).I32(hidden).F32(alpha).F32(limit)
	launch(t, d, "kv_swiglu_oai_mul_f16", Grid1D(rows*hidden, 256, 16), Dim3{256, 1, 1}, 0, &a)
	hb := sh.raw(t, 2*rows*hidden)
	gotH := make([]float32, rows*hidden)
	for i := range gotH {
		gotH[i] = ml.F16ToF32(uint16(hb[2*i]) | uint16(hb[2*i+1])<<8)
	}
	kernelOut(t).Less(relErr(gotH, want), 1e-3)

	// Combine: 3 tokens, 2 choices each, expert rows in grouped order.
	const n, k, dim = 3, 2, 513
	y := randF32(rng, n*k*dim, 2)
	slot := []int32{4, 0, 1, 5, 2, 3}
	wts := []float32{0.7, 0.3, 0.55, 0.45, 0.9, 0.1}
	yd, sd, wd := upF32(t, d, y), upBytes(t, d, i32b(slot)), upF32(t, d, wts)
	out := zeros(t, d, n*dim)
	a.Reset()
	a.Ptr(out.b.Ptr).Ptr(yd.b.Ptr).Ptr(sd.b.Ptr).Ptr(wd.b.Ptr).I32(n).I32(k).I32(dim)
	launch(t, d, "kv_moe_combine", Grid1D(n*dim, 256, 16), Dim3{256, 1, 1}, 0, &a)
	wantC := make([]float32, n*dim)
	for i, s := range slot {
		tok := i / k
		ml.Axpy(wantC[tok*dim:(tok+1)*dim], wts[i], y[int(s)*dim:(int(s)+1)*dim])
	}
	kernelOut(t).Less(relErr(out.f32(t, n*dim), wantC), 1e-6)

	// Shared expert: out += sigmoid(g[t]) * ys[t], then without a gate.
	ys := randF32(rng, n*dim, 2)
	gate := []float32{-2, 0.5, 3}
	ysd, gd := upF32(t, d, ys), upF32(t, d, gate)
	a.Reset()
	a.Ptr(out.b.Ptr).Ptr(ysd.b.Ptr).Ptr(gd.b.Ptr).I32(n).I32(dim)
	launch(t, d, "kv_moe_shared_add", Grid1D(n*dim, 256, 16), Dim3{256, 1, 1}, 0, &a)
	for tok := range n {
		s := float32(1 / (1 + math.Exp(-float64(gate[tok]))))
		ml.Axpy(wantC[tok*dim:(tok+1)*dim], s, ys[tok*dim:(tok+1)*dim])
	}
	kernelOut(t).Less(relErr(out.f32(t, n*dim), wantC), 1e-5)
	a.Reset()
	a.Ptr(out.b.Ptr).Ptr(ysd.b.Ptr).Ptr(0).I32(n).I32(dim)
	launch(t, d, "kv_moe_shared_add", Grid1D(n*dim, 256, 16), Dim3{256, 1, 1}, 0, &a)
	ml.Add(wantC, ys)
	kernelOut(t).Less(relErr(out.f32(t, n*dim), wantC), 1e-5)
}
