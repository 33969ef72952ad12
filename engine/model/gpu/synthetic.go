package gpu

import (
	"fmt"
	"math"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// NewSynthetic builds a runner whose weights are generated on the device
// from seed (uniform, standard deviation 1/sqrt(fan_in); norms 1; output
// tied to the embedding), so a model the size of Llama-3.2-1B is ready in
// milliseconds without host generation or upload. It is for benchmarks: the
// weights are random.
func NewSynthetic(dev *cuda.Device, c model.Config, seed uint64, pool *kvcache.Pool, opt Options) (*Runner, error) {
	if c.Block.QKNorm || c.Block.PostNorms {
		return nil, fmt.Errorf("%w: synthetic GPU weights for a block with Q/K norms or post-norms", model.ErrNotImplemented)
	}
	r, err := newRunner(dev, c, nil, pool, opt)
	if err != nil {
		return nil, err
	}
	c = r.cfg
	q := c.Heads * c.HeadDim
	es := int64(r.wdt.Size())
	k := seed
	mat := func(rows, cols int) (uint64, error) {
		n := int64(rows) * int64(cols)
		p, err := r.alloc(n * es)
		if err != nil {
			return 0, err
		}
		k++
		scale := float32(math.Sqrt(3 / float64(cols)))
		err = dev.Run(func(qu *cuda.Queue) error {
			var a cuda.Args
			a.Ptr(p).I64(n).U64(k * 0x9e3779b97f4a7c15).F32(scale)
			name := "kv_rand_f32"
			if r.wdt == device.F16 {
				name = "kv_rand_f16"
			}
			return qu.Launch(name, cuda.Grid1D(n, 256, 8192), cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
		})
		return p, err
	}
	ones := func(n int) (uint64, error) {
		p, err := r.alloc(int64(4 * n))
		if err != nil {
			return 0, err
		}
		return p, dev.Run(func(qu *cuda.Queue) error { return qu.Memset32(p, math.Float32bits(1), int64(n)) })
	}
	fail := func(err error) (*Runner, error) {
		r.Close()
		return nil, fmt.Errorf("gpu: synthetic weights: %w", err)
	}
	if r.embed, err = mat(c.Vocab, c.Dim); err != nil {
		return fail(err)
	}
	r.output = r.embed
	if r.norm, err = ones(c.Dim); err != nil {
		return fail(err)
	}
	r.layers = make([]layerW, c.Layers)
	for i := range r.layers {
		L := &r.layers[i]
		for _, s := range []struct {
			dst        *uint64
			rows, cols int
		}{
			{&L.qkv, q + 2*c.KVDim(), c.Dim}, {&L.o, c.Dim, q}, {&L.gu, 2 * c.Hidden, c.Dim}, {&L.down, c.Dim, c.Hidden},
		} {
			if *s.dst, err = mat(s.rows, s.cols); err != nil {
				return fail(err)
			}
		}
		if L.attnNorm, err = ones(c.Dim); err != nil {
			return fail(err)
		}
		if L.ffnNorm, err = ones(c.Dim); err != nil {
			return fail(err)
		}
	}
	if err := dev.Sync(); err != nil {
		return fail(err)
	}
	return r, nil
}

// Llama32_1B is the shape of Llama-3.2-1B (dim 2048, 16 layers, 32 heads,
// 8 KV heads, hidden 8192, vocab 128256), for benchmarks.
func Llama32_1B() model.Config {
	return model.Config{
		Dim: 2048, Hidden: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64,
		Vocab: 128256, MaxContext: 131072, NormEps: 1e-5, RopeTheta: 500000, RopeDim: 64,
		BOS: 128000, EOS: 128001,
	}
}
