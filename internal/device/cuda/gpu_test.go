package cuda

import (
	"github.com/kvwarden/kvwarden/internal/cudastandin"
	"math"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/device"
)

// Tests named TestGPU* need a CUDA GPU and skip cleanly without one.
// Relative errors are max|got-want| / max|want| over the output.

func gpuOrSkip(t testing.TB) *Device {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no CUDA GPU: %v", err)
	}
	d, err := Default()
	require.NoError(t, err)
	return d
}

func randF32(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (rng.Float32()*2 - 1) * scale
		if v[i] == 0 {
			v[i] = scale / 3 // never zeros
		}
	}
	return v
}

func relErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, m float64
	for i := range want {
		d = math.Max(d, math.Abs(float64(got[i]-want[i])))
		m = math.Max(m, math.Abs(float64(want[i])))
	}
	if math.IsNaN(d) {
		return math.Inf(1)
	}
	return d / math.Max(m, 1e-30)
}

// dbuf is a device buffer for tests.
type dbuf struct {
	d *Device
	b Buffer
}

func upF32(t *testing.T, d *Device, v []float32) dbuf {
	t.Helper()
	b, err := d.Alloc(int64(4*len(v)) + 4)
	require.NoError(t, err)
	t.Cleanup(func() { d.Free(b) })
	require.NoError(t, d.Run(func(q *Queue) error { return q.Upload(b.Ptr, ml.F32Bytes(v)) }))
	return dbuf{d, b}
}

func upBytes(t *testing.T, d *Device, v []byte) dbuf {
	t.Helper()
	b, err := d.Alloc(int64(len(v)) + 4)
	require.NoError(t, err)
	t.Cleanup(func() { d.Free(b) })
	require.NoError(t, d.Run(func(q *Queue) error { return q.Upload(b.Ptr, v) }))
	return dbuf{d, b}
}

func zeros(t *testing.T, d *Device, n int) dbuf { return upF32(t, d, make([]float32, n)) }

func (b dbuf) f32(t *testing.T, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	require.NoError(t, b.d.Run(func(q *Queue) error { return q.Download(ml.F32Bytes(out), b.b.Ptr) }))
	return out
}

func (b dbuf) raw(t *testing.T, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	require.NoError(t, b.d.Run(func(q *Queue) error { return q.Download(out, b.b.Ptr) }))
	return out
}

func f16Bytes(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		h := ml.F32ToF16(x)
		b[2*i], b[2*i+1] = byte(h), byte(h>>8)
	}
	return b
}

func roundF16(v []float32) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = ml.F16ToF32(ml.F32ToF16(x))
	}
	return o
}

func roundBF16(v []float32) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = ml.BF16ToF32(ml.F32ToBF16(x))
	}
	return o
}

func launch(t *testing.T, d *Device, name string, grid, block Dim3, shmem int, a *Args) {
	t.Helper()
	require.NoError(t, d.Run(func(q *Queue) error {
		if err := q.Launch(name, grid, block, shmem, a); err != nil {
			return err
		}
		return q.Sync()
	}))
}

func TestGPUDeviceInfo(t *testing.T) {
	d := gpuOrSkip(t)
	maj, min := d.ComputeCapability()
	p, err := d.BLAS()
	t.Logf("%s, compute capability %d.%d, %d SMs, %d MiB; driver %s; cuBLAS %s %v", d.Name(), maj, min, d.SMs(), d.TotalMem()>>20, DriverPath(), p, err)
	t.Logf("module: %s", d.Module())
	require.GreaterOrEqual(t, maj, 8)
}

func TestGPUArena(t *testing.T) {
	d := gpuOrSkip(t)
	a, err := d.NewArena(4 << 20)
	require.NoError(t, err)
	defer a.Free()
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 4<<20)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	require.NoError(t, a.Upload(0, src))
	got := make([]byte, len(src))
	require.NoError(t, a.Download(got, 0))
	require.Equal(t, src, got)

	for _, r := range [][2]int64{{0, 0}, {0, 1}, {3, 17}, {4096, 4096}, {100, 100000}, {0, 2 << 20}, {5, 3<<20 + 7}} {
		s, err := a.Checksum(r[0], r[1])
		require.NoError(t, err)
		require.Equal(t, device.Checksum(src[r[0]:r[0]+r[1]]), s, "checksum of [%d, +%d)", r[0], r[1])
	}
	sums, err := a.Checksums([]int64{0, 8192, 65536}, []int64{8192, 100, 1 << 20})
	require.NoError(t, err)
	require.Equal(t, []uint64{device.Checksum(src[:8192]), device.Checksum(src[8192:8292]), device.Checksum(src[65536 : 65536+1<<20])}, sums)

	require.NoError(t, a.Fill(1024, 4096, 0x7fc00000))
	require.NoError(t, a.Download(got[:8192], 0))
	for i := 1024; i < 1024+4096; i += 4 {
		require.Equal(t, []byte{0, 0, 0xc0, 0x7f}, got[i:i+4])
	}
	require.Equal(t, src[:1024], got[:1024])
	require.Equal(t, src[5120:8192], got[5120:8192])

	require.NoError(t, a.Copy(1<<20, 0, 8192))
	require.NoError(t, a.Download(got[:8192], 1<<20))
	want := append(append(append([]byte(nil), src[:1024]...), got[1024:5120]...), src[5120:8192]...)
	require.Equal(t, want, got[:8192])

	// The scrub is asynchronous; a download queued after it (copy stream
	// after compute stream) still sees the zeros before the fence is waited.
	f, err := a.ScrubPages([]uint32{2, 5}, 65536, 0)
	require.NoError(t, err)
	page := make([]byte, 65536)
	require.NoError(t, a.Download(page, 5*65536))
	require.Equal(t, make([]byte, 65536), page)
	require.NoError(t, a.Download(page, 4*65536))
	require.Equal(t, src[4*65536:5*65536], page)
	require.NoError(t, f.Wait())
	require.True(t, f.Done())

	require.ErrorIs(t, a.Copy(0, 100, 200), device.ErrOutOfRange)
	require.ErrorIs(t, a.Upload(4<<20-1, []byte{1, 2}), device.ErrOutOfRange)
	require.ErrorIs(t, a.Fill(2, 4, 0), device.ErrOutOfRange)
	_, err = a.Checksum(-1, 4)
	require.ErrorIs(t, err, device.ErrOutOfRange)
}

func TestGPUAsyncCopyCompletesOnlyAfterItsEvent(t *testing.T) {
	d := gpuOrSkip(t)
	a, err := d.NewArena(1 << 20)
	require.NoError(t, err)
	defer a.Free()
	src := make([]byte, 1<<20)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	require.NoError(t, a.Upload(0, src))
	h, err := d.HostAlloc(1 << 20)
	require.NoError(t, err)
	defer h.Free()
	// Hold the copy stream so the copy is observably in flight.
	require.NoError(t, a.SpinCopyStream(uint64(300*time.Millisecond)))
	c, err := a.DownloadAsync(h, 0, 0, 1<<20)
	require.NoError(t, err)
	var fired atomic.Bool
	done := make(chan error, 1)
	c.OnComplete(func(err error) {
		fired.Store(true)
		done <- err
	})
	time.Sleep(50 * time.Millisecond)
	require.False(t, c.Done(), "the copy completed while the copy stream was still held")
	require.False(t, fired.Load())
	require.NoError(t, c.Wait())
	require.NoError(t, <-done)
	require.True(t, fired.Load())
	require.Equal(t, src, h.Bytes())

	// Upload async: compute work queued after it sees the new data.
	for i := range h.Bytes() {
		h.Bytes()[i] = byte(i * 3)
	}
	want := append([]byte(nil), h.Bytes()...)
	require.NoError(t, a.SpinCopyStream(uint64(100*time.Millisecond)))
	c, err = a.UploadAsync(0, h, 0, 1<<20)
	require.NoError(t, err)
	s, err := a.Checksum(0, 1<<20) // compute stream: ordered after the upload
	require.NoError(t, err)
	require.Equal(t, device.Checksum(want), s)
	require.NoError(t, c.Wait())
}

func TestGPUConversions(t *testing.T) {
	d := gpuOrSkip(t)
	rng := rand.New(rand.NewPCG(5, 6))
	x := randF32(rng, 10007, 1000)
	x = append(x, 65504, 65520, -1e-7, 6e-8, 1e-30, float32(math.Inf(1)))
	n := len(x)
	in := upF32(t, d, x)
	out := upBytes(t, d, make([]byte, 2*n))
	var a Args
	a.Ptr(out.b.Ptr).Ptr(in.b.Ptr).I64(int64(n))
	launch(t, d, "kv_f32_to_f16", Grid1D(int64(n), 256, 1024), Dim3{256, 1, 1}, 0, &a)
	kernelOut(t).Equal(f16Bytes(x), out.raw(t, 2*n), "f32 to f16 must round as ml.F32ToF16")
	back := zeros(t, d, n)
	a.Reset()
	a.Ptr(back.b.Ptr).Ptr(out.b.Ptr).I64(int64(n))
	launch(t, d, "kv_f16_to_f32", Grid1D(int64(n), 256, 1024), Dim3{256, 1, 1}, 0, &a)
	kernelOut(t).Equal(roundF16(x), back.f32(t, n))

	a.Reset()
	a.Ptr(out.b.Ptr).Ptr(in.b.Ptr).I64(int64(n))
	launch(t, d, "kv_f32_to_bf16", Grid1D(int64(n), 256, 1024), Dim3{256, 1, 1}, 0, &a)
	a.Reset()
	a.Ptr(back.b.Ptr).Ptr(out.b.Ptr).I64(int64(n))
	launch(t, d, "kv_bf16_to_f32", Grid1D(int64(n), 256, 1024), Dim3{256, 1, 1}, 0, &a)
	kernelOut(t).Equal(roundBF16(x), back.f32(t, n))
}

func TestGPURowKernels(t *testing.T) {
	d := gpuOrSkip(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, dim, vocab = 5, 2048, 300
	x := randF32(rng, rows*dim, 3)
	w := randF32(rng, dim, 1)
	xd, wd := upF32(t, d, x), upF32(t, d, w)

	// RMSNorm, f32 out: bound 1e-6; f16 out: 1e-3 (f16 rounding).
	want := make([]float32, rows*dim)
	for r := range rows {
		ml.RMSNorm(want[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], w, 1e-5)
	}
	out := zeros(t, d, rows*dim)
	var a Args
	a.Ptr(out.b.Ptr).Ptr(xd.b.Ptr).Ptr(wd.b.Ptr).Ptr(0).I32(dim).F32(1e-5)
	launch(t, d, "kv_rmsnorm_f32", Dim3{rows, 1, 1}, Dim3{1024, 1, 1}, 0, &a)
	kernelOut(t).Less(relErr(out.f32(t, rows*dim), want), 1e-6)
	// Selected rows (the logits path).
	sel := upBytes(t, d, []byte{3, 0, 0, 0, 1, 0, 0, 0})
	a.Reset()
	a.Ptr(out.b.Ptr).Ptr(xd.b.Ptr).Ptr(wd.b.Ptr).Ptr(sel.b.Ptr).I32(dim).F32(1e-5)
	launch(t, d, "kv_rmsnorm_f32", Dim3{2, 1, 1}, Dim3{256, 1, 1}, 0, &a)
	got := out.f32(t, 2*dim)
	kernelOut(t).Less(relErr(got[:dim], want[3*dim:4*dim]), 1e-6)
	kernelOut(t).Less(relErr(got[dim:], want[dim:2*dim]), 1e-6)
	oh := upBytes(t, d, make([]byte, 2*rows*dim))
	a.Reset()
	a.Ptr(oh.b.Ptr).Ptr(xd.b.Ptr).Ptr(wd.b.Ptr).Ptr(0).I32(dim).F32(1e-5)
	launch(t, d, "kv_rmsnorm_f16", Dim3{rows, 1, 1}, Dim3{1024, 1, 1}, 0, &a)
	hb := oh.raw(t, 2*rows*dim)
	gotH := make([]float32, rows*dim)
	for i := range gotH {
		gotH[i] = ml.F16ToF32(uint16(hb[2*i]) | uint16(hb[2*i+1])<<8)
	}
	kernelOut(t).Less(relErr(gotH, want), 1e-3)

	// SiLU-mul: gu rows hold gate then up. Bound 1e-5 (ex2.approx).
	const hidden = 1500
	gu := randF32(rng, rows*2*hidden, 6)
	gud := upF32(t, d, gu)
	so := zeros(t, d, rows*hidden)
	a.Reset()
	a.Ptr(so.b.Ptr).Ptr(gud.b.Ptr).I32(rows).I32(hidden)
	launch(t, d, "kv_silu_mul_f32", Grid1D(rows*hidden, 256, 64), Dim3{256, 1, 1}, 0, &a)
	wantS := make([]float32, 0, rows*hidden)
	for r := range rows {
		g := append([]float32(nil), gu[r*2*hidden:r*2*hidden+hidden]...)
		ml.SiLUMul(g, gu[r*2*hidden+hidden:(r+1)*2*hidden])
		wantS = append(wantS, g...)
	}
	kernelOut(t).Less(relErr(so.f32(t, rows*hidden), wantS), 1e-5)

	// Residual add: exact.
	y := randF32(rng, rows*dim, 2)
	yd := upF32(t, d, y)
	a.Reset()
	a.Ptr(xd.b.Ptr).Ptr(yd.b.Ptr).I64(rows * dim)
	launch(t, d, "kv_add", Grid1D(rows*dim, 256, 16), Dim3{256, 1, 1}, 0, &a)
	wantA := append([]float32(nil), x...)
	ml.Add(wantA, y)
	kernelOut(t).Equal(wantA, xd.f32(t, rows*dim))

	// Embedding gather: exact for f32 and f16 tables.
	table := randF32(rng, vocab*dim, 1)
	toks := []int32{5, 299, 0, 5, 17}
	tk := upBytes(t, d, i32b(toks))
	for _, f16 := range []bool{false, true} {
		var tab dbuf
		name := "kv_embed_f32"
		src := table
		if f16 {
			tab, name, src = upBytes(t, d, f16Bytes(table)), "kv_embed_f16", roundF16(table)
		} else {
			tab = upF32(t, d, table)
		}
		e := zeros(t, d, rows*dim)
		a.Reset()
		a.Ptr(e.b.Ptr).Ptr(tab.b.Ptr).Ptr(tk.b.Ptr).I32(dim)
		launch(t, d, name, Dim3{rows, 1, 1}, Dim3{256, 1, 1}, 0, &a)
		var wantE []float32
		for _, tok := range toks {
			wantE = append(wantE, src[int(tok)*dim:(int(tok)+1)*dim]...)
		}
		kernelOut(t).Equal(wantE, e.f32(t, rows*dim), name)
	}

	// Argmax: exact, first index on ties.
	lg := randF32(rng, rows*vocab, 5)
	lg[2*vocab+7], lg[2*vocab+200] = 50, 50
	ld := upF32(t, d, lg)
	am := upBytes(t, d, make([]byte, 4*rows))
	a.Reset()
	a.Ptr(am.b.Ptr).Ptr(ld.b.Ptr).I32(vocab)
	launch(t, d, "kv_argmax", Dim3{rows, 1, 1}, Dim3{1024, 1, 1}, 0, &a)
	ab := am.raw(t, 4*rows)
	for r := range rows {
		best := 0
		for j, v := range lg[r*vocab : (r+1)*vocab] {
			if v > lg[r*vocab+best] {
				best = j
			}
		}
		kernelOut(t).Equal(best, int(int32(uint32(ab[4*r])|uint32(ab[4*r+1])<<8|uint32(ab[4*r+2])<<16|uint32(ab[4*r+3])<<24)), "row %d", r)
	}
}

func i32b(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := uint32(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

func i64b(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		putU64(b[8*i:], uint64(x))
	}
	return b
}

func TestGPURoPE(t *testing.T) {
	d := gpuOrSkip(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, heads, hd, rd = 4, 6, 64, 48
	stride := heads*hd + 10
	v := randF32(rng, rows*stride, 2)
	pos := []int32{0, 1, 777, 4095}
	cs := make([]float32, 4096*rd)
	for p := range 4096 {
		for i := 0; i < rd; i += 2 {
			freq := 1 / float32(math.Pow(10000, float64(float32(i)/float32(hd))))
			val := float32(p) * freq
			cs[p*rd+i], cs[p*rd+i+1] = float32(math.Cos(float64(val))), float32(math.Sin(float64(val)))
		}
	}
	vd, csd, pd := upF32(t, d, v), upF32(t, d, cs), upBytes(t, d, i32b(pos))
	var a Args
	a.Ptr(vd.b.Ptr).Ptr(csd.b.Ptr).Ptr(pd.b.Ptr).I32(stride).I32(heads).I32(hd).I32(rd)
	launch(t, d, "kv_rope", Dim3{rows, 1, 1}, Dim3{128, 1, 1}, 0, &a)
	want := append([]float32(nil), v...)
	for r := range rows {
		ml.RoPE(want[r*stride:r*stride+heads*hd], hd, rd, int(pos[r]), 10000, 1)
	}
	kernelOut(t).Less(relErr(vd.f32(t, rows*stride), want), 1e-6)
}

func TestGPUGemm(t *testing.T) {
	d := gpuOrSkip(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, sh := range [][3]int{{1, 2048, 512}, {7, 300, 129}, {64, 256, 1024}} {
		n, out, in := sh[0], sh[1], sh[2]
		x := randF32(rng, n*in, 1)
		w := randF32(rng, out*in, 0.1)
		y0 := randF32(rng, n*out, 1)
		want := make([]float32, n*out)
		ml.MatMul(want, x, n, ml.FromF32(out, in, w))
		for i := range want {
			want[i] += y0[i]
		}
		xd, wd := upF32(t, d, x), upF32(t, d, w)
		// f32: bound 1e-5 relative (cuBLAS without TF32, or the tiled kernel).
		for _, kernel := range []bool{true, false} {
			yd := upF32(t, d, y0)
			require.NoError(t, d.Run(func(q *Queue) error {
				var err error
				if kernel {
					err = q.GemmKernelF32(yd.b.Ptr, xd.b.Ptr, wd.b.Ptr, n, out, in, 1)
				} else {
					err = q.GemmF32(yd.b.Ptr, xd.b.Ptr, wd.b.Ptr, n, out, in, 1)
				}
				if err != nil {
					return err
				}
				return q.Sync()
			}))
			kernelOut(t).Less(relErr(yd.f32(t, n*out), want), 1e-5, "f32 gemm %v kernel=%v", sh, kernel)
		}
		// f16 weights: the reference uses the same rounded weights; bound
		// 1e-5 for the kernel (f32 activations), 2e-3 for GemmEx (f16
		// activations, f32 accumulation).
		wh := roundF16(w)
		want16 := make([]float32, n*out)
		ml.MatMul(want16, x, n, ml.FromF32(out, in, wh))
		for i := range want16 {
			want16[i] += y0[i]
		}
		whd := upBytes(t, d, f16Bytes(w))
		yd := upF32(t, d, y0)
		require.NoError(t, d.Run(func(q *Queue) error {
			if err := q.GemmKernelF16W(yd.b.Ptr, xd.b.Ptr, whd.b.Ptr, n, out, in, 1); err != nil {
				return err
			}
			return q.Sync()
		}))
		kernelOut(t).Less(relErr(yd.f32(t, n*out), want16), 1e-5, "f16-weight kernel gemm %v", sh)
		var has bool
		require.NoError(t, d.Run(func(q *Queue) error { has = q.HasGemmEx(); return nil }))
		if !has {
			t.Logf("cublasGemmEx unavailable; f16 cuBLAS path not tested")
			continue
		}
		xhd := upBytes(t, d, f16Bytes(x))
		yd = upF32(t, d, y0)
		require.NoError(t, d.Run(func(q *Queue) error {
			if err := q.GemmF16(yd.b.Ptr, xhd.b.Ptr, whd.b.Ptr, n, out, in, 1); err != nil {
				return err
			}
			return q.Sync()
		}))
		kernelOut(t).Less(relErr(yd.f32(t, n*out), want16), 2e-3, "GemmEx f16 %v", sh)
	}
}

// TestGPUPagedAttention writes K/V of random rows into shuffled pages with
// kv_write and checks kv_attention against a direct CPU computation, for
// every KV dtype, with GQA, partial last pages and causal spans (a chunked
// prefill of 9 rows of one sequence and decode rows of two others).
func TestGPUPagedAttention(t *testing.T) {
	d := gpuOrSkip(t)
	rng := rand.New(rand.NewPCG(13, 14))
	const heads, kvHeads, hd, ps, layers, layer = 8, 2, 64, 4, 3, 1
	kvDim := kvHeads * hd
	qDim := heads * hd
	stride := qDim + 2*kvDim
	pageElems := layers * 2 * ps * kvDim
	const npages = 16
	// Sequences: A has 20 tokens written before, B 3, C prefill 9 from 0.
	type seq struct {
		pages   []uint32
		written int
		rows    int
	}
	perm := rng.Perm(npages)
	seqs := []seq{{pages: u32s(perm[0:6]), written: 20, rows: 1}, {pages: u32s(perm[6:7]), written: 3, rows: 1}, {pages: u32s(perm[7:10]), written: 0, rows: 9}}
	for _, kd := range []device.DType{device.F32, device.F16, device.BF16} {
		kvn := map[device.DType]string{device.F32: "f32", device.F16: "f16", device.BF16: "bf16"}[kd]
		round := func(v []float32) []float32 { return v }
		if kd == device.F16 {
			round = roundF16
		} else if kd == device.BF16 {
			round = roundBF16
		}
		// Host mirror of the arena (f32 values as stored).
		kv := make([]float32, npages*pageElems)
		for i := range kv {
			kv[i] = float32(math.NaN()) // unwritten slots must never be read
		}
		var qkv []float32
		var koff []int64
		var span, pageOff, npg []int32
		var allPages []uint32
		type rowRef struct{ s, pos int }
		var rows []rowRef
		for si, s := range seqs {
			off := int32(len(allPages))
			allPages = append(allPages, s.pages...)
			for p := range s.written { // previously written tokens
				for _, which := range []int{0, 1} {
					o := int(s.pages[p/ps])*pageElems + ((layer*2+which)*ps+p%ps)*kvDim
					copy(kv[o:o+kvDim], round(randF32(rng, kvDim, 1)))
				}
			}
			for j := range s.rows {
				pos := s.written + j
				qkv = append(qkv, randF32(rng, stride, 1)...)
				koff = append(koff, int64(s.pages[pos/ps])*int64(pageElems)+int64(pos%ps*kvDim))
				span = append(span, int32(pos+1))
				pageOff = append(pageOff, off)
				npg = append(npg, int32(len(s.pages)))
				rows = append(rows, rowRef{si, pos})
			}
		}
		n := len(rows)
		// Device arena from the host mirror in the KV dtype.
		var raw []byte
		switch kd {
		case device.F32:
			raw = append([]byte(nil), ml.F32Bytes(kv)...)
		case device.F16:
			raw = f16Bytes(kv)
		case device.BF16:
			raw = make([]byte, 2*len(kv))
			for i, x := range kv {
				h := ml.F32ToBF16(x)
				raw[2*i], raw[2*i+1] = byte(h), byte(h>>8)
			}
		}
		ar := upBytes(t, d, raw)
		qd := upF32(t, d, qkv)
		kd2 := upBytes(t, d, i64b(koff))
		var a Args
		a.Ptr(ar.b.Ptr).Ptr(qd.b.Ptr).Ptr(kd2.b.Ptr).I32(stride).I32(qDim).I32(qDim + kvDim).I32(kvDim).
			I64(int64(2 * ps * kvDim)).I64(int64(ps * kvDim)).I32(layer)
		launch(t, d, "kv_write_"+kvn, Dim3{uint32(n), 1, 1}, Dim3{128, 1, 1}, 0, &a)
		// Mirror the write on the host.
		for i := range n {
			o := int(koff[i]) + layer*2*ps*kvDim
			copy(kv[o:o+kvDim], round(qkv[i*stride+qDim:i*stride+qDim+kvDim]))
			copy(kv[o+ps*kvDim:o+ps*kvDim+kvDim], round(qkv[i*stride+qDim+kvDim:i*stride+qDim+2*kvDim]))
		}
		sp, po, np, pg := upBytes(t, d, i32b(span)), upBytes(t, d, i32b(pageOff)), upBytes(t, d, i32b(npg)), upBytes(t, d, i32b(i32s(allPages)))
		out := zeros(t, d, n*qDim)
		scale := float32(1 / math.Sqrt(hd))
		group := heads / kvHeads
		a.Reset()
		a.Ptr(out.b.Ptr).Ptr(qd.b.Ptr).Ptr(ar.b.Ptr).Ptr(sp.b.Ptr).Ptr(po.b.Ptr).Ptr(np.b.Ptr).Ptr(pg.b.Ptr).
			I32(stride).I32(heads).I32(kvHeads).I32(hd).I32(ps).I64(int64(pageElems)).I32(layer).F32(scale).
			F32(0).I32(0).Ptr(0) // no soft-cap, no sliding window, no sinks
		launch(t, d, "kv_attention_"+kvn+"_f32", Dim3{uint32(n), kvHeads, 1}, Dim3{128, 1, 1}, 4*(group*hd+4*group*(hd+2)), &a)
		// The same with attention sinks (gpt-oss): one logit per query
		// head in the denominator.
		sinks := randF32(rng, heads, 2)
		sk := upF32(t, d, sinks)
		outSink := zeros(t, d, n*qDim)
		a.Reset()
		a.Ptr(outSink.b.Ptr).Ptr(qd.b.Ptr).Ptr(ar.b.Ptr).Ptr(sp.b.Ptr).Ptr(po.b.Ptr).Ptr(np.b.Ptr).Ptr(pg.b.Ptr).
			I32(stride).I32(heads).I32(kvHeads).I32(hd).I32(ps).I64(int64(pageElems)).I32(layer).F32(scale).
			F32(0).I32(0).Ptr(sk.b.Ptr)
		launch(t, d, "kv_attention_"+kvn+"_f32", Dim3{uint32(n), kvHeads, 1}, Dim3{128, 1, 1}, 4*(group*hd+4*group*(hd+2)), &a)
		want := make([]float32, n*qDim)
		wantSink := make([]float32, n*qDim)
		for i, rr := range rows {
			s := seqs[rr.s]
			for h := range heads {
				q := qkv[i*stride+h*hd : i*stride+(h+1)*hd]
				kvh := h / group
				sc := make([]float32, rr.pos+1)
				for p := range sc {
					o := int(s.pages[p/ps])*pageElems + (layer*2*ps+p%ps)*kvDim + kvh*hd
					sc[p] = ml.Dot(q, kv[o:o+hd]) * scale
				}
				scs := append([]float32(nil), sc...)
				ml.Softmax(sc)
				ml.SoftmaxSink(scs, sinks[h])
				o := want[i*qDim+h*hd : i*qDim+(h+1)*hd]
				osk := wantSink[i*qDim+h*hd : i*qDim+(h+1)*hd]
				for p := range sc {
					vo := int(s.pages[p/ps])*pageElems + ((layer*2+1)*ps+p%ps)*kvDim + kvh*hd
					ml.Axpy(o, sc[p], kv[vo:vo+hd])
					ml.Axpy(osk, scs[p], kv[vo:vo+hd])
				}
			}
		}
		kernelOut(t).Less(relErr(outSink.f32(t, n*qDim), wantSink), 1e-5, "attention with sinks, %s KV", kvn)
		// Bound 1e-5: the K/V values are identical (the mirror is rounded
		// like the store), only the summation order and ex2.approx differ.
		kernelOut(t).Less(relErr(out.f32(t, n*qDim), want), 1e-5, "attention with %s KV", kvn)
	}
}

func u32s(v []int) []uint32 {
	o := make([]uint32, len(v))
	for i, x := range v {
		o[i] = uint32(x)
	}
	return o
}

func i32s(v []uint32) []int32 {
	o := make([]int32, len(v))
	for i, x := range v {
		o[i] = int32(x)
	}
	return o
}

func TestMain(m *testing.M) { os.Exit(cudastandin.Main(m, StandInViolations)) }

// kernelOut asserts on what a kernel computed: on the GPU-free stand-in,
// which checks launches but computes nothing, the assertions are not made.
func kernelOut(t testing.TB) *require.Assertions {
	t.Helper()
	if StandIn() {
		return require.New(discard{})
	}
	return require.New(t)
}

type discard struct{}

func (discard) Errorf(string, ...any) {}
func (discard) FailNow()              {}

// TestGPUArenaScrubsBounceBuffers (issue 25 item 7): with scrubbing on,
// the pinned bounce buffers a Download or Upload went through are zero
// when they go back to the device's idle list; without it they keep the
// last bytes copied (the control).
func TestGPUArenaScrubsBounceBuffers(t *testing.T) {
	d := gpuOrSkip(t)
	a, err := d.NewArena(1 << 20)
	require.NoError(t, err)
	defer a.Free()
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i%251) + 1
	}
	idle := func() [][]byte {
		d.bounceMu.Lock()
		defer d.bounceMu.Unlock()
		var out [][]byte
		for _, h := range d.bounce {
			out = append(out, h.Bytes())
		}
		return out
	}
	nonzero := func(bufs [][]byte) int {
		n := 0
		for _, b := range bufs {
			for _, c := range b {
				if c != 0 {
					n++
					break
				}
			}
		}
		return n
	}
	for _, scrub := range []bool{false, true} {
		// Start from no idle buffer, so that those seen after are the
		// ones these copies went through.
		d.bounceMu.Lock()
		old := d.bounce
		d.bounce = nil
		d.bounceMu.Unlock()
		for _, h := range old {
			require.NoError(t, h.Free())
		}
		a.SetScrubStaging(scrub)
		require.NoError(t, a.Upload(4096, src))
		got := make([]byte, len(src))
		require.NoError(t, a.Download(got, 4096))
		require.Equal(t, src, got)
		bufs := idle()
		require.NotEmpty(t, bufs)
		if scrub {
			require.Zero(t, nonzero(bufs), "a bounce buffer kept page bytes")
		} else {
			require.Positive(t, nonzero(bufs), "control: without scrubbing the last copy stays")
		}
	}
}
