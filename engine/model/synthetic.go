package model

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/kvwarden/kvwarden/engine/ml"
)

// SyntheticName is the Weights.Name of every synthetic model, so that
// anything printing it makes plain that the weights are random.
const SyntheticName = "synthetic (built-in, random weights)"

// The byte-level vocabulary of DefaultConfig, laid out as llama2.c and
// SentencePiece lay out their special and byte-fallback tokens: id 0 is
// <unk>, 1 is BOS (<s>), 2 is EOS (</s>), and ids 3..258 are the bytes
// 0x00..0xFF (token <0xNN> is id SyntheticByteOffset+0xNN). A tokenizer
// for it maps each byte of the text to one token.
const (
	SyntheticUNK        = 0
	SyntheticBOS        = 1
	SyntheticEOS        = 2
	SyntheticByteOffset = 3
	SyntheticVocab      = SyntheticByteOffset + 256 // 259
)

// DefaultSeed is the seed of the built-in model.
const DefaultSeed = 0x6b7677617264656e // "kvwarden"

// DefaultConfig is the shape of the built-in synthetic model: dim 256,
// hidden 768, 4 layers, 8 query heads sharing 4 KV heads (head dim 32),
// context 2048, and the byte-level vocabulary described at
// SyntheticVocab. Every matrix width is a multiple of 256, so all
// quantized types apply.
func DefaultConfig() Config {
	return Config{
		Dim: 256, Hidden: 768, Layers: 4, Heads: 8, KVHeads: 4, HeadDim: 32,
		Vocab: SyntheticVocab, MaxContext: 2048,
		NormEps: 1e-5, RopeTheta: 10000, RopeDim: 32,
		BOS: SyntheticBOS, EOS: SyntheticEOS,
	}
}

// Stories110MConfig is the shape of llama2.c's stories110M (dim 768,
// hidden 2048, 12 layers, 12 heads, vocab 32000, context 1024), used with
// Synthetic for benchmarks. The vocabulary matches the Llama 2 tokenizer
// (shared/models/tokenizer.bin): BOS 1, EOS 2.
func Stories110MConfig() Config {
	return Config{
		Dim: 768, Hidden: 2048, Layers: 12, Heads: 12, KVHeads: 12, HeadDim: 64,
		Vocab: 32000, MaxContext: 1024,
		NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64,
		BOS: 1, EOS: 2,
	}
}

// Synthetic generates a model of shape cfg whose weights are a
// deterministic function of seed: the same (cfg, seed, t) gives the same
// bytes on every machine and at any GOMAXPROCS. Matrix entries are
// approximately N(0, 1/fan_in) (standard deviation 1/sqrt(Cols), an
// Irwin-Hall sum of four uniforms from splitmix64), so activations keep
// their scale through the layers; norm weights are 1; the output matrix
// is tied to the embedding. Matrices are stored as t (F32, or any type
// ml.Quantize accepts); norms stay float32.
func Synthetic(cfg Config, seed uint64, t ml.Type) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RopeDim == 0 {
		cfg.RopeDim = cfg.HeadDim
	}
	qDim := cfg.Heads * cfg.HeadDim
	if cfg.Vocab > 1<<24 || cfg.Dim > 1<<16 || cfg.Hidden > 1<<18 || qDim > 1<<16 {
		return nil, fmt.Errorf("model: synthetic config %+v is too large", cfg)
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	id := uint64(0)
	var firstErr error
	gen := func(rows, cols int) *ml.Matrix {
		id++
		if firstErr != nil {
			return nil
		}
		m, err := randomMatrix(t, rows, cols, seed, id)
		if err != nil {
			firstErr = fmt.Errorf("model: synthetic %v weights: %w", t, err)
		}
		return m
	}
	w := &Weights{Config: cfg, Name: SyntheticName}
	w.Embed = gen(cfg.Vocab, cfg.Dim)
	w.Output = w.Embed
	w.Norm = ones(cfg.Dim)
	w.Layers = make([]Layer, cfg.Layers)
	for i := range w.Layers {
		w.Layers[i] = Layer{
			AttnNorm: ones(cfg.Dim),
			Q:        gen(qDim, cfg.Dim),
			K:        gen(cfg.KVDim(), cfg.Dim),
			V:        gen(cfg.KVDim(), cfg.Dim),
			O:        gen(cfg.Dim, qDim),
			FFNNorm:  ones(cfg.Dim),
			Gate:     gen(cfg.Hidden, cfg.Dim),
			Up:       gen(cfg.Hidden, cfg.Dim),
			Down:     gen(cfg.Dim, cfg.Hidden),
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if err := w.Check(); err != nil {
		return nil, err
	}
	return w, nil
}

// randomMatrix fills a rows x cols matrix of type t. Each row has its own
// random stream (seeded from seed, the matrix id and the row), so rows can
// be generated in parallel with identical results.
func randomMatrix(t ml.Type, rows, cols int, seed, id uint64) (*ml.Matrix, error) {
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	std := float32(1 / math.Sqrt(float64(cols)))
	data := make([]byte, rows*rb)
	if t == ml.F32 {
		data = ml.F32Bytes(make([]float32, rows*cols))
	}
	const chunk = 64 // rows per work item
	workers := min(runtime.GOMAXPROCS(0), (rows+chunk-1)/chunk)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		next    int
		loopErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []float32
			for {
				mu.Lock()
				lo := next
				next += chunk
				mu.Unlock()
				if lo >= rows {
					return
				}
				hi := min(lo+chunk, rows)
				var dst []float32
				if t == ml.F32 {
					dst = ml.BytesF32(data[lo*rb : hi*rb])
				} else {
					if scratch == nil {
						scratch = make([]float32, chunk*cols)
					}
					dst = scratch[:(hi-lo)*cols]
				}
				for r := lo; r < hi; r++ {
					fillRow(dst[(r-lo)*cols:(r-lo+1)*cols], seed, id, uint64(r), std)
				}
				if t != ml.F32 {
					q, err := ml.Quantize(t, hi-lo, cols, dst)
					if err != nil {
						mu.Lock()
						loopErr = err
						next = rows
						mu.Unlock()
						return
					}
					copy(data[lo*rb:hi*rb], q.Data)
				}
			}
		}()
	}
	wg.Wait()
	if loopErr != nil {
		return nil, loopErr
	}
	return ml.NewMatrix(t, rows, cols, data)
}

// fillRow writes approximately N(0, std²) values: the sum of four 16-bit
// uniforms from one splitmix64 draw, centred and scaled to unit variance.
func fillRow(dst []float32, seed, id, row uint64, std float32) {
	s := mix64(mix64(seed+id*0x9e3779b97f4a7c15) ^ (row+1)*0xbf58476d1ce4e5b9)
	const scale = 1.7320508 / 65536 // sqrt(3) (unit variance) / 2^16
	for i := range dst {
		s += 0x9e3779b97f4a7c15
		z := mix64(s)
		sum := int64(z&0xffff) + int64(z>>16&0xffff) + int64(z>>32&0xffff) + int64(z>>48) - 2*65535
		dst[i] = float32(sum) * scale * std
	}
}

// mix64 is splitmix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
