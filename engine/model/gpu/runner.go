// Package gpu runs the forward pass on a CUDA device over a page pool whose
// arena lives in device memory, interpreting the model's arch.Block as
// model.Runner does (the CPU pass is the reference its kernels are checked
// against). It mirrors model.Runner: a step
// writes the K/V of positions Table.Written().. through Table.Location,
// attends over Table.Pages() bounded by each row's position, and advances
// the tables only after the device has finished the step.
package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Options configure a Runner.
type Options struct {
	// Weights is the storage type of the weight matrices on the device:
	// device.F32 (the zero value) or device.F16 (DefaultOptions). f16 GEMMs
	// use cublasGemmEx; without cuBLAS the f16 weights go through the
	// fallback kernel with f32 activations.
	Weights device.DType
	// NoBLAS forces the fallback GEMM kernel (tests).
	NoBLAS bool
	// MaxContext is the longest request the runner serves (0: the model's
	// context length); it chooses LongRoPE's factors
	// (model.Weights.RopeFactors) as model.NewRunnerContext does.
	MaxContext int
}

type layerW struct {
	attnNorm, ffnNorm uint64 // f32
	qkv, o, gu, down  uint64 // wdt
	// Optional parts (0: absent), f32: the Q|K|V bias row (zeros where a
	// part has none), the output bias, Q/K norm and post-norm weights.
	// sinks: gpt-oss's attention sink logits, one per query head.
	qkvBias, oBias, qNorm, kNorm, postAttn, postFFN, sinks uint64
	// moe is the layer's mixture-of-experts FFN (nil: dense, gu and down).
	moe *moeW
}

// Runner is a forward pass on the GPU. Like model.Runner it is owned by
// one goroutine.
type Runner struct {
	dev   *cuda.Device
	cfg   model.Config
	pool  *kvcache.Pool
	arena *cuda.Arena
	geo   kvcache.Geometry
	wdt   device.DType
	half  bool // activations fed to GEMMs are f16 (cuBLAS GemmEx)
	blas  bool

	bufs   []cuda.Buffer
	embed  uint64
	output uint64
	norm   uint64
	layers []layerW

	ropes    []*model.Rope // distinct RoPE configurations
	ropeOf   []int         // per layer: index into ropes and ropeTabs
	ropeTabs []cuda.Buffer // cos/sin tables, one per configuration
	ropeRows int

	scratch  cuda.Buffer
	meta     cuda.Buffer
	hostMeta *cuda.HostBuffer
	hostOut  *cuda.HostBuffer
	logits   []float32

	// Mixture of experts: the pinned buffer of router logits and routing,
	// the host routing's buffers, the widest shared expert.
	hostMoE  *cuda.HostBuffer
	route    moeRoute
	shHidden int
}

// KVDtypes the attention and K/V write kernels support.
func kvName(d device.DType) (string, error) {
	switch d {
	case device.F32:
		return "f32", nil
	case device.F16:
		return "f16", nil
	case device.BF16:
		return "bf16", nil
	}
	return "", fmt.Errorf("gpu: KV dtype %v", d)
}

func newRunner(dev *cuda.Device, c model.Config, factors []float32, pool *kvcache.Pool, opt Options) (*Runner, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := supportsConfig(c); err != nil {
		return nil, err
	}
	if c.RopeDim == 0 {
		c.RopeDim = c.HeadDim
	}
	g := pool.Geometry()
	if g.Layers != c.Layers || g.KVHeads != c.KVHeads || g.HeadDim != c.HeadDim {
		return nil, fmt.Errorf("gpu: pool geometry (layers %d, kv heads %d, head dim %d) does not match the model (%d, %d, %d)",
			g.Layers, g.KVHeads, g.HeadDim, c.Layers, c.KVHeads, c.HeadDim)
	}
	if g.KOnly {
		// The kernels find a layer's K at layer*2*PageSize*KVDim and V
		// PageSize*KVDim after it (SlotOffset): a K-only page would be
		// read as another layer's rows.
		return nil, fmt.Errorf("%w: a K-only KV pool (latent attention's single plane) on CUDA", model.ErrNotImplemented)
	}
	if _, err := kvName(g.DType); err != nil {
		return nil, err
	}
	arena, ok := pool.Arena().(*cuda.Arena)
	if !ok {
		return nil, fmt.Errorf("gpu: the pool's arena (%T) is not device memory; build the pool on cuda.BackendFor(dev)", pool.Arena())
	}
	if dev == nil || arena.Device() != dev {
		return nil, fmt.Errorf("gpu: the pool's arena is not on the runner's device")
	}
	if c.HeadDim > 256 || c.Heads/c.KVHeads > 16 {
		return nil, fmt.Errorf("%w: head dim %d with %d query heads per KV head (the attention kernel takes head dim <= 256, <= 16 per KV head)",
			model.ErrNotImplemented, c.HeadDim, c.Heads/c.KVHeads)
	}
	wdt := opt.Weights
	if wdt != device.F32 && wdt != device.F16 {
		return nil, fmt.Errorf("gpu: weight type %v (want f32 or f16)", wdt)
	}
	r := &Runner{dev: dev, cfg: c, pool: pool, arena: arena, geo: g, wdt: wdt}
	r.ropes, r.ropeOf = model.Ropes(c, factors)
	r.ropeTabs = make([]cuda.Buffer, len(r.ropes))
	err := dev.Run(func(q *cuda.Queue) error {
		r.blas = q.HasBLAS() && !opt.NoBLAS
		r.half = wdt == device.F16 && r.blas && q.HasGemmEx()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.hostMeta, err = dev.HostAlloc(1 << 20); err != nil {
		return nil, err
	}
	return r, nil
}

// DefaultOptions stores weights as f16.
func DefaultOptions() Options { return Options{Weights: device.F16} }

// New uploads w to the device (matrices as opt.Weights, norms as f32) and
// returns a runner over pool, whose arena must be on dev.
func New(dev *cuda.Device, w *model.Weights, pool *kvcache.Pool, opt Options) (*Runner, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	if err := Supports(w); err != nil {
		return nil, err
	}
	ctx := opt.MaxContext
	if ctx <= 0 {
		ctx = w.Config.MaxContext
	}
	r, err := newRunner(dev, w.Config, w.RopeFactors(ctx), pool, opt)
	if err != nil {
		return nil, err
	}
	if err := r.upload(w); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Runner) alloc(n int64) (uint64, error) {
	b, err := r.dev.Alloc(n)
	if err != nil {
		return 0, err
	}
	r.bufs = append(r.bufs, b)
	return b.Ptr, nil
}

// encode converts f32 values to the weight type's bytes.
func (r *Runner) encode(dst []byte, src []float32) []byte {
	switch r.wdt {
	case device.F16:
		dst = dst[:0]
		for _, v := range src {
			dst = binary.LittleEndian.AppendUint16(dst, ml.F32ToF16(v))
		}
		return dst
	default:
		return append(dst[:0], ml.F32Bytes(src)...)
	}
}

// uploadMats stores the row-concatenation of mats as one device matrix.
func (r *Runner) uploadMats(mats ...*ml.Matrix) (uint64, error) {
	rows, cols := 0, mats[0].Cols
	for _, m := range mats {
		rows += m.Rows
	}
	es := int64(r.wdt.Size())
	ptr, err := r.alloc(int64(rows) * int64(cols) * es)
	if err != nil {
		return 0, err
	}
	row := make([]float32, cols)
	var enc []byte
	var chunk []byte
	off := uint64(0)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := r.dev.Run(func(q *cuda.Queue) error { return q.Upload(ptr+off, chunk) })
		off += uint64(len(chunk))
		chunk = chunk[:0]
		return err
	}
	for _, m := range mats {
		for i := range m.Rows {
			ml.Dequantize(row, m, i)
			enc = r.encode(enc, row)
			chunk = append(chunk, enc...)
			if len(chunk) >= 8<<20 {
				if err := flush(); err != nil {
					return 0, err
				}
			}
		}
	}
	return ptr, flush()
}

func (r *Runner) uploadVec(v []float32) (uint64, error) {
	ptr, err := r.alloc(int64(4 * len(v)))
	if err != nil {
		return 0, err
	}
	return ptr, r.dev.Run(func(q *cuda.Queue) error { return q.Upload(ptr, ml.F32Bytes(v)) })
}

func (r *Runner) upload(w *model.Weights) error {
	var err error
	if r.embed, err = r.uploadMats(w.Embed); err != nil {
		return err
	}
	if w.Output == w.Embed {
		r.output = r.embed
	} else if r.output, err = r.uploadMats(w.Output); err != nil {
		return err
	}
	if r.norm, err = r.uploadVec(w.Norm); err != nil {
		return err
	}
	r.layers = make([]layerW, len(w.Layers))
	for i := range w.Layers {
		L, d := &w.Layers[i], &r.layers[i]
		ffn := []struct {
			dst  *uint64
			mats []*ml.Matrix
			vec  []float32
		}{{&d.gu, []*ml.Matrix{L.Gate, L.Up}, nil}, {&d.down, []*ml.Matrix{L.Down}, nil}}
		if L.MoE != nil {
			if d.moe, err = r.uploadExperts(L.MoE); err != nil {
				return fmt.Errorf("gpu: layer %d experts: %w", i, err)
			}
			r.shHidden = max(r.shHidden, d.moe.shHidden)
			ffn = nil
		}
		for _, s := range append([]struct {
			dst  *uint64
			mats []*ml.Matrix
			vec  []float32
		}{
			{&d.attnNorm, nil, L.AttnNorm}, {&d.ffnNorm, nil, L.FFNNorm},
			{&d.qkv, []*ml.Matrix{L.Q, L.K, L.V}, nil}, {&d.o, []*ml.Matrix{L.O}, nil},
		}, ffn...) {
			if s.mats != nil {
				*s.dst, err = r.uploadMats(s.mats...)
			} else {
				*s.dst, err = r.uploadVec(s.vec)
			}
			if err != nil {
				return err
			}
		}
		if L.QBias != nil || L.KBias != nil || L.VBias != nil {
			c := w.Config
			q, kv := c.Heads*c.HeadDim, c.KVDim()
			b := make([]float32, q+2*kv)
			copy(b, L.QBias)
			copy(b[q:], L.KBias)
			copy(b[q+kv:], L.VBias)
			if d.qkvBias, err = r.uploadVec(b); err != nil {
				return err
			}
		}
		for _, s := range []struct {
			dst *uint64
			vec []float32
		}{{&d.oBias, L.OBias}, {&d.qNorm, L.QNorm}, {&d.kNorm, L.KNorm}, {&d.postAttn, L.PostAttnNorm}, {&d.postFFN, L.PostFFNNorm}, {&d.sinks, L.Sinks}} {
			if s.vec == nil {
				continue
			}
			if *s.dst, err = r.uploadVec(s.vec); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close frees the runner's device memory (not the pool).
func (r *Runner) Close() error {
	var errs []error
	for _, b := range append(append(r.bufs, r.ropeTabs...), r.scratch, r.meta) {
		if b.Ptr != 0 {
			errs = append(errs, r.dev.Free(b))
		}
	}
	r.bufs, r.ropeTabs, r.scratch, r.meta = nil, nil, cuda.Buffer{}, cuda.Buffer{}
	for _, h := range []*cuda.HostBuffer{r.hostMeta, r.hostOut, r.hostMoE} {
		if h != nil {
			errs = append(errs, h.Free())
		}
	}
	r.hostMeta, r.hostOut, r.hostMoE = nil, nil, nil
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Config is the model's configuration.
func (r *Runner) Config() model.Config { return r.cfg }

// WeightBytes is the size of the weights streamed by one step (every
// matrix once; the output matrix once even when tied). For a
// mixture-of-experts layer it counts the router, the shared expert and
// Used experts: what a decode step of one sequence reads.
func (r *Runner) WeightBytes() int64 {
	c := r.cfg
	q := c.Heads * c.HeadDim
	attn := int64(c.Dim)*int64(q+2*c.KVDim()) + int64(q)*int64(c.Dim)
	total := int64(c.Vocab) * int64(c.Dim)
	for _, L := range r.layers {
		total += attn
		if d := L.moe; d != nil {
			m := c.Block.MoE
			total += int64(c.Dim) * (int64(m.Experts) + 3*int64(m.Used)*int64(m.Hidden) + 3*int64(d.shHidden))
			if d.shGate != 0 {
				total += int64(c.Dim)
			}
			continue
		}
		total += 3 * int64(c.Dim) * int64(c.Hidden)
	}
	return total * int64(r.wdt.Size())
}

// ensureRope makes the cos/sin tables cover positions [0, n). They are
// computed on the host by model.Rope, as the CPU pass computes them.
func (r *Runner) ensureRope(n int) error {
	if n <= r.ropeRows {
		return nil
	}
	rows := max(n, 2*r.ropeRows, 1024)
	rd := r.ropes[0].Dim()
	tabs := make([]cuda.Buffer, len(r.ropes))
	for k, rp := range r.ropes {
		tab := make([]float32, rows*rd)
		for pos := range rows {
			rp.Fill(tab[pos*rd:(pos+1)*rd], pos)
		}
		b, err := r.dev.Alloc(int64(4 * len(tab)))
		if err != nil {
			for _, t := range tabs[:k] {
				r.dev.Free(t)
			}
			return err
		}
		tabs[k] = b
		if err := r.dev.Run(func(q *cuda.Queue) error { return q.Upload(b.Ptr, ml.F32Bytes(tab)) }); err != nil {
			for _, t := range tabs[:k+1] {
				r.dev.Free(t)
			}
			return err
		}
	}
	var firstErr error
	for _, old := range r.ropeTabs {
		if old.Ptr != 0 {
			if err := r.dev.Free(old); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	r.ropeTabs, r.ropeRows = tabs, rows
	return firstErr
}

// scratch layout, in bytes, for n rows.
type layout struct {
	x, xh, qkv, att, gu, hh, lx, logits, arg, tmp int64
	// Mixture of experts (moeLayout): router logits, routing (tok, slot,
	// wts), gathered inputs, gate|up, activations and outputs per (token,
	// choice); the shared expert's gate|up, activations, output and gate.
	mLogits, mTok, mXE, mGU, mH, mY int64
	sGU, sH, sY, sG                 int64
	total                           int64
}

func (r *Runner) layoutFor(n, m int) layout {
	c := r.cfg
	q := c.Heads * c.HeadDim
	qkvW := q + 2*c.KVDim()
	ah := int64(4)
	if r.half {
		ah = 2
	}
	var l layout
	off := int64(0)
	take := func(b int64) int64 {
		o := off
		off += (b + 255) &^ 255
		return o
	}
	N := int64(n)
	l.x = take(N * int64(c.Dim) * 4)
	l.xh = take(N * int64(max(c.Dim, q, c.Hidden)) * ah)
	l.qkv = take(N * int64(qkvW) * 4)
	l.att = take(N * int64(q) * ah)
	l.gu = take(N * int64(2*c.Hidden) * 4)
	l.hh = take(N * int64(c.Hidden) * ah)
	l.lx = take(int64(m) * int64(c.Dim) * ah)
	l.logits = take(int64(m) * int64(c.Vocab) * 4)
	l.arg = take(int64(m) * 4)
	l.tmp = take(N * int64(c.Dim) * 4)
	r.moeLayout(&l, n, take)
	l.total = off
	return l
}

// Forward runs one step; see model.Runner.Forward. It returns once the
// device has finished the step, also when the step fails part way (the
// step's page leases may be dropped then), and, on success, once the tables
// have been advanced.
func (r *Runner) Forward(b *model.Batch) error { return r.forward(b, nil) }

// ForwardArgmax is Forward computing only the greedy token of each
// sequence that asked for logits (out[i], -1 for the others) on the device,
// without copying logits to the host.
func (r *Runner) ForwardArgmax(b *model.Batch, out []int) error {
	if len(out) < len(b.Seqs) {
		return fmt.Errorf("gpu: ForwardArgmax with %d outputs for %d sequences", len(out), len(b.Seqs))
	}
	for i, s := range b.Seqs {
		if s.Draft > 0 {
			return fmt.Errorf("gpu: ForwardArgmax: sequence %d has %d draft tokens; verifying drafts needs Forward's logits", i, s.Draft)
		}
	}
	return r.forward(b, out)
}

// runStep queues a step's work through f on the device worker and returns
// only when the device has finished everything queued, on every exit path.
// When f fails part way (a launch or cuBLAS error, or a panic), kernels and
// copies it queued before the failure may still read or write the step's
// pages and the pinned metadata and output buffers; returning then would let
// the caller drop the page leases (invariant 5) and the next step refill the
// pinned buffers under a pending copy. So it waits for the stream first.
func (r *Runner) runStep(f func(q *cuda.Queue) error) error {
	return r.dev.Run(func(q *cuda.Queue) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("gpu: panic in a forward step: %v", p)
			}
			// On success f has synchronized already and this costs one
			// driver call on an idle stream.
			if serr := q.Sync(); serr != nil {
				err = errors.Join(err, fmt.Errorf("gpu: waiting for the device after a step: %w", serr))
			}
		}()
		return f(q)
	})
}

type meta struct {
	tokens, pos, span, pageOff, npages []int32
	koff                               []int64
	pages                              []uint32
	logitRows                          []int32
	want                               []int // sequence index of each logit row
}

// plan validates the batch (model.Batch.Check, as every runner does) and
// resolves every row's slot.
func (r *Runner) plan(b *model.Batch) (*meta, int, error) {
	n, err := b.Check(r.cfg.Vocab)
	if err != nil {
		return nil, 0, err
	}
	m := &meta{}
	pe := int64(r.geo.PageElems())
	kvDim := int64(r.geo.KVDim())
	end := 0
	for i, s := range b.Seqs {
		pages := s.Table.Pages()
		off := int32(len(m.pages))
		m.pages = append(m.pages, pages...)
		start := s.Table.Written()
		for j, t := range s.Tokens {
			pos := start + j
			pg, slot, err := s.Table.Location(pos)
			if err != nil {
				return nil, 0, fmt.Errorf("gpu: locate KV slot: %w", err)
			}
			m.tokens = append(m.tokens, int32(t))
			m.pos = append(m.pos, int32(pos))
			m.span = append(m.span, int32(pos+1))
			m.pageOff = append(m.pageOff, off)
			m.npages = append(m.npages, int32(len(pages)))
			m.koff = append(m.koff, SlotOffset(pg, slot, pe, kvDim))
		}
		end += len(s.Tokens)
		for j := s.LogitRows(); j > 0; j-- {
			m.logitRows = append(m.logitRows, int32(end-j))
			m.want = append(m.want, i)
		}
	}
	return m, n, nil
}

// SlotOffset is the element offset of a slot's K in layer 0:
// kvcache.Geometry.KOffset(page, 0, slot). The kernels add
// layer*2*PageSize*KVDim for other layers and PageSize*KVDim for V.
func SlotOffset(page uint32, slot int, pageElems, kvDim int64) int64 {
	return int64(page)*pageElems + int64(slot)*kvDim
}

// packMeta lays the metadata out in the pinned buffer, 8-byte aligned
// sections, and returns the offsets.
func packMeta(buf []byte, m *meta) (offs [8]int, used int, err error) {
	sections := [][]byte{
		i32Bytes(m.tokens), i32Bytes(m.pos), i32Bytes(m.span), i32Bytes(m.pageOff), i32Bytes(m.npages),
		i64Bytes(m.koff), u32Bytes(m.pages), i32Bytes(m.logitRows),
	}
	off := 0
	for i, s := range sections {
		off = (off + 7) &^ 7
		if off+len(s) > len(buf) {
			return offs, 0, fmt.Errorf("gpu: step metadata of %d+ bytes exceeds %d", off+len(s), len(buf))
		}
		offs[i] = off
		copy(buf[off:], s)
		off += len(s)
	}
	return offs, off, nil
}

func i32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
func u32Bytes(v []uint32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
func i64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}
