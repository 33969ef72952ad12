package gpu

import (
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
)

// ErrMoE is wrapped by the error New returns for a model whose block the
// CUDA forward pass does not implement; the message names the missing
// piece (an expert gating kind the host routing does not know, or
// DeepSeek's multi-head latent attention).
// The CUDA runner runs the mixture-of-experts FFN itself (see moeLayer),
// attention sinks and the clamped SwiGLU. The CPU runner runs
// these models; the engine's device "auto" falls back to it. It matches
// model.ErrUnsupported (so the C API reports KVW_ERR_UNSUPPORTED) and
// model.ErrNotImplemented.
var ErrMoE error = moeError{}

type moeError struct{}

func (moeError) Error() string {
	return "gpu: part of this mixture-of-experts model is not implemented on CUDA (device cpu or auto runs it on the CPU)"
}

func (moeError) Unwrap() []error { return []error{model.ErrUnsupported, model.ErrNotImplemented} }

// Supports reports, as an error wrapping ErrMoE, why the CUDA runner
// cannot run w; nil when it can (as far as the block description goes).
func Supports(w *model.Weights) error {
	if w.Encoder != nil || w.Config.NonCausal {
		return fmt.Errorf("gpu: encoders and non-causal attention are not implemented on CUDA (use the CPU): %w", model.ErrNotImplemented)
	}
	if w.Config.Pooling != model.PoolingUnset {
		// The CUDA runner returns logits, not the hidden states an
		// embedding model is for: device auto runs it on the CPU.
		return fmt.Errorf("gpu: embedding models (%s.pooling_type %v) are not implemented on CUDA (use the CPU): %w", w.Config.Arch, w.Config.Pooling, model.ErrNotImplemented)
	}
	if err := supportsConfig(w.Config); err != nil {
		return err
	}
	return nil
}

func supportsConfig(c model.Config) error {
	if c.Block.MLA.KVRank > 0 {
		// The CUDA pass has no latent attention kernels (absorbed queries,
		// per-head attn_k_b/attn_v_b, values read from the K rows).
		return fmt.Errorf("%w: %s multi-head latent attention (DeepSeek-V2/V3 MLA) is not implemented on CUDA (use device cpu)", ErrMoE, c.Arch)
	}
	// The host routes as the CPU pass does (moeRoute.route); a gating kind
	// added to arch later must be added there too.
	if b := c.Block; b.MoE.Experts > 0 && b.MoE.Gating > arch.GatingSoftmaxSelected {
		return fmt.Errorf("%w: %s expert gating %d", ErrMoE, c.Arch, b.MoE.Gating)
	}
	return nil
}

// moeW is one mixture-of-experts layer on the device. Expert matrices are
// stored dequantized to the runner's weight type like every other matrix
// (so MXFP4 and K-quant experts run through the same GEMMs), expert after
// expert: expert e's gate|up block starts e*2*Hidden*Dim elements into gu
// and its down block e*Dim*Hidden elements into down.
type moeW struct {
	router   uint64 // [Experts][Dim], weight type
	gu, down uint64 // weight type
	// Per-expert biases (0: none), f32: [Experts][2*Hidden] gate|up and
	// [Experts][Dim] down.
	guBias, downBias uint64
	// Routing biases, applied on the host (nil: none).
	routerBias, selectBias []float32
	// The shared expert (shHidden 0: none): [2*shHidden][Dim] gate|up,
	// [Dim][shHidden] down, and its gate input row [1][Dim] (0: no gate).
	shGU, shDown, shGate uint64
	shHidden             int
}

func (r *Runner) uploadExperts(e *model.Experts) (*moeW, error) {
	c := r.cfg
	m := c.Block.MoE
	d := &moeW{routerBias: e.RouterBias, selectBias: e.SelectBias}
	var err error
	if d.router, err = r.uploadMats(e.Router); err != nil {
		return nil, err
	}
	gu := make([]*ml.Matrix, 0, 2*len(e.Gate))
	for x := range e.Gate {
		gu = append(gu, e.Gate[x], e.Up[x])
	}
	if d.gu, err = r.uploadMats(gu...); err != nil {
		return nil, err
	}
	if d.down, err = r.uploadMats(e.Down...); err != nil {
		return nil, err
	}
	if e.GateBias != nil || e.UpBias != nil {
		b := make([]float32, m.Experts*2*m.Hidden)
		for x := range m.Experts {
			if e.GateBias != nil {
				copy(b[x*2*m.Hidden:], e.GateBias[x])
			}
			if e.UpBias != nil {
				copy(b[x*2*m.Hidden+m.Hidden:], e.UpBias[x])
			}
		}
		if d.guBias, err = r.uploadVec(b); err != nil {
			return nil, err
		}
	}
	if e.DownBias != nil {
		b := make([]float32, 0, m.Experts*c.Dim)
		for _, v := range e.DownBias {
			b = append(b, v...)
		}
		if d.downBias, err = r.uploadVec(b); err != nil {
			return nil, err
		}
	}
	if e.SharedUp == nil {
		return d, nil
	}
	d.shHidden = e.SharedUp.Rows
	if d.shGU, err = r.uploadMats(e.SharedGate, e.SharedUp); err != nil {
		return nil, err
	}
	if d.shDown, err = r.uploadMats(e.SharedDown); err != nil {
		return nil, err
	}
	if e.SharedGateInp != nil {
		g, err := ml.NewMatrix(ml.F32, 1, c.Dim, ml.F32Bytes(e.SharedGateInp))
		if err != nil {
			return nil, err
		}
		if d.shGate, err = r.uploadMats(g); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// moeRoute is one step's routing of one layer, computed on the host.
type moeRoute struct {
	// Per (token, choice), n*Used entries: the chosen expert, its weight,
	// and its row in the expert-grouped order.
	idx  []int32
	wts  []float32
	slot []int32
	// Per grouped row: its token.
	tok []int32
	// Per expert: first grouped row (Experts+1 entries).
	start []int
	// Scratch.
	order  []int
	chosen []int
	sel    []float32
	count  []int
}

// route computes the routing of n tokens from their router logits (n x
// Experts, modified in place) with the CPU pass's model.RouteToken, then
// groups the (token, choice) pairs by expert.
func (rt *moeRoute) route(m arch.MoE, logits []float32, n int, routerBias, selectBias []float32) {
	E, k := m.Experts, m.Used
	rt.idx = grow(rt.idx, n*k)
	rt.wts = grow(rt.wts, n*k)
	rt.slot = grow(rt.slot, n*k)
	rt.tok = grow(rt.tok, n*k)
	rt.start = grow(rt.start, E+1)
	rt.count = grow(rt.count, E)
	rt.order = grow(rt.order, E)
	rt.sel = grow(rt.sel, E)
	rt.chosen = grow(rt.chosen, k)
	for t := range n {
		model.RouteToken(m, logits[t*E:(t+1)*E], routerBias, selectBias, rt.sel, rt.order, rt.chosen, rt.wts[t*k:(t+1)*k])
		for j, ex := range rt.chosen {
			rt.idx[t*k+j] = int32(ex)
		}
	}
	clear(rt.count)
	for _, ex := range rt.idx {
		rt.count[ex]++
	}
	rt.start[0] = 0
	for ex := range E {
		rt.start[ex+1] = rt.start[ex] + rt.count[ex]
	}
	clear(rt.count)
	for i, ex := range rt.idx {
		s := rt.start[ex] + rt.count[ex]
		rt.count[ex]++
		rt.slot[i] = int32(s)
		rt.tok[s] = int32(i / k)
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// moeHostBytes is the pinned buffer an MoE step needs for n rows: the
// router logits downloaded, then tok, slot and wts uploaded.
func (r *Runner) moeHostBytes(n int) int {
	m := r.cfg.Block.MoE
	if m.Experts == 0 {
		return 0
	}
	return 4*n*m.Experts + 3*4*n*m.Used + 64
}

// moeLayer queues layer l's mixture-of-experts FFN of the n normalised rows
// in xh, writing the FFN's output (n x Dim, f32) to out. The router
// product runs on the device; its n x Experts logits (4*Experts bytes a
// token: 512 bytes for 128 experts) come back to the host, which waits for
// them (one stream synchronisation per MoE layer and step: a few
// microseconds plus the queue's drain, paid at every batch size), routes
// the tokens as the CPU pass does, and queues one GEMM per selected expert
// and projection over that expert's tokens, gathered and normalised again
// from x by the RMSNorm kernel's row list. So each selected expert's
// weights are read once per step, and only the selected experts' weights.
func (r *Runner) moeLayer(q *cuda.Queue, l, n int, lay layout, x, xh, out uint64, gemm func(y, xin, w uint64, rows, out, in int, beta float32) error) error {
	c := r.cfg
	m := c.Block.MoE
	d := r.layers[l].moe
	L := &r.layers[l]
	s := r.scratch.Ptr
	E, k, H, dim := m.Experts, m.Used, m.Hidden, c.Dim
	ah := uint64(4)
	act := "f32"
	if r.half {
		ah, act = 2, "f16"
	}
	es := uint64(r.wdt.Size())
	logits := s + uint64(lay.mLogits)
	if err := gemm(logits, xh, d.router, n, E, dim, 0); err != nil {
		return err
	}
	if err := q.DownloadAsync(r.hostMoE, 0, logits, 4*n*E); err != nil {
		return err
	}
	if err := q.Sync(); err != nil {
		return err
	}
	hb := r.hostMoE.Bytes()
	lg := unsafe.Slice((*float32)(unsafe.Pointer(&hb[0])), n*E)
	rt := &r.route
	rt.route(m, lg, n, d.routerBias, d.selectBias)
	// tok, slot, wts follow the logits in the pinned buffer, the same
	// order as in the scratch layout; the upload is queued before the next
	// layer's download, whose synchronisation it precedes, so the host does
	// not rewrite them under a pending copy.
	off := 4 * n * E
	pk := n * k
	copy(hb[off:], i32Bytes(rt.tok[:pk]))
	copy(hb[off+4*pk:], i32Bytes(rt.slot[:pk]))
	copy(hb[off+8*pk:], unsafe.Slice((*byte)(unsafe.Pointer(&rt.wts[0])), 4*pk))
	tok := s + uint64(lay.mTok)
	if err := q.UploadAsync(tok, r.hostMoE, off, 12*pk); err != nil {
		return err
	}
	slot, wts := tok+uint64(4*pk), tok+uint64(8*pk)

	xe, gue, he, ye := s+uint64(lay.mXE), s+uint64(lay.mGU), s+uint64(lay.mH), s+uint64(lay.mY)
	var a cuda.Args
	normBlock := min(1024, cuda.BlockFor(dim))
	a.Ptr(xe).Ptr(x).Ptr(L.ffnNorm).Ptr(tok).I32(dim).F32(c.NormEps)
	if err := q.Launch("kv_rmsnorm_"+act, cuda.Dim3{X: uint32(pk), Y: 1, Z: 1}, cuda.Dim3{X: uint32(normBlock), Y: 1, Z: 1}, 0, &a); err != nil {
		return err
	}
	elementwise := func(name string, count int64, a *cuda.Args) error {
		return q.Launch(name, cuda.Grid1D(count, 256, 4096), cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, a)
	}
	for ex := range E {
		lo, cnt := rt.start[ex], rt.start[ex+1]-rt.start[ex]
		if cnt == 0 {
			continue
		}
		g := gue + uint64(lo*2*H*4)
		if err := gemm(g, xe+uint64(lo*dim)*ah, d.gu+uint64(ex*2*H*dim)*es, cnt, 2*H, dim, 0); err != nil {
			return err
		}
		if d.guBias != 0 {
			a.Reset()
			a.Ptr(g).Ptr(d.guBias + uint64(ex*2*H*4)).I32(cnt).I32(2 * H).I32(2 * H)
			if err := elementwise("kv_bias_add", int64(cnt)*int64(2*H), &a); err != nil {
				return err
			}
		}
	}
	a.Reset()
	a.Ptr(he).Ptr(gue).I32(pk).I32(H)
	actKernel := "kv_silu_mul_" + act
	switch c.Block.Activation {
	case arch.GeGLU:
		actKernel = "kv_gelu_mul_" + act
	case arch.SwiGLUOAI:
		actKernel = "kv_swiglu_oai_mul_" + act
		a.F32(arch.SwiGLUOAIAlpha).F32(arch.SwiGLUOAILimit)
	}
	if err := elementwise(actKernel, int64(pk)*int64(H), &a); err != nil {
		return err
	}
	for ex := range E {
		lo, cnt := rt.start[ex], rt.start[ex+1]-rt.start[ex]
		if cnt == 0 {
			continue
		}
		y := ye + uint64(lo*dim*4)
		if err := gemm(y, he+uint64(lo*H)*ah, d.down+uint64(ex*dim*H)*es, cnt, dim, H, 0); err != nil {
			return err
		}
		if d.downBias != 0 {
			a.Reset()
			a.Ptr(y).Ptr(d.downBias + uint64(ex*dim*4)).I32(cnt).I32(dim).I32(dim)
			if err := elementwise("kv_bias_add", int64(cnt)*int64(dim), &a); err != nil {
				return err
			}
		}
	}
	a.Reset()
	a.Ptr(out).Ptr(ye).Ptr(slot).Ptr(wts).I32(n).I32(k).I32(dim)
	if err := elementwise("kv_moe_combine", int64(n)*int64(dim), &a); err != nil {
		return err
	}
	if d.shHidden == 0 {
		return nil
	}
	// The shared expert: always SiLU-gated, as in the CPU pass.
	sh := d.shHidden
	sgu, shh, ys, sg := s+uint64(lay.sGU), s+uint64(lay.sH), s+uint64(lay.sY), s+uint64(lay.sG)
	if err := gemm(sgu, xh, d.shGU, n, 2*sh, dim, 0); err != nil {
		return err
	}
	a.Reset()
	a.Ptr(shh).Ptr(sgu).I32(n).I32(sh)
	if err := elementwise("kv_silu_mul_"+act, int64(n)*int64(sh), &a); err != nil {
		return err
	}
	if err := gemm(ys, shh, d.shDown, n, dim, sh, 0); err != nil {
		return err
	}
	gate := uint64(0)
	if d.shGate != 0 {
		if err := gemm(sg, xh, d.shGate, n, 1, dim, 0); err != nil {
			return err
		}
		gate = sg
	}
	a.Reset()
	a.Ptr(out).Ptr(ys).Ptr(gate).I32(n).I32(dim)
	return elementwise("kv_moe_shared_add", int64(n)*int64(dim), &a)
}

// moeLayout adds the MoE buffers to the scratch layout for n rows.
func (r *Runner) moeLayout(l *layout, n int, take func(int64) int64) {
	m := r.cfg.Block.MoE
	if m.Experts == 0 {
		return
	}
	ah := int64(4)
	if r.half {
		ah = 2
	}
	N, pk, dim, H := int64(n), int64(n*m.Used), int64(r.cfg.Dim), int64(m.Hidden)
	l.mLogits = take(N * int64(m.Experts) * 4)
	l.mTok = take(3 * pk * 4) // tok, slot, wts
	l.mXE = take(pk * dim * ah)
	l.mGU = take(pk * 2 * H * 4)
	l.mH = take(pk * H * ah)
	l.mY = take(pk * dim * 4)
	if sh := int64(r.shHidden); sh > 0 {
		l.sGU = take(N * 2 * sh * 4)
		l.sH = take(N * sh * ah)
		l.sY = take(N * dim * 4)
		l.sG = take(N * 4)
	}
}
