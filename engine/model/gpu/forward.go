package gpu

import (
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
)

func (r *Runner) forward(b *model.Batch, argmax []int) error {
	m, n, err := r.plan(b)
	if err != nil {
		return err
	}
	if cap(b.Logits) < len(b.Seqs) {
		b.Logits = make([][]float32, len(b.Seqs))
	}
	b.Logits = b.Logits[:len(b.Seqs)]
	clear(b.Logits)
	if n == 0 {
		return nil
	}
	maxPos := 0
	for _, p := range m.pos {
		maxPos = max(maxPos, int(p)+1)
	}
	if err := r.ensureRope(maxPos); err != nil {
		return err
	}
	nl := len(m.logitRows)
	lay := r.layoutFor(n, nl)
	if lay.total > r.scratch.Len {
		if err := r.dev.Free(r.scratch); err != nil {
			return err
		}
		r.scratch = cuda.Buffer{}
		if r.scratch, err = r.dev.Alloc(lay.total + lay.total/4); err != nil {
			return fmt.Errorf("gpu: scratch for %d rows: %w", n, err)
		}
	}
	metaBytes := 4*(6*n+len(m.pages)+nl) + 8*n + 64
	if metaBytes > len(r.hostMeta.Bytes()) {
		if err := r.hostMeta.Free(); err != nil {
			return err
		}
		if r.hostMeta, err = r.dev.HostAlloc(2 * metaBytes); err != nil {
			return err
		}
	}
	offs, used, err := packMeta(r.hostMeta.Bytes(), m)
	if err != nil {
		return err
	}
	if int64(used) > r.meta.Len {
		if err := r.dev.Free(r.meta); err != nil {
			return err
		}
		r.meta = cuda.Buffer{}
		if r.meta, err = r.dev.Alloc(int64(len(r.hostMeta.Bytes()))); err != nil {
			return err
		}
	}
	if mb := r.moeHostBytes(n); mb > 0 && (r.hostMoE == nil || len(r.hostMoE.Bytes()) < mb) {
		if r.hostMoE != nil {
			if err := r.hostMoE.Free(); err != nil {
				return err
			}
			r.hostMoE = nil
		}
		if r.hostMoE, err = r.dev.HostAlloc(max(2*mb, 4096)); err != nil {
			return err
		}
	}
	outBytes := nl * 4
	if argmax == nil {
		outBytes = nl * r.cfg.Vocab * 4
	}
	if r.hostOut == nil || len(r.hostOut.Bytes()) < outBytes {
		if r.hostOut != nil {
			if err := r.hostOut.Free(); err != nil {
				return err
			}
		}
		if r.hostOut, err = r.dev.HostAlloc(max(outBytes, 4096)); err != nil {
			return err
		}
	}
	err = r.runStep(func(q *cuda.Queue) error {
		if err := q.UploadAsync(r.meta.Ptr, r.hostMeta, 0, used); err != nil {
			return err
		}
		mp := func(i int) uint64 { return r.meta.Ptr + uint64(offs[i]) }
		if err := r.enqueue(q, n, nl, lay, mp, argmax != nil); err != nil {
			return err
		}
		if nl > 0 {
			src := r.scratch.Ptr + uint64(lay.logits)
			if argmax != nil {
				src = r.scratch.Ptr + uint64(lay.arg)
			}
			if err := q.DownloadAsync(r.hostOut, 0, src, outBytes); err != nil {
				return err
			}
		}
		// The step is complete on the device when this returns: its page
		// leases may be dropped, and Advance may checksum the pages.
		return q.Sync()
	})
	if err != nil {
		return fmt.Errorf("gpu: forward step of %d rows: %w", n, err)
	}
	if nl > 0 {
		if argmax != nil {
			for i := range argmax[:len(b.Seqs)] {
				argmax[i] = -1
			}
			res := unsafe.Slice((*int32)(unsafe.Pointer(&r.hostOut.Bytes()[0])), nl)
			for j, si := range m.want {
				argmax[si] = int(res[j])
			}
		} else {
			v := r.cfg.Vocab
			r.logits = ml.Grow(r.logits, nl*v)
			copy(r.logits, unsafe.Slice((*float32)(unsafe.Pointer(&r.hostOut.Bytes()[0])), nl*v))
			// A sequence's rows are consecutive (Seq.Draft): its slice
			// spans all of them.
			for j := 0; j < len(m.want); {
				si := m.want[j]
				k := b.Seqs[si].LogitRows()
				b.Logits[si] = r.logits[j*v : (j+k)*v : (j+k)*v]
				j += k
			}
		}
	}
	b.Advance()
	return nil
}

// enqueue queues the whole step on the compute stream.
func (r *Runner) enqueue(q *cuda.Queue, n, nl int, lay layout, mp func(int) uint64, argmax bool) error {
	c := r.cfg
	s := r.scratch.Ptr
	x, xh, qkv, att, gu, hh := s+uint64(lay.x), s+uint64(lay.xh), s+uint64(lay.qkv), s+uint64(lay.att), s+uint64(lay.gu), s+uint64(lay.hh)
	tokens, pos, span, pageOff, npages, koff, pages, logitRows := mp(0), mp(1), mp(2), mp(3), mp(4), mp(5), mp(6), mp(7)
	qDim := c.Heads * c.HeadDim
	kvDim := c.KVDim()
	qkvW := qDim + 2*kvDim
	act := "f32"
	if r.half {
		act = "f16"
	}
	wsfx := "f32"
	if r.wdt.Size() == 2 {
		wsfx = "f16"
	}
	kvs, _ := kvName(r.geo.DType)
	row := func(name string, rows int, block int, a *cuda.Args) error {
		return q.Launch(name, cuda.Dim3{X: uint32(rows), Y: 1, Z: 1}, cuda.Dim3{X: uint32(block), Y: 1, Z: 1}, 0, a)
	}
	gemm := func(y, xin, w uint64, rows, out, in int, beta float32) error {
		switch {
		case r.half:
			return q.GemmF16(y, xin, w, rows, out, in, beta)
		case r.wdt.Size() == 2:
			return q.GemmKernelF16W(y, xin, w, rows, out, in, beta)
		case r.blas:
			return q.GemmF32(y, xin, w, rows, out, in, beta)
		}
		return q.GemmKernelF32(y, xin, w, rows, out, in, beta)
	}
	blk := c.Block
	elementwise := func(name string, count int64, a *cuda.Args) error {
		return q.Launch(name, cuda.Grid1D(count, 256, 4096), cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, a)
	}
	tmp := s + uint64(lay.tmp)
	// residual adds y (n x Dim, f32) to x, through a bias and a norm
	// first when the block has them.
	var a cuda.Args
	residual := func(y, bias, norm uint64) error {
		if bias != 0 {
			a.Reset()
			a.Ptr(y).Ptr(bias).I32(n).I32(c.Dim).I32(c.Dim)
			if err := elementwise("kv_bias_add", int64(n)*int64(c.Dim), &a); err != nil {
				return err
			}
		}
		if norm != 0 {
			a.Reset()
			a.Ptr(y).Ptr(y).Ptr(norm).Ptr(0).I32(c.Dim).F32(c.NormEps)
			if err := row("kv_rmsnorm_f32", n, min(1024, cuda.BlockFor(c.Dim)), &a); err != nil {
				return err
			}
		}
		a.Reset()
		a.Ptr(x).Ptr(y).I64(int64(n) * int64(c.Dim))
		return elementwise("kv_add", int64(n)*int64(c.Dim), &a)
	}
	a.Ptr(x).Ptr(r.embed).Ptr(tokens).I32(c.Dim)
	if err := row("kv_embed_"+wsfx, n, cuda.BlockFor(c.Dim), &a); err != nil {
		return err
	}
	if blk.EmbedScale != 0 {
		a.Reset()
		a.Ptr(x).I64(int64(n) * int64(c.Dim)).F32(blk.EmbedScale)
		if err := elementwise("kv_scale", int64(n)*int64(c.Dim), &a); err != nil {
			return err
		}
	}
	ropeKernel := "kv_rope"
	if blk.RopeStyle == arch.RopeNeoX {
		ropeKernel = "kv_rope_neox"
	}
	actKernel := "kv_silu_mul_" + act
	switch blk.Activation {
	case arch.GeGLU:
		actKernel = "kv_gelu_mul_" + act
	case arch.SwiGLUOAI:
		actKernel = "kv_swiglu_oai_mul_" + act
	}
	ps := r.geo.PageSize
	layerStride := int64(2 * ps * kvDim)
	vDelta := int64(ps * kvDim)
	group := c.Heads / c.KVHeads
	shmem := 4 * (group*c.HeadDim + 4*group*(c.HeadDim+2))
	scale := blk.Scale(c.HeadDim)
	normBlock := min(1024, cuda.BlockFor(c.Dim))
	for l := range c.Layers {
		L := &r.layers[l]
		window := 0
		if blk.Local(l) {
			window = blk.Window
		}
		a.Reset()
		a.Ptr(xh).Ptr(x).Ptr(L.attnNorm).Ptr(0).I32(c.Dim).F32(c.NormEps)
		if err := row("kv_rmsnorm_"+act, n, normBlock, &a); err != nil {
			return err
		}
		if err := gemm(qkv, xh, L.qkv, n, qkvW, c.Dim, 0); err != nil {
			return err
		}
		if L.qkvBias != 0 {
			a.Reset()
			a.Ptr(qkv).Ptr(L.qkvBias).I32(n).I32(qkvW).I32(qkvW)
			if err := elementwise("kv_bias_add", int64(n)*int64(qkvW), &a); err != nil {
				return err
			}
		}
		if blk.QKNorm {
			for _, h := range []struct {
				w          uint64
				col, heads int
			}{{L.qNorm, 0, c.Heads}, {L.kNorm, qDim, c.KVHeads}} {
				a.Reset()
				a.Ptr(qkv).Ptr(h.w).I32(qkvW).I32(h.col).I32(c.HeadDim).F32(c.NormEps)
				if err := q.Launch("kv_head_rmsnorm", cuda.Dim3{X: uint32(n), Y: uint32(h.heads), Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}, 0, &a); err != nil {
					return err
				}
			}
		}
		a.Reset()
		a.Ptr(qkv).Ptr(r.ropeTabs[r.ropeOf[l]].Ptr).Ptr(pos).I32(qkvW).I32(c.Heads + c.KVHeads).I32(c.HeadDim).I32(c.RopeDim)
		if err := row(ropeKernel, n, 128, &a); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(r.arena.Ptr()).Ptr(qkv).Ptr(koff).I32(qkvW).I32(qDim).I32(qDim + kvDim).I32(kvDim).I64(layerStride).I64(vDelta).I32(l)
		if err := row("kv_write_"+kvs, n, min(1024, cuda.BlockFor(kvDim)), &a); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(att).Ptr(qkv).Ptr(r.arena.Ptr()).Ptr(span).Ptr(pageOff).Ptr(npages).Ptr(pages).
			I32(qkvW).I32(c.Heads).I32(c.KVHeads).I32(c.HeadDim).I32(ps).I64(int64(r.geo.PageElems())).I32(l).F32(scale).
			F32(blk.AttnSoftcap).I32(window).Ptr(L.sinks)
		if err := q.Launch("kv_attention_"+kvs+"_"+act, cuda.Dim3{X: uint32(n), Y: uint32(c.KVHeads), Z: 1},
			cuda.Dim3{X: 128, Y: 1, Z: 1}, shmem, &a); err != nil {
			return err
		}
		if L.oBias != 0 || L.postAttn != 0 {
			if err := gemm(tmp, att, L.o, n, c.Dim, qDim, 0); err != nil {
				return err
			}
			if err := residual(tmp, L.oBias, L.postAttn); err != nil {
				return err
			}
		} else if err := gemm(x, att, L.o, n, c.Dim, qDim, 1); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(xh).Ptr(x).Ptr(L.ffnNorm).Ptr(0).I32(c.Dim).F32(c.NormEps)
		if err := row("kv_rmsnorm_"+act, n, normBlock, &a); err != nil {
			return err
		}
		if L.moe != nil {
			if err := r.moeLayer(q, l, n, lay, x, xh, tmp, gemm); err != nil {
				return err
			}
			if err := residual(tmp, 0, L.postFFN); err != nil {
				return err
			}
			continue
		}
		if err := gemm(gu, xh, L.gu, n, 2*c.Hidden, c.Dim, 0); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(hh).Ptr(gu).I32(n).I32(c.Hidden)
		if blk.Activation == arch.SwiGLUOAI {
			a.F32(arch.SwiGLUOAIAlpha).F32(arch.SwiGLUOAILimit)
		}
		if err := q.Launch(actKernel, cuda.Grid1D(int64(n)*int64(c.Hidden), 256, 4096), cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &a); err != nil {
			return err
		}
		if L.postFFN != 0 {
			if err := gemm(tmp, hh, L.down, n, c.Dim, c.Hidden, 0); err != nil {
				return err
			}
			if err := residual(tmp, 0, L.postFFN); err != nil {
				return err
			}
		} else if err := gemm(x, hh, L.down, n, c.Dim, c.Hidden, 1); err != nil {
			return err
		}
	}
	if nl == 0 {
		return nil
	}
	lx, logits := s+uint64(lay.lx), s+uint64(lay.logits)
	a.Reset()
	a.Ptr(lx).Ptr(x).Ptr(r.norm).Ptr(logitRows).I32(c.Dim).F32(c.NormEps)
	if err := row("kv_rmsnorm_"+act, nl, normBlock, &a); err != nil {
		return err
	}
	if err := gemm(logits, lx, r.output, nl, c.Vocab, c.Dim, 0); err != nil {
		return err
	}
	if blk.FinalSoftcap != 0 {
		a.Reset()
		a.Ptr(logits).I64(int64(nl) * int64(c.Vocab)).F32(blk.FinalSoftcap)
		if err := elementwise("kv_softcap", int64(nl)*int64(c.Vocab), &a); err != nil {
			return err
		}
	}
	if argmax {
		a.Reset()
		a.Ptr(s + uint64(lay.arg)).Ptr(logits).I32(c.Vocab)
		return row("kv_argmax", nl, 1024, &a)
	}
	return nil
}
